"""Quantized example tensors, fed as torch.onnx's TorchScript path takes them.

A quantized (per-tensor) argument is fed as three inputs, its integer value, its scale
(float64) and its zero point (int64); a quantized output comes back as its integer value,
scale and zero point. The pack that serves :data:`BOUNDARY_OPS` splits the graph's inputs
and outputs so (the quantized pack: :mod:`oxport.opsets.quantized_io`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from oxport.frontends.base import FrontEnd

#: The integer type ONNX stores each quantized dtype in.
STORAGE = {torch.quint8: torch.uint8, torch.qint8: torch.int8}
#: The parts of a quantized argument, in input order.
PARTS = ("value", "scale", "zero_point")
#: What a quantized tensor at the graph's edge stands for, as torch.onnx has it: an argument
#: enters the graph dequantized, an output leaves it quantized. An export whose front end
#: hands one over meets these ops, so the pack serving them loads (packs load on demand)
#: and its ``oxport_graph_boundary`` hook splits the graph's inputs and outputs.
BOUNDARY_OPS = ("aten::dequantize", "aten::quantize_per_tensor")


def is_quantized(example: Any) -> bool:
    """Whether an example input is a quantized tensor fed as three parts."""
    return isinstance(example, torch.Tensor) and example.is_quantized \
        and example.dtype in STORAGE


def quantized_outputs(source_graph: Any) -> list[bool]:
    """Which outputs of a front end's source graph are quantized tensors."""
    return [o.type().kind() == "TensorType" and o.type().dtype() in STORAGE
            for o in source_graph.outputs()]


def boundary_ops(front: FrontEnd) -> tuple[str, ...]:
    """The ops ``front``'s inputs and outputs stand for: :data:`BOUNDARY_OPS` when it hands
    over a quantized tensor, else none."""
    if any(map(is_quantized, front.example_inputs)) or any(quantized_outputs(front.graph)):
        return BOUNDARY_OPS
    return ()


def expand(tensor: torch.Tensor) -> list[torch.Tensor]:
    """A tensor as the outputs it becomes: a quantized one as its integer value, scale
    (float32) and zero point (its storage type), as the exported file returns them."""
    if not is_quantized(tensor):
        return [tensor]
    storage = STORAGE[tensor.dtype]
    return [tensor.int_repr(), torch.tensor(tensor.q_scale(), dtype=torch.float32),
            torch.tensor(tensor.q_zero_point(), dtype=storage)]


def feed(tensor: torch.Tensor, part: str) -> torch.Tensor:
    """One part of a quantized argument, as its input takes it."""
    if part == "value":
        return tensor.int_repr()
    if part == "scale":
        return torch.tensor(tensor.q_scale(), dtype=torch.float64)
    return torch.tensor(tensor.q_zero_point(), dtype=torch.int64)
