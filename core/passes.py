"""Core graph passes: dead-code removal and constant folding."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from onnx import helper

from oxport.ir import Graph, Node, Type, Value

log = logging.getLogger("oxport.passes")

#: Ops whose result is not a function of their inputs.
_NONDETERMINISTIC = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                     "Multinomial", "Bernoulli", "Dropout"}
#: Fold a node only when its inputs hold at most this many elements in all.
FOLD_MAX_ELEMENTS = 1 << 24


def eliminate_dead_code(graph: Graph) -> int:
    """Remove nodes whose outputs nothing uses; returns how many were removed."""
    used: set[int] = {id(v) for v in graph.outputs}
    _mark_subgraph_uses(graph, used)
    kept: list[Node] = []
    removed = 0
    for node in reversed(graph.nodes):
        if any(id(v) in used for v in node._outputs) or not node._outputs:
            kept.append(node)
            used.update(id(v) for v in node._inputs if v is not None)
            for kind, sub in node.attrs.values():
                for subgraph in (sub if kind == "gs" else [sub] if kind == "g" else []):
                    removed += eliminate_dead_code(subgraph)
                    _mark_subgraph_uses(subgraph, used)
        else:
            removed += 1
    kept.reverse()
    graph.nodes = kept
    if graph.parent is None:
        for name in [n for n, v in graph.initializers.items() if id(v) not in used]:
            del graph.initializers[name]
    return removed


def _mark_subgraph_uses(graph: Graph, used: set[int]) -> None:
    for node in graph.walk():
        used.update(id(v) for v in node._inputs if v is not None)
    for node in graph.walk():
        for kind, sub in node.attrs.values():
            for subgraph in (sub if kind == "gs" else [sub] if kind == "g" else []):
                used.update(id(v) for v in subgraph.outputs)


def fold_constants(graph: Graph, opset: int, frozen: set[int] | None = None) -> int:
    """Replace ai.onnx nodes whose inputs are all constants by their result.

    ``frozen`` holds ids of values (e.g. parameters kept as inputs) never folded.
    Returns how many nodes were folded.
    """
    from oxport.serialize import tensor_proto

    frozen = frozen or set()
    folded = 0
    kept: list[Node] = []
    for node in graph.nodes:
        inputs = node._inputs
        if (node.domain or node.op_type in _NONDETERMINISTIC or not node._outputs
                or any(kind in ("g", "gs") for kind, _ in node.attrs.values())
                or not all(_foldable(v, frozen) for v in inputs if v is not None)
                or sum(_numel(v.const) for v in inputs if v is not None) > FOLD_MAX_ELEMENTS
                or node.op_type == "Constant"):
            kept.append(node)
            continue
        from onnx.reference import ReferenceEvaluator  # slow to import: only when needed

        names = [f"i{i}" if v is not None else "" for i, v in enumerate(inputs)]
        outs = [f"o{i}" for i in range(len(node._outputs))]
        proto = helper.make_node(node.op_type, names, outs)
        for name, (kind, value) in node.attrs.items():
            if kind == "t":
                proto.attribute.append(helper.make_attribute(name, tensor_proto("", value)))
            else:
                proto.attribute.append(helper.make_attribute(name, value))
        feeds = {n: _to_numpy(v.const) for n, v in zip(names, inputs) if v is not None}
        try:
            results = ReferenceEvaluator(proto, opsets={"": opset}).run(None, feeds)
        except Exception as exc:  # the reference runtime lacks some ops: keep the node
            log.debug("not folding %s: %s", node.op_type, exc)
            kept.append(node)
            continue
        for value, result in zip(node._outputs, results):
            tensor = torch.from_numpy(np.array(result, copy=True))
            value.const = tensor
            value.setType(Type.of(tensor))
            value.producer = None
            value.name = graph.fresh_name("folded")
            graph.initializers[value.name] = value
        folded += 1
    graph.nodes = kept
    return folded


def _foldable(value: Value, frozen: set[int]) -> bool:
    return (value.is_const and id(value) not in frozen
            and isinstance(value.const, (torch.Tensor, np.ndarray))
            and getattr(value.const, "dtype", None) != torch.bfloat16)


def _numel(obj: Any) -> int:
    return int(obj.numel()) if isinstance(obj, torch.Tensor) else int(np.size(obj))


def _to_numpy(obj: Any) -> np.ndarray:
    if isinstance(obj, torch.Tensor):
        if obj.dtype == torch.bfloat16:
            return obj.float().numpy()
        return obj.detach().cpu().numpy()
    return np.asarray(obj)

