"""Attention: scaled_dot_product_attention and friends."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.attention")
