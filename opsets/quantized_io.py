"""Quantized tensors at the converted graph's edges, as torch.onnx's TorchScript path has
them: the quantized pack's ``oxport_graph_boundary`` hook.

A quantized (per-tensor) argument becomes three inputs, ``<name>_value`` (its integer
storage), ``<name>_scale`` (float64, 0-d) and ``<name>_zero_point`` (int64, 0-d), which a
DequantizeLinear turns into the float tensor the graph computes with; a quantized output
becomes three outputs: its integer value, its scale and its zero point. How a quantized
example is fed part by part is the front end's: :mod:`oxport.frontends.quantized_io`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from onnx import TensorProto

from oxport.errors import OnnxExporterError
from oxport.frontends.quantized_io import PARTS, STORAGE, is_quantized
from oxport.ir import Graph, Type, Value

_ONNX = {torch.uint8: TensorProto.UINT8, torch.int8: TensorProto.INT8}


def split_inputs(graph: Graph, examples: Sequence[Any], input_names: list[str],
                 opset: int) -> None:
    """Replace each quantized user input by its three parts; each given name of a quantized
    input in ``input_names`` becomes its three (``x`` -> ``x_value``...)."""
    inputs: list[Value] = []
    prologue = []
    for index, (value, example) in enumerate(zip(list(graph.inputs), examples)):
        if not is_quantized(example):
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
        base = input_names[index] if index < len(input_names) else value.name
        storage = STORAGE[example.dtype]
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
        if index < len(input_names):
            input_names[index:index + 1] = [f"{base}_{part}" for part in PARTS]
    if prologue:
        graph.nodes = prologue + [n for n in graph.nodes if n not in prologue]
        graph.inputs = inputs


#: Where a quantized output's scale and zero point come from: (scale, zero point) values
#: for a float value of the graph, or None when it is not on a known quantization grid.
GridOf = Callable[[Graph, Value], "tuple[Value, Value] | None"]


def split_outputs(graph: Graph, quantized: Sequence[bool], grid_of: GridOf) -> None:
    """Replace each quantized output by its integer value, scale and zero point: a
    DequantizeLinear's inputs, or the output quantized with the grid ``grid_of`` finds
    (a float op on a quantized tensor, as ``relu(x)``); an output on no known grid stays
    float."""
    if not any(quantized) or len(quantized) != len(graph.outputs):
        return
    outputs: list[Value] = []
    for value, split in zip(graph.outputs, quantized):
        parts = _quantized_parts(graph, value, grid_of) if split else None
        outputs += parts or [value]
    graph.outputs = outputs


def _quantized_parts(graph: Graph, value: Value, grid_of: GridOf) -> list[Value] | None:
    node = value.producer
    if node is not None and node.op_type == "DequantizeLinear" and None not in node.input_values:
        parts = list(node.input_values)
    else:
        grid = grid_of(graph, value)
        if grid is None:
            return None
        parts = [graph.add_node("", "QuantizeLinear", [value, *grid]).output_values[0], *grid]
        parts[0].setType(Type.tensor(grid[1].type().dtype(), None))
    _give_shape(parts[0], value)
    return parts


def _give_shape(integer: Value, dequantized: Value) -> None:
    """The integer value the shape of its dequantized float: a quantized op's
    QuantizeLinear is made before the walker knows its output's shape."""
    if integer.type().shape is None and dequantized.type().shape is not None:
        integer.setType(Type.tensor(integer.type().dtype(), dequantized.type().shape))


def _cast(graph: Graph, value: Value, to: int, dtype: torch.dtype) -> Value:
    node = graph.add_node("", "Cast", [value], attrs={"to": ("i", to)})
    node.output_values[0].setType(Type.tensor(dtype, []))
    return node.output_values[0]


def _replace_uses(graph: Graph, old: Value, new: Value) -> None:
    for node in graph.walk():
        node.input_values = [new if v is old else v for v in node.input_values]
    graph.outputs = [new if v is old else v for v in graph.outputs]
