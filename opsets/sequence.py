"""Lists of tensors as ONNX Sequences (opset 11+)."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.sequence")
