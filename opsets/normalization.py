"""Normalization layers: batch, layer, group, instance and RMS norm."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.normalization")
