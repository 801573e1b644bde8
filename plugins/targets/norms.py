"""RMSNorm as transformers writes it by hand —
``w * (x * 1/sqrt(mean(x**2, -1) + eps))``, with optional casts to float32 around it — as
one fused op, ``RMSNormalization`` (opset 23+); for ort, a norm of a residual sum
``a + b`` is ``com.microsoft::SkipSimplifiedLayerNormalization(a, b, w)``, whose fourth
output is the sum. (ONNX Runtime's ``SimplifiedLayerNormalization`` lives in the standard
domain, where ONNX's checker rejects it: below opset 23 a norm of no sum stays unfused.)
Likewise ``LayerNormalization`` of a residual sum (GPT-2, BERT) is ort's
``SkipLayerNormalization``."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from oxport.ir import Graph, Node, Value
from oxport.plugins.targets.patterns import (
    attr,
    const,
    insert_before,
    last_dim,
    producer,
    rank,
    reduced_axes,
    replace_value,
    scalar,
    skip_casts,
)

MSFT = "com.microsoft"


@dataclasses.dataclass
class RMSNorm:
    """A matched RMSNorm: its input, weight, epsilon and the node whose output it is."""

    x: Value
    weight: Value
    epsilon: float
    last: Node


def match_rms_norm(node: Node) -> RMSNorm | None:
    """The RMSNorm ending at ``node`` (``Mul(weight, normalized)``), or None."""
    if (node.domain, node.op_type) != ("", "Mul"):
        return None
    for weight, normalized in (node.input_values, node.input_values[::-1]):
        if weight is None or normalized is None or const(weight) is None \
                or const(weight).ndim != 1:
            continue
        found = _normalized(skip_casts(normalized))
        if found is not None:
            return RMSNorm(found[0], weight, found[1], node)
    return None


def _normalized(value: Value | None) -> tuple[Value, float] | None:
    """``(x, eps)`` when ``value`` is ``x * 1/sqrt(mean(x*x, -1) + eps)``."""
    mul = producer(value, "Mul")
    if mul is None:
        return None
    for x, inverse in (mul.input_values, mul.input_values[::-1]):
        eps_and_source = _inverse_rms(inverse)
        if eps_and_source is not None and eps_and_source[1] is x:
            return skip_casts(x) if _is_float32_cast_of(x) else x, eps_and_source[0]
    return None


def _is_float32_cast_of(value: Value) -> bool:
    cast = producer(value, "Cast")
    return cast is not None and attr(cast, "to") == 1


def _inverse_rms(value: Value | None) -> tuple[float, Value] | None:
    """``(eps, x)`` when ``value`` is ``1/sqrt(mean(x*x, -1) + eps)``."""
    sqrt_out = None
    if (reciprocal := producer(value, "Reciprocal")) is not None:
        sqrt_out = reciprocal.input_values[0]
    elif (div := producer(value, "Div")) is not None and scalar(div.input_values[0]) == 1.0:
        sqrt_out = div.input_values[1]
    sqrt = producer(sqrt_out, "Sqrt")
    add = producer(sqrt.input_values[0] if sqrt else None, "Add")
    if add is None:
        return None
    for mean_out, eps_value in (add.input_values, add.input_values[::-1]):
        eps, mean = scalar(eps_value), producer(mean_out, "ReduceMean")
        if eps is None or mean is None or attr(mean, "keepdims", 1) != 1:
            continue
        square = mean.input_values[0]
        x = _squared(square)
        if x is not None and reduced_axes(mean) in ([-1], [r - 1] if (r := rank(x)) else []):
            return eps, x
    return None


def _squared(value: Value | None) -> Value | None:
    """``x`` when ``value`` is ``x ** 2`` or ``x * x``."""
    if (power := producer(value, "Pow")) is not None and scalar(power.input_values[1]) == 2.0:
        return power.input_values[0]
    if (mul := producer(value, "Mul")) is not None and mul.input_values[0] is \
            mul.input_values[1]:
        return mul.input_values[0]
    return None


def fuse_rms_norm(graph: Graph, context: Any) -> int:
    """Every hand-written RMSNorm as the target's fused op (none for onnx below opset 23)."""
    onnx_target = context.target.name == "onnx"
    if onnx_target and context.opset < 23:
        return 0
    count = 0
    for node in list(graph.nodes):
        norm = match_rms_norm(node)
        if norm is None:
            continue
        if not onnx_target and _fuse_skip(graph, norm):
            count += 1
        elif context.opset >= 23:
            _replace(graph, norm, "", "RMSNormalization", [norm.x, norm.weight])
            count += 1
    return count


def _attrs(norm: RMSNorm) -> dict[str, tuple[str, Any]]:
    return {"axis": ("i", -1), "epsilon": ("f", norm.epsilon), "stash_type": ("i", 1)}


