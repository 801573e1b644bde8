"""Quantized tensors at the graph's edges, as torch.onnx's TorchScript path has them.

A quantized (per-tensor) argument is three inputs, ``<name>_value`` (its integer
storage), ``<name>_scale`` (float64, 0-d) and ``<name>_zero_point`` (int64, 0-d), which a
DequantizeLinear turns into the float tensor the graph computes with; a quantized output
is three outputs: its integer value, its scale and its zero point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from onnx import TensorProto

from oxport.errors import OnnxExporterError
from oxport.ir import Graph, Type, Value

#: The integer type ONNX stores each quantized dtype in.
_STORAGE = {torch.quint8: torch.uint8, torch.qint8: torch.int8}
#: The parts of a quantized argument, in input order.
PARTS = ("value", "scale", "zero_point")


def split_inputs(graph: Graph, examples: Sequence[Any], input_names: Sequence[str] | None,
                 opset: int) -> Sequence[str] | None:
    """Replace each quantized user input by its three parts; returns ``input_names`` with
    each given name of a quantized input replaced by its three (``x`` -> ``x_value``...)."""
    names = list(input_names or [])
    inputs: list[Value] = []
    prologue = []
    for index, (value, example) in enumerate(zip(list(graph.inputs), examples)):
        if not (isinstance(example, torch.Tensor) and example.is_quantized
                and example.dtype in _STORAGE):
            inputs.append(value)
            continue
        if example.qscheme() not in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            raise OnnxExporterError(
                f"Input {value.name!r} is quantized per channel; torch.onnx exports quantized "
                "inputs per tensor only: pass it dequantized, or quantized per tensor.")
        if opset < 10:
            raise OnnxExporterError(
                f"Input {value.name!r} is a quantized tensor, which needs DequantizeLinear: "
                "export with opset_version=10 or newer.")
        base = names[index] if index < len(names) else value.name
        storage = _STORAGE[example.dtype]
        types = (Type.tensor(storage, list(example.shape)), Type.tensor(torch.float64, []),
                 Type.tensor(torch.int64, []))
        # add_input appends; graph.inputs is rebuilt below with the parts in value's place.
        parts = [graph.add_input(f"{base}_{part}", t) for part, t in zip(PARTS, types)]
        leaf = (value.meta or {}).get("arg_leaf")
        for part, new in zip(PARTS, parts):
            new.meta = {"arg_leaf": leaf, "arg_part": part}
        scale = _cast(graph, parts[1], TensorProto.FLOAT, torch.float32)
        zero_point = _cast(graph, parts[2], _ONNX[storage], storage)
        dequantize = graph.add_node("", "DequantizeLinear", [parts[0], scale, zero_point])
        dequantized = dequantize.output_values[0]
        dequantized.setType(Type.tensor(torch.float32, list(example.shape)))
        prologue += [scale.producer, zero_point.producer, dequantize]
        _replace_uses(graph, value, dequantized)
        inputs += parts
        if index < len(names):
            names[index:index + 1] = [f"{base}_{part}" for part in PARTS]
    if prologue:
        graph.nodes = prologue + [n for n in graph.nodes if n not in prologue]
        graph.inputs = inputs
        return names
    return input_names


def quantized_outputs(ts_graph: torch._C.Graph) -> list[bool]:
    """Which outputs of the front end's graph are quantized tensors."""
    return [o.type().kind() == "TensorType" and o.type().dtype() in _STORAGE
            for o in ts_graph.outputs()]


def expand(tensor: torch.Tensor) -> list[torch.Tensor]:
    """A tensor as the outputs it becomes: a quantized one as its integer value, scale
    (float32) and zero point (its storage type), as the exported file returns them."""
    if not (tensor.is_quantized and tensor.dtype in _STORAGE):
        return [tensor]
    storage = _STORAGE[tensor.dtype]
    return [tensor.int_repr(), torch.tensor(tensor.q_scale(), dtype=torch.float32),
            torch.tensor(tensor.q_zero_point(), dtype=storage)]


def feed(tensor: torch.Tensor, part: str) -> torch.Tensor:
    """One part of a quantized argument, as its input takes it."""
    if part == "value":
        return tensor.int_repr()
    if part == "scale":
        return torch.tensor(tensor.q_scale(), dtype=torch.float64)
    return torch.tensor(tensor.q_zero_point(), dtype=torch.int64)


def split_outputs(graph: Graph, quantized: Sequence[bool]) -> None:
    """Replace each quantized output (a DequantizeLinear's result) by its integer value,
    scale and zero point."""
    if not any(quantized) or len(quantized) != len(graph.outputs):
        return
    outputs: list[Value] = []
    for value, is_quantized in zip(graph.outputs, quantized):
        node = value.producer
        if is_quantized and node is not None and node.op_type == "DequantizeLinear":
            outputs += [v for v in node.input_values if v is not None]
        else:
            outputs.append(value)
    graph.outputs = outputs


_ONNX = {torch.uint8: TensorProto.UINT8, torch.int8: TensorProto.INT8}


def _cast(graph: Graph, value: Value, to: int, dtype: torch.dtype) -> Value:
    node = graph.add_node("", "Cast", [value], attrs={"to": ("i", to)})
    node.output_values[0].setType(Type.tensor(dtype, []))
    return node.output_values[0]


def _replace_uses(graph: Graph, old: Value, new: Value) -> None:
    for node in graph.walk():
        node.input_values = [new if v is old else v for v in node.input_values]
    graph.outputs = [new if v is old else v for v in graph.outputs]
