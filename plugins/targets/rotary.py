"""The rotary embedding ``GroupQueryAttention`` did not take inside (its attention left
unfused or fused otherwise, a head size its kernel refuses, ONNX Runtime before 1.18), as
ONNX Runtime's ``com.microsoft::RotaryEmbedding``.

``x * cos + rotate_half(x) * sin`` of a ``[batch, heads, sequence, head_size]`` tensor by
``[batch, sequence, head_size]`` tables (unsqueezed on axis 1) becomes one node. The
kernel reads its angles from ``[positions, head_size / 2]`` caches at ``position_ids``:
the graph's own tables, their first halves flattened to ``[batch * sequence, head_size /
2]``, are the caches, and row ``b * sequence + s`` is the position of token ``(b, s)`` — so
whatever positions the model computed (left padding, offsets) rotate exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from oxport.ir import Graph, Node, Type, Value
from oxport.passes import folding
from oxport.plugins.targets.attention import rotary_parts
from oxport.plugins.targets.patterns import Index, initializer, insert_before, rank, replace_value

MSFT = "com.microsoft"


def fuse_rotary_embedding_ort(graph: Graph, context: Any) -> int:
    """ort (ONNX Runtime 1.17+): every rotary pattern left as ``RotaryEmbedding``."""
    if context.target.name == "onnx" or not context.runtime_at_least("1.17") \
            or context.opset < 15:  # Shape's start and end
        return 0
    folding.eliminate_dead_code(graph)  # the patterns GroupQueryAttention took
    index = Index(graph)
    made: dict[int, Value] = {}
    count = 0
    for node in list(graph.nodes):
        found = rotary_parts(node)
        if found is None or not index.readers(node.output_values[0]):
            continue
        x, cos, sin = found
        if rank(x) != 4 or x.dtype not in (torch.float32, torch.float16) \
                or rank(cos) != 3 or rank(sin) != 3:
            continue
        positions = _positions(graph, node, cos, made)
        caches = [_cache(graph, node, table, made) for table in (cos, sin)]
        fused = graph.add_node(MSFT, "RotaryEmbedding", [x, positions, *caches],
                               attrs={"interleaved": ("i", 0)})
        insert_before(graph, node, [fused])
        replace_value(graph, node.output_values[0], fused.output_values[0])
        count += 1
    if count:
        graph.use_domain(MSFT, 1)
    return count


def _cache(graph: Graph, anchor: Node, table: Value, made: dict[int, Value]) -> Value:
    """``table[..., :head_size / 2]`` as ``[batch * sequence, head_size / 2]`` (once)."""
    if id(table) not in made:
        zero, axis = (initializer(graph, name, np.array([v], np.int64))
                      for name, v in (("zero", 0), ("last_axis", -1)))
        nodes = []
        size = (table.type().shape or (None,))[-1]
        if isinstance(size, int):
            end = initializer(graph, "half", np.array([size // 2], np.int64))
        else:  # Shape(table)[-1] / 2
            nodes.append(graph.add_node("", "Shape", [table], attrs={"start": ("i", -1)}))
            two = initializer(graph, "two", np.array([2], np.int64))
            nodes.append(graph.add_node("", "Div", [nodes[-1].output_values[0], two]))
            end = nodes[-1].output_values[0]
        nodes.append(graph.add_node("", "Slice", [table, zero, end, axis]))
        nodes.append(graph.add_node("", "Flatten", [nodes[-1].output_values[0]],
                                    attrs={"axis": ("i", 2)}))
        nodes[-1].output_values[0].setType(Type.tensor(table.dtype))
        insert_before(graph, anchor, nodes)
        made[id(table)] = nodes[-1].output_values[0]
    return made[id(table)]


def _positions(graph: Graph, anchor: Node, table: Value, made: dict[int, Value]) -> Value:
    """``arange(batch * sequence).reshape(batch, sequence)``, the rows of ``table``'s cache
    (int64, made once per table shape)."""
    key = -id(table)
    if key not in made:
        nodes = []

        def op(kind: str, inputs: list[Value], **attrs: int) -> Value:
            node = graph.add_node("", kind, inputs, attrs={k: ("i", v) for k, v in attrs.items()})
            nodes.append(node)
            return node.output_values[0]

        shape = op("Shape", [table], start=0, end=2)
        count = op("ReduceProd", [shape], keepdims=0)
        zero, one = (initializer(graph, name, np.array(v, np.int64))
                     for name, v in (("zero", 0), ("one", 1)))
        positions = op("Reshape", [op("Range", [zero, count, one]), shape])
        positions.setType(Type.tensor(torch.int64))
        insert_before(graph, anchor, nodes)
        made[key] = positions
    return made[key]