def _replace(graph: Graph, norm: RMSNorm, domain: str, op: str, inputs: list[Value],
             outputs: int = 1) -> Node:
    attrs = _attrs(norm) if domain == "" else {"epsilon": ("f", norm.epsilon)}
    fused = graph.add_node(domain, op, inputs, outputs, attrs=attrs)
    insert_before(graph, norm.last, [fused])
    replace_value(graph, norm.last.output_values[0], fused.output_values[0])
    return fused


def _fuse_skip(graph: Graph, norm: RMSNorm) -> bool:
    """``SkipSimplifiedLayerNormalization(a, b, w)`` when the norm's input is ``a + b`` of
    two 3-D tensors of one shape; its fourth output, the sum, replaces the ``Add``."""
    add = producer(norm.x, "Add")
    if add is None or rank(norm.x) != 3 or norm.x.dtype not in (torch.float32, torch.float16):
        return False
    a, b = add.input_values
    if a is None or b is None or a.type().shape != b.type().shape or rank(a) != 3 \
            or a.is_const or b.is_const:
        return False
    fused = _replace(graph, norm, MSFT, "SkipSimplifiedLayerNormalization",
                     [a, b, norm.weight], outputs=4)
    graph.use_domain(MSFT, 1)
    replace_value(graph, norm.x, fused.output_values[3])  # the sum, read by the residual
    _omit_statistics(fused)
    return True


def _omit_statistics(fused: Node) -> None:
    """Leave a skip norm's mean and inverse deviation outputs unnamed: nothing reads them,
    and named, ONNX Runtime computes and allocates both at every run (a decode step of the
    tiny Llama ran ~8 % slower)."""
    for statistic in fused.output_values[1:3]:
        statistic.omit()


def fuse_skip_layer_norm(graph: Graph, context: Any) -> int:
    """ort: ``LayerNormalization(a + b [+ bias], gamma, beta)`` over the last axis of two
    3-D tensors of one shape as ``com.microsoft::SkipLayerNormalization(a, b, gamma, beta,
    bias)`` (GPT-2's and BERT's residual norms); a constant 1-D bias added to ``a`` just
    before (a projection's) folds in. Its fourth output, the sum, feeds the next residual."""
    if context.target.name == "onnx":
        return 0
    count = 0
    for node in list(graph.nodes):
        if (node.domain, node.op_type) != ("", "LayerNormalization") \
                or attr(node, "axis", -1) not in (-1, 2) or len(node.output_values) != 1:
            continue
        count += _fuse_skip_layer_norm(graph, node)
    if count:
        graph.use_domain(MSFT, 1)
    return count


def _fuse_skip_layer_norm(graph: Graph, norm: Node) -> bool:
    x, gamma, *rest = norm.input_values
    beta = rest[0] if rest else None
    add = producer(x, "Add")
    if add is None or rank(x) != 3 or x.dtype not in (torch.float32, torch.float16) \
            or const(gamma) is None or const(gamma).ndim != 1 \
            or (beta is not None and const(beta) is None):
        return False
    a, b = add.input_values
    if a is None or b is None or a.is_const or b.is_const or not _same_shape(a, b):
        return False
    a, b, bias = _with_bias(graph, a, b, int(const(gamma).shape[0]))
    if a.type().shape != x.type().shape and b.type().shape == x.type().shape:
        a, b = b, a  # the input has the sum's shape (the skip may be of unknown sizes)
    fused = graph.add_node(MSFT, "SkipLayerNormalization", [a, b, gamma, beta, bias], 4,
                           attrs={"epsilon": ("f", attr(norm, "epsilon", 1e-5))})
    insert_before(graph, norm, [fused])
    replace_value(graph, norm.output_values[0], fused.output_values[0])
    replace_value(graph, x, fused.output_values[3])  # the sum, read by the residual
    _omit_statistics(fused)
    return True


def _same_shape(a: Value, b: Value) -> bool:
    """Whether ``a`` and ``b`` are 3-D of one shape, as far as their types tell: no known
    sizes differ (a 1 against another size would broadcast)."""
    first, second = a.type().shape, b.type().shape
    if first is None or second is None or len(first) != 3 or len(second) != 3:
        return False
    return all(p is None or q is None or p == q for p, q in zip(first, second))


def _with_bias(graph: Graph, a: Value, b: Value, size: int
               ) -> tuple[Value, Value, Value | None]:
    """``(input, skip, bias)``: a constant ``[size]`` bias added to either summand (read by
    nothing else) moves into SkipLayerNormalization's bias input."""
    for first, second in ((a, b), (b, a)):
        add = producer(first, "Add")
        if add is None or len(_readers(graph, first)) != 1:
            continue
        for x, bias in (add.input_values, add.input_values[::-1]):
            data = const(bias)
            if data is not None and data.shape == (size,) and x is not None \
                    and not x.is_const and last_dim(x) == size:
                return x, second, bias
    return a, b, None


def _readers(graph: Graph, value: Value) -> list[Node | None]:
    readers: list[Node | None] = [n for n in graph.nodes if any(v is value
                                                                for v in n.input_values)]
    return readers + [None for v in graph.outputs if v is value]
