"""Reductions: sum, mean, prod, max/min, arg*, norms, cumulative ops."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.reduction")
