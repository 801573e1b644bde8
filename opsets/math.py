"""Math, comparison, logical and bitwise ops."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.math")
