"""Indexing: select, slice, index, gather/scatter, masked ops, index_put."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.indexing")
