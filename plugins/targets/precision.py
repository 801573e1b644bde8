"""``dtype="bf16"`` on ONNX Runtime's CPU, which moves bfloat16 tensors but computes
nothing in it: each computing node of bfloat16 values runs in float32 between casts, its
result rounded back to bfloat16 as eager PyTorch rounds each op's result. Weights stay
bfloat16 in the file (half the size); a runtime with bfloat16 kernels can drop the casts.
"""

from __future__ import annotations

from typing import Any

import torch

from oxport.errors import InvalidExportArgumentError
from oxport.ir import Graph, Node, Type, Value
from oxport.types import onnx_dtype

#: Ops ONNX Runtime's CPU runs on bfloat16 tensors (probed with onnxruntime 1.32).
_MOVES_BFLOAT16 = frozenset({"Reshape", "Transpose", "Concat", "Slice", "Gather",
                             "Unsqueeze", "Squeeze", "Shape", "Identity", "Cast",
                             "ConstantOfShape", "Constant"})


def compute_bfloat16_in_float32(graph: Graph, context: Any) -> int:
    """Wrap every computing node with bfloat16 inputs or outputs in casts (see the
    module doc); returns how many nodes it wrapped."""
    if context.dtype != torch.bfloat16:
        return 0
    if context.quantize is not None:
        raise InvalidExportArgumentError(
            "dtype='bf16' with quantize= is not supported: quantize a float32 or float16 "
            "export (dtype='fp16').")
    nodes: list[Node] = []
    wrapped = 0
    dtypes: dict[int, torch.dtype | None] = {}
    for node in graph.nodes:
        _carry_dtypes(node, dtypes)
        if node.domain or node.op_type in _MOVES_BFLOAT16 or not _touches_bfloat16(node, dtypes):
            nodes.append(node)
            continue
        wrapped += 1
        for index, value in enumerate(node.input_values):
            if value is not None and _dtype(value, dtypes) == torch.bfloat16:
                cast = _cast(graph, value, torch.float32)
                node.input_values[index] = cast.output_values[0]
                nodes.append(cast)
        nodes.append(node)
        for index, out in enumerate(node.output_values):
            if out.dtype == torch.bfloat16:
                wide = Value(graph, graph.fresh_name(node.op_type),
                             out.type().with_dtype(torch.float32), node, index)
                node.output_values[index] = wide
                nodes.append(_cast(graph, wide, torch.bfloat16, out))
    graph.nodes = nodes
    return wrapped


def _dtype(value: Value, dtypes: dict[int, torch.dtype | None]) -> torch.dtype | None:
    return value.dtype or dtypes.get(id(value))


def _carry_dtypes(node: Node, dtypes: dict[int, torch.dtype | None]) -> None:
    """The dtype of outputs with none in their type, where the op moves its first input
    (a Transpose of a weight) or casts."""
    if node.op_type == "Cast":
        carried = next((d for d in (torch.float32, torch.float16, torch.bfloat16)
                        if onnx_dtype(d) == node.attrs["to"][1]), None)
    elif node.op_type in _MOVES_BFLOAT16 and node.op_type not in ("Shape", "ConstantOfShape") \
            and node.input_values and node.input_values[0] is not None:
        carried = _dtype(node.input_values[0], dtypes)
    else:
        return
    for out in node.output_values:
        if out.dtype is None:
            dtypes[id(out)] = carried


def _touches_bfloat16(node: Node, dtypes: dict[int, torch.dtype | None]) -> bool:
    return any(v is not None and _dtype(v, dtypes) == torch.bfloat16
               for v in (*node.input_values, *node.output_values))


def _cast(graph: Graph, value: Value, dtype: torch.dtype, out: Value | None = None) -> Node:
    """``Cast(value, to=dtype)``, into ``out`` when given."""
    cast = Node("", "Cast", [value], [], {"to": ("i", onnx_dtype(dtype))})
    if out is None:
        kind = value.type()
        out = Value(graph, graph.fresh_name("Cast"),
                    kind.with_dtype(dtype) if kind.kind() == "TensorType" else Type.tensor(dtype),
                    cast, 0)
    else:
        out.producer, out.index = cast, 0
    cast.output_values = [out]
    return cast
