"""GELU for ort: ``Gelu(x + bias)`` (a projection's bias, a constant 1-D tensor) as
``com.microsoft::BiasGelu(x, bias)``; the tanh approximation — ``Gelu`` with
``approximate="tanh"`` or written by hand as GPT-2 does, ``0.5 * x * (1 + tanh(sqrt(2 / pi)
* (x + 0.044715 * x ** 3)))`` — as ``com.microsoft::FastGelu(x[, bias])``; the exact one
written out (``0.5 * x * (1 + erf(x / sqrt(2)))``, what ``F.gelu`` is below opset 20) as
``com.microsoft::Gelu(x)`` or ``BiasGelu``."""

from __future__ import annotations

import math
from typing import Any

import torch

from oxport.ir import Graph, Node, Value
from oxport.passes import folding
from oxport.plugins.targets.patterns import (
    Index,
    attr,
    const,
    insert_before,
    last_dim,
    producer,
    replace_value,
    scalar,
)

MSFT = "com.microsoft"
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def fuse_gelu(graph: Graph, context: Any) -> int:
    """Every GELU as ``FastGelu`` (tanh) or ``Gelu`` (exact; written out below opset 20,
    ort's), then each of a biased input as ``FastGelu(x, bias)`` / ``BiasGelu(x, bias)``."""
    if context.target.name == "onnx":
        return 0
    made: set[int] = set()
    for node in list(graph.nodes):
        found = _standard_gelu(node) or _hand_written_gelu(node)
        if found is None or found[0].dtype not in (torch.float32, torch.float16):
            continue
        x, tanh = found
        if node.op_type == "Gelu" and not tanh:
            continue  # the standard exact Gelu runs as it is (a bias may fold in below)
        fused = graph.add_node(MSFT, "FastGelu" if tanh else "Gelu", [x])
        insert_before(graph, node, [fused])
        replace_value(graph, node.output_values[0], fused.output_values[0])
        made.add(id(fused))
    folding.eliminate_dead_code(graph)  # the written-out formulas, so the input has one reader
    made |= _fold_biases(graph)
    if made:
        graph.use_domain(MSFT, 1)
    return len(made)


def _fold_biases(graph: Graph) -> set[int]:
    """``FastGelu(x + bias)`` and exact ``Gelu(x + bias)`` with a constant bias over the
    last axis: the bias is the fused op's second input (``BiasGelu`` for the exact one);
    returns the ids of the nodes it changed."""
    index = Index(graph)
    changed = set()
    for node in list(graph.nodes):
        exact = node.op_type == "Gelu" and (node.domain == MSFT or (
            not node.domain and attr(node, "approximate", "none") in ("none", b"none")))
        if not exact and (node.domain, node.op_type) != (MSFT, "FastGelu"):
            continue
        if len(node.input_values) != 1 or node.input_values[0].dtype not in (
                torch.float32, torch.float16):
            continue
        x, bias = _split_bias(index, node.input_values[0])
        if bias is None:
            continue
        node.domain, node.input_values = MSFT, [x, bias]
        node.op_type, node.attrs = "BiasGelu" if exact else "FastGelu", {}
        changed.add(id(node))
    return changed


def _standard_gelu(node: Node) -> tuple[Value, bool] | None:
    """``(x, tanh)`` of a standard ``Gelu`` (opset 20)."""
    if (node.domain, node.op_type) != ("", "Gelu"):
        return None
    return node.input_values[0], attr(node, "approximate", "none") in ("tanh", b"tanh")


def _hand_written_gelu(node: Node) -> tuple[Value, bool] | None:
    """``(x, tanh)`` when ``node`` computes ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715
    * x**3)))`` (``tanh``) or ``0.5 * x * (1 + erf(x / sqrt(2)))``, factors in any order."""
    if (node.domain, node.op_type) != ("", "Mul"):
        return None
    factors, factor = _factors(node.output_values[0])
    if not math.isclose(factor, 0.5, rel_tol=1e-6) or len(factors) != 2:
        return None
    for x, one_plus in (factors, factors[::-1]):
        add = producer(one_plus, "Add")
        if add is None:
            continue
        for inner, one in (add.input_values, add.input_values[::-1]):
            if scalar(one) != 1.0:
                continue
            if (tanh := producer(inner, "Tanh")) is not None \
                    and _is_cubic_inner(tanh.input_values[0], x):
                return x, True
            if (erf := producer(inner, "Erf")) is not None \
                    and _factors(erf.input_values[0])[0] == [x] \
                    and math.isclose(_factors(erf.input_values[0])[1], 0.5 ** 0.5,
                                     rel_tol=1e-3):
                return x, False
    return None


def _factors(value: Value) -> tuple[list[Value], float]:
    """The non-constant factors of a product of ``Mul`` nodes and the product of its
    constant scalars."""
    node = producer(value, "Mul", "Div")
    if node is not None and node.op_type == "Div":
        divisor = scalar(node.input_values[1])
        if divisor is None or divisor == 0:
            return [value], 1.0
        found, factor = _factors(node.input_values[0])
        return found, factor / divisor
    if node is None:
        number = scalar(value)
        return ([], number) if number is not None else ([value], 1.0)
    found, factor = [], 1.0
    for part in node.input_values:
        more, scale = _factors(part) if scalar(part) is None else ([], scalar(part))
        found += more
        factor *= scale
    return found, factor


def _is_cubic_inner(value: Value | None, x: Value) -> bool:
    """Whether ``value`` is ``sqrt(2/pi) * (x + 0.044715 * x**3)``."""
    factors, factor = _factors(value)
    if len(factors) != 1 or not math.isclose(factor, _SQRT_2_OVER_PI, rel_tol=1e-3):
        return False
    add = producer(factors[0], "Add")
    if add is None:
        return False
    for plain, cubic in (add.input_values, add.input_values[::-1]):
        if plain is not x:
            continue
        terms, scale = _factors(cubic)
        if math.isclose(scale, 0.044715, rel_tol=1e-3) and _is_cube(terms, x):
            return True
    return False


def _is_cube(terms: list[Value], x: Value) -> bool:
    """Whether the product of ``terms`` is ``x ** 3``."""
    if len(terms) == 3:
        return all(t is x for t in terms)
    power = producer(terms[0], "Pow") if len(terms) == 1 else None
    return power is not None and power.input_values[0] is x and scalar(power.input_values[1]) \
        == 3.0


def _split_bias(index: Index, x: Value) -> tuple[Value, Value | None]:
    """``(y, bias)`` when ``x`` is ``y + bias`` of a constant bias over the last axis that
    nothing else reads; ``(x, None)`` otherwise."""
    add = producer(x, "Add")
    if add is None or len(index.readers(x)) != 1:
        return x, None
    for y, bias in (add.input_values, add.input_values[::-1]):
        data = const(bias)
        if y is not None and not y.is_const and data is not None and data.ndim == 1 \
                and last_dim(y) == data.shape[0]:
            return y, bias
    return x, None
