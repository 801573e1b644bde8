"""Control flow: prim::If and prim::Loop as ONNX If and Loop."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.control_flow")
