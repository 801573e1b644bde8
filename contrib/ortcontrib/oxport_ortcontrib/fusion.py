"""Graph pass: ``Add(x, bias)`` feeding ``com.microsoft::Gelu`` becomes ``BiasGelu(x, bias)``."""

from __future__ import annotations

import collections
from typing import Any

from oxport.ir import Graph, Node, Value

DOMAIN = "com.microsoft"


def fuse_bias_gelu(graph: Graph, conversion: Any = None) -> int:
    """Fuse every ``Gelu(Add(x, b))`` whose ``b`` is a constant 1-D bias over the last axis
    and whose sum has no other use; returns how many were fused."""
    uses = collections.Counter(id(v) for node in graph.walk() for v in node.input_values
                               if v is not None)
    uses.update(id(v) for v in graph.outputs)
    producers = {id(out): node for node in graph.nodes for out in node.output_values}
    fused: set[int] = set()
    for node in graph.nodes:
        if (node.domain, node.op_type) != (DOMAIN, "Gelu"):
            continue
        add = producers.get(id(node.input_values[0]))
        if add is None or (add.domain, add.op_type) != ("", "Add") \
                or uses[id(add.output_values[0])] != 1:
            continue
        split = _input_and_bias(add)
        if split is None:
            continue
        node.op_type = "BiasGelu"
        node.input_values = list(split)
        fused.add(id(add))
    graph.nodes = [n for n in graph.nodes if id(n) not in fused]
    return len(fused)


def _input_and_bias(add: Node) -> tuple[Value, Value] | None:
    shape = add.output_values[0].type().shape
    if not shape or not isinstance(shape[-1], int):
        return None
    size = shape[-1]
    for x, bias in (add.input_values, list(reversed(add.input_values))):
        if x is None or bias is None or not bias.is_const or \
                tuple(getattr(bias.const, "shape", ())) != (size,):
            continue
        if _last_dim(x) == size:
            return x, bias
    return None


def _last_dim(value: Value) -> int | None:
    """The last dimension of ``value``: from its type, or from a MatMul's constant weight."""
    shape = value.type().shape
    if shape:
        return shape[-1] if isinstance(shape[-1], int) else None
    producer = value.producer
    if producer is not None and (producer.domain, producer.op_type) == ("", "MatMul"):
        weight = producer.input_values[1]
        if weight is not None and weight.is_const and len(getattr(weight.const, "shape", ())) == 2:
            return int(weight.const.shape[-1])
        if weight is not None and weight.producer is not None \
                and weight.producer.op_type == "Transpose" and weight.producer.input_values[0].is_const:
            return int(weight.producer.input_values[0].const.shape[0])
    return None
