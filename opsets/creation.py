"""Tensor creation: zeros/ones/full/arange/empty/rand* and their _like forms."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.creation")
