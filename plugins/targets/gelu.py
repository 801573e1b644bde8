"""GELU for ort: ``Gelu(x + bias)`` (a projection's bias, a constant 1-D tensor) as
``com.microsoft::BiasGelu(x, bias)``; the tanh approximation — ``Gelu`` with
``approximate="tanh"`` or written by hand as GPT-2 does, ``0.5 * x * (1 + tanh(sqrt(2 / pi)
* (x + 0.044715 * x ** 3)))`` — as ``com.microsoft::FastGelu(x[, bias])``."""

from __future__ import annotations

import math
from typing import Any

import torch

from oxport.ir import Graph, Node, Value
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
    """Every ``Gelu`` of a biased input and every tanh GELU as BiasGelu / FastGelu."""
    if context.target.name == "onnx":
        return 0
    index = Index(graph)
    count = 0
    for node in list(graph.nodes):
        found = _standard_gelu(node) or _hand_written_tanh_gelu(node)
        if found is None:
            continue
        x, tanh = found
        if x.dtype not in (torch.float32, torch.float16):
            continue
        x, bias = _split_bias(index, x)
        if not tanh and bias is None:
            continue  # the standard Gelu runs as it is
        op = "FastGelu" if tanh else "BiasGelu"
        fused = graph.add_node(MSFT, op, [x, bias] if bias is not None else [x])
        insert_before(graph, node, [fused])
        replace_value(graph, node.output_values[0], fused.output_values[0])
        count += 1
    if count:
        graph.use_domain(MSFT, 1)
    return count


def _standard_gelu(node: Node) -> tuple[Value, bool] | None:
    """``(x, tanh)`` of a standard ``Gelu`` (opset 20)."""
    if (node.domain, node.op_type) != ("", "Gelu"):
        return None
    return node.input_values[0], attr(node, "approximate", "none") in ("tanh", b"tanh")


def _hand_written_tanh_gelu(node: Node) -> tuple[Value, bool] | None:
    """``(x, True)`` when ``node`` computes ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715
    * x**3)))`` (its factors in any order)."""
    if (node.domain, node.op_type) != ("", "Mul"):
        return None
    factors, factor = _factors(node.output_values[0])
    if not math.isclose(factor, 0.5, rel_tol=1e-6) or len(factors) != 2:
        return None
    for x, one_plus in (factors, factors[::-1]):
        add = producer(one_plus, "Add")
        if add is None:
            continue
        for tanh_out, one in (add.input_values, add.input_values[::-1]):
            tanh = producer(tanh_out, "Tanh")
            if tanh is not None and scalar(one) == 1.0 and _is_cubic_inner(tanh.input_values[0],
                                                                            x):
                return x, True
    return None


def _factors(value: Value) -> tuple[list[Value], float]:
    """The non-constant factors of a product of ``Mul`` nodes and the product of its
    constant scalars."""
    node = producer(value, "Mul")
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
