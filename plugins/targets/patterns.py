"""Small helpers the built-in targets' passes match graph patterns with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from oxport.ir import Graph, Node, Type, Value
from oxport.passes import folding
from oxport.serialize.weights import LazyTensor


class Index:
    """Who reads each value of a graph (top level; None for a graph output), and its
    outputs."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.users = folding.consumers(graph)
        self.outputs = {id(v) for v in graph.outputs}

    def readers(self, value: Value) -> list[Node | None]:
        return self.users.get(id(value), [])


def producer(value: Value | None, *ops: str, domain: str = "") -> Node | None:
    """The node making ``value`` when it is one of ``ops`` of ``domain``."""
    node = value.producer if value is not None else None
    if node is None or node.domain != domain or node.op_type not in ops:
        return None
    return node


def skip_casts(value: Value | None) -> Value | None:
    """``value`` before any chain of ``Cast`` nodes."""
    while (cast := producer(value, "Cast")) is not None:
        value = cast.input_values[0]
    return value


def const(value: Value | None) -> np.ndarray | None:
    """The constant ``value`` holds, as a numpy array (None if it is not constant, or is a
    weight computed only when written)."""
    if value is None or not value.is_const or isinstance(value.const, LazyTensor):
        return None
    data = value.const
    return as_array(data) if isinstance(data, torch.Tensor) else np.asarray(data)


def as_array(tensor: torch.Tensor) -> np.ndarray:
    """``tensor`` as a numpy array (bfloat16, which numpy lacks, as float32)."""
    tensor = tensor.detach()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def weight_data(value: Value | None) -> np.ndarray | LazyTensor | None:
    """The constant ``value`` holds: a numpy array as :func:`const` gives it, or the weight
    computed when written (streamed from a checkpoint) as it is."""
    if value is not None and value.is_const and isinstance(value.const, LazyTensor):
        return value.const
    return const(value)


def scalar(value: Value | None) -> float | None:
    """The one number a constant holds (None otherwise)."""
    data = const(value)
    return float(data.reshape(-1)[0]) if data is not None and data.size == 1 else None


def attr(node: Node, name: str, default: Any = None) -> Any:
    return node.attrs[name][1] if name in node.attrs else default


def reduced_axes(node: Node) -> list[int] | None:
    """A Reduce node's axes (attribute before opset 18, input after)."""
    if "axes" in node.attrs:
        return list(node.attrs["axes"][1])
    if len(node.input_values) > 1:
        data = const(node.input_values[1])
        return None if data is None else [int(a) for a in data.reshape(-1)]
    return None


def rank(value: Value) -> int | None:
    shape = value.type().shape
    return None if shape is None else len(shape)


def insert_before(graph: Graph, anchor: Node, nodes: Iterable[Node]) -> None:
    """Move ``nodes`` (made by ``graph.add_node``, so at the end) to just before
    ``anchor``, keeping the list topologically sorted."""
    moved = [n for n in nodes]
    ids = {id(n) for n in moved}
    rest = [n for n in graph.nodes if id(n) not in ids]
    at = next(i for i, n in enumerate(rest) if n is anchor)
    graph.nodes = rest[:at] + moved + rest[at:]


def replace_value(graph: Graph, old: Value, new: Value) -> None:
    """Every use of ``old`` (graph outputs too) reads ``new``; ``new`` takes ``old``'s
    type when it has none."""
    if new.type().dtype() is None:
        new.setType(old.type())
    folding.replace_uses(graph, {id(old): new})


def initializer(graph: Graph, hint: str, data: np.ndarray | torch.Tensor | LazyTensor
                ) -> Value:
    """A new initializer holding ``data`` (a weight computed when written too)."""
    if isinstance(data, LazyTensor):
        return graph.add_initializer(graph.fresh_name(hint), data,
                                     Type.tensor(data.dtype, tuple(data.shape)))
    tensor = torch.from_numpy(np.ascontiguousarray(data)) if isinstance(data, np.ndarray) \
        else data
    return graph.add_initializer(graph.fresh_name(hint), tensor, Type.of(tensor))


def replace_later_uses(graph: Graph, node: Node, old: Value, new: Value) -> None:
    """Uses of ``old`` by the nodes after ``node`` and by the graph outputs read ``new``
    (a node before ``node``, such as a Shape of the old value, keeps reading it)."""
    if new.type().dtype() is None:
        new.setType(old.type())
    after = False
    for other in graph.nodes:
        if after:
            other.input_values = [new if v is old else v for v in other.input_values]
        after = after or other is node
    graph.outputs = [new if v is old else v for v in graph.outputs]


def last_dim(value: Value | None) -> int | None:
    """The size of ``value``'s last axis: from its type, or from the constant weight of
    the ``MatMul`` making it."""
    shape = value.type().shape if value is not None else None
    if shape and isinstance(shape[-1], int):
        return shape[-1]
    matmul = producer(value, "MatMul")
    weight = const(matmul.input_values[1]) if matmul is not None else None
    return int(weight.shape[-1]) if weight is not None and weight.ndim >= 2 else None
