"""Activation functions.

Where a newer opset has a single ONNX operator for an activation (Celu 12, HardSwish 14,
Mish 18, Gelu 20), it is registered as a newer variant; older opsets get an exact
decomposition.
"""

from __future__ import annotations

import math

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Value
from oxport.opsets.common import clamp_values, float_input, scalar

pack = OpPack("oxport.activations", cases="oxport.opsets.cases.activations")

# torch.nn.SELU's constants (ONNX's Selu defaults are rounded differently).
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _dtype(x: Value) -> torch.dtype:
    return x.type().dtype() or torch.float32


@pack.symbolic("aten::relu", since=7)
def relu(g, self: Value) -> Value:
    """relu(Tensor self) -> Tensor
    relu_(Tensor(a!) self) -> Tensor(a!)

    Relu for floats; ``max(x, 0)`` for integers."""
    if not _dtype(self).is_floating_point:
        return clamp_values(g, "aten::relu", self, 0, None)
    return g.op("Relu", self)


@pack.symbolic("aten::sigmoid", since=7)
def sigmoid(g, self: Value) -> Value:
    """sigmoid(Tensor self) -> Tensor
    sigmoid_(Tensor(a!) self) -> Tensor(a!)
    """
    return g.op("Sigmoid", float_input(g, "aten::sigmoid", self))


@pack.symbolic("aten::tanh", since=7)
def tanh(g, self: Value) -> Value:
    """tanh(Tensor self) -> Tensor
    tanh_(Tensor(a!) self) -> Tensor(a!)
    """
    return g.op("Tanh", float_input(g, "aten::tanh", self))


@pack.symbolic("aten::relu6", since=7)
def relu6(g, self: Value) -> Value:
    """relu6(Tensor self) -> Tensor"""
    return clamp_values(g, "aten::relu6", self, 0, 6)


@pack.symbolic("aten::hardtanh", since=7)
@sh.parse_args("v", "f", "f")
def hardtanh(g, self: Value, min_val: float = -1.0, max_val: float = 1.0) -> Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor
    hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1) -> Tensor(a!)
    """
    return clamp_values(g, "aten::hardtanh", self, min_val, max_val)


@pack.symbolic("aten::leaky_relu", since=7)
@sh.parse_args("v", "f")
def leaky_relu(g, self: Value, negative_slope: float = 0.01) -> Value:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor
    leaky_relu_(Tensor(a!) self, Scalar negative_slope=0.01) -> Tensor(a!)
    """
    return g.op("LeakyRelu", self, alpha_f=negative_slope)


@pack.symbolic("aten::rrelu", since=7)
@sh.parse_args("v", "f", "f", "b", "none")
def rrelu(g, self: Value, lower: float, upper: float, training: bool = False,
          generator: Value | None = None) -> Value:
    """rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.33333333333333331, bool training=False, Generator? generator=None) -> Tensor
    rrelu_(Tensor(a!) self, Scalar lower=0.125, Scalar upper=0.33333333333333331, bool training=False, Generator? generator=None) -> Tensor(a!)

    Evaluation mode: a leaky relu with the mean slope ``(lower + upper) / 2``; training
    mode: each negative element times its own uniform slope in ``[lower, upper)`` (opset 9)."""
    if not training:
        return g.op("LeakyRelu", self, alpha_f=(lower + upper) / 2)
    if g.opset < 9:
        sh._onnx_opset_unsupported_detailed("aten::rrelu", g.opset, 9, "training mode (Where)")
    slopes = g.op("RandomUniformLike", self, low_f=lower, high_f=upper)
    negative = g.op("Less", self, scalar(g, 0, _dtype(self)))
    return g.op("Where", negative, g.op("Mul", self, slopes), self)


@pack.symbolic("aten::elu", since=7)
@sh.parse_args("v", "f", "f", "f")
def elu(g, self: Value, alpha: float = 1.0, scale: float = 1.0,
        input_scale: float = 1.0) -> Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor
    elu_(Tensor(a!) self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor(a!)

    Elu; ``scale`` and ``input_scale`` other than 1 select between branches (opset 9)."""
    if scale == 1.0 and input_scale == 1.0:
        return g.op("Elu", self, alpha_f=alpha)
    if g.opset < 9:
        sh._onnx_opset_unsupported_detailed("aten::elu", g.opset, 9,
                                            "scale or input_scale other than 1 needs Where")
    dtype = _dtype(self)
    negative = g.op("Mul", g.op("Sub", g.op("Exp", g.op("Mul", self, scalar(g, input_scale,
                                                                            dtype))),
                                scalar(g, 1.0, dtype)), scalar(g, alpha, dtype))
    chosen = g.op("Where", g.op("Greater", self, scalar(g, 0.0, dtype)), self, negative)
    return g.op("Mul", chosen, scalar(g, scale, dtype))


def _celu(g, self: Value, alpha: float) -> Value:
    """``alpha * elu(x / alpha)``."""
    dtype = _dtype(self)
    inner = g.op("Elu", g.op("Div", self, scalar(g, alpha, dtype)), alpha_f=1.0)
    return g.op("Mul", inner, scalar(g, alpha, dtype))


@pack.symbolic("aten::celu", since=7)
@sh.parse_args("v", "f")
def celu(g, self: Value, alpha: float = 1.0) -> Value:
    """celu(Tensor self, Scalar alpha=1.) -> Tensor
    celu_(Tensor(a!) self, Scalar alpha=1.) -> Tensor(a!)
    """
    return _celu(g, self, alpha)


@pack.symbolic("aten::celu", since=12)
@sh.parse_args("v", "f")
def celu_12(g, self: Value, alpha: float = 1.0) -> Value:
    """celu(Tensor self, Scalar alpha=1.) -> Tensor
    celu_(Tensor(a!) self, Scalar alpha=1.) -> Tensor(a!)

    Celu (ONNX defines it for float32 only; other dtypes decompose)."""
    if _dtype(self) != torch.float32:
        return _celu(g, self, alpha)
    return g.op("Celu", self, alpha_f=alpha)


@pack.symbolic("aten::selu", since=7)
def selu(g, self: Value) -> Value:
    """selu(Tensor self) -> Tensor
    selu_(Tensor(a!) self) -> Tensor(a!)
    """
    return g.op("Selu", self, alpha_f=_SELU_ALPHA, gamma_f=_SELU_SCALE)


@pack.symbolic("aten::softplus", since=7)
@sh.parse_args("v", "f", "f")
def softplus(g, self: Value, beta: float = 1.0, threshold: float = 20.0) -> Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor

    ``softplus(beta * x) / beta``, linear where ``beta * x > threshold``.

    From a threshold of 20 up the linear branch differs from Softplus by under
    ``exp(-20) / beta``, so no switch is emitted.
    """
    dtype = _dtype(self)
    scaled = self if beta == 1.0 else g.op("Mul", self, scalar(g, beta, dtype))
    out = g.op("Softplus", scaled)
    if beta != 1.0:
        out = g.op("Div", out, scalar(g, beta, dtype))
    if threshold >= 20.0:
        return out
    if g.opset < 9:
        sh._onnx_opset_unsupported_detailed("aten::softplus", g.opset, 9,
                                            "a threshold below 20 needs Where")
    linear = g.op("Greater", scaled, scalar(g, threshold, dtype))
    return g.op("Where", linear, self, out)


@pack.symbolic("aten::log_sigmoid", since=7)
def log_sigmoid(g, self: Value) -> Value:
    """log_sigmoid(Tensor self) -> Tensor

    ``-softplus(-x)`` (stable for large inputs)."""
    return g.op("Neg", g.op("Softplus", g.op("Neg", self)))


@pack.symbolic("aten::hardshrink", since=9)
@sh.parse_args("v", "f")
def hardshrink(g, self: Value, lambd: float = 0.5) -> Value:
    """hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor"""
    return g.op("Shrink", self, lambd_f=lambd, bias_f=0.0)


@pack.symbolic("aten::softshrink", since=9)
@sh.parse_args("v", "f")
def softshrink(g, self: Value, lambd: float = 0.5) -> Value:
    """softshrink(Tensor self, Scalar lambd=0.5) -> Tensor"""
    return g.op("Shrink", self, lambd_f=lambd, bias_f=lambd)


@pack.symbolic("aten::threshold", since=9)
def threshold(g, self: Value, threshold: Value, value: Value) -> Value:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor
    threshold_(Tensor(a!) self, Scalar threshold, Scalar value) -> Tensor(a!)

    ``x if x > threshold else value``."""
    dtype = _dtype(self)
    limit = sh.cast_to(g, threshold, dtype)
    return g.op("Where", g.op("Greater", self, limit), self, sh.cast_to(g, value, dtype))


@pack.symbolic("aten::hardsigmoid", since=7)
def hardsigmoid(g, self: Value) -> Value:
    """hardsigmoid(Tensor self) -> Tensor
    hardsigmoid_(Tensor(a!) self) -> Tensor(a!)

    ``relu6(x + 3) / 6``."""
    return g.op("HardSigmoid", self, alpha_f=1 / 6, beta_f=0.5)


@pack.symbolic("aten::hardswish", since=7)
def hardswish(g, self: Value) -> Value:
    """hardswish(Tensor self) -> Tensor
    hardswish_(Tensor(a!) self) -> Tensor(a!)
    """
    return g.op("Mul", self, hardsigmoid(g, self))


@pack.symbolic("aten::hardswish", since=14)
def hardswish_14(g, self: Value) -> Value:
    """hardswish(Tensor self) -> Tensor
    hardswish_(Tensor(a!) self) -> Tensor(a!)
    """
    return g.op("HardSwish", self)


@pack.symbolic("aten::silu", since=7)
def silu(g, self: Value) -> Value:
    """silu(Tensor self) -> Tensor
    silu_(Tensor(a!) self) -> Tensor(a!)

    ``x * sigmoid(x)``: ONNX Swish (opset 24) has no ONNX Runtime kernel at opsets 25-26."""
    return g.op("Mul", self, g.op("Sigmoid", self))


@pack.symbolic("aten::mish", since=7)
def mish(g, self: Value) -> Value:
    """mish(Tensor self) -> Tensor
    mish_(Tensor(a!) self) -> Tensor(a!)

    ``x * tanh(softplus(x))``."""
    return g.op("Mul", self, g.op("Tanh", g.op("Softplus", self)))


@pack.symbolic("aten::mish", since=18)
def mish_18(g, self: Value) -> Value:
    """mish(Tensor self) -> Tensor
    mish_(Tensor(a!) self) -> Tensor(a!)
    """
    return g.op("Mish", self)


@pack.symbolic("aten::gelu", since=7)
@sh.parse_args("v", "s")
def gelu(g, self: Value, approximate: str = "none") -> Value:
    """gelu(Tensor self, *, str approximate="none") -> Tensor

    Exact: ``x/2 * (1 + erf(x/sqrt 2))`` (Erf from opset 9); or the tanh approximation."""
    dtype = _dtype(self)
    if approximate == "tanh":
        cube = g.op("Mul", g.op("Mul", self, self), self)
        inner = g.op("Add", self, g.op("Mul", cube, scalar(g, 0.044715, dtype)))
        curve = g.op("Tanh", g.op("Mul", inner, scalar(g, math.sqrt(2 / math.pi), dtype)))
    else:
        if g.opset < 9:
            sh._onnx_opset_unsupported_detailed("aten::gelu", g.opset, 9,
                                                "exact gelu needs Erf")
        curve = g.op("Erf", g.op("Mul", self, scalar(g, 1 / math.sqrt(2), dtype)))
    half = g.op("Mul", self, scalar(g, 0.5, dtype))
    return g.op("Mul", half, g.op("Add", curve, scalar(g, 1.0, dtype)))


@pack.symbolic("aten::gelu", since=20)
@sh.parse_args("v", "s")
def gelu_20(g, self: Value, approximate: str = "none") -> Value:
    """gelu(Tensor self, *, str approximate="none") -> Tensor"""
    return g.op("Gelu", self, approximate_s=approximate)


@pack.symbolic("aten::glu", since=7)
@sh.parse_args("v", "i")
def glu(g, self: Value, dim: int = -1) -> Value:
    """glu(Tensor self, int dim=-1) -> Tensor

    ``a * sigmoid(b)`` for the two halves of ``dim``."""
    size = sh._get_tensor_dim_size(self, dim)
    if size is None:
        sh._unimplemented("aten::glu", "a dimension of unknown size")
    half = size // 2
    if g.opset < 13:
        first, second = g.op("Split", self, axis_i=dim, split_i=[half, half], outputs=2)
    else:
        sizes = g.constant(torch.tensor([half, half], dtype=torch.int64))
        first, second = g.op("Split", self, sizes, axis_i=dim, outputs=2)
    return g.op("Mul", first, g.op("Sigmoid", second))


@pack.symbolic("aten::prelu", since=7)
def prelu(g, self: Value, weight: Value) -> Value:
    """prelu(Tensor self, Tensor weight) -> Tensor

    PRelu with the weight laid along dim 1 (a single weight is shared by every channel)."""
    rank = sh._get_tensor_rank(self)
    count = sh._get_tensor_sizes(weight)
    if rank is None or count is None:
        sh._unimplemented("aten::prelu", "an input or weight of unknown rank")
    if rank > 2 and count != [1]:
        weight = sh._unsqueeze_helper(g, weight, list(range(1, rank - 1)))
    elif rank == 0 and count == [1]:  # a [1] weight would broadcast a 0-d input to [1]
        weight = sh._squeeze_helper(g, weight, [0])
    return g.op("PRelu", self, weight)


for _fn, _names in ((relu, ["aten::relu_"]), (sigmoid, ["aten::sigmoid_"]),
                    (tanh, ["aten::tanh_"]), (hardtanh, ["aten::hardtanh_"]),
                    (leaky_relu, ["aten::leaky_relu_"]), (rrelu, ["aten::rrelu_"]),
                    (elu, ["aten::elu_"]), (selu, ["aten::selu_"]),
                    (threshold, ["aten::threshold_"]), (hardsigmoid, ["aten::hardsigmoid_"])):
    pack.alias(_fn, *_names, since=7 if _fn is not threshold else 9)
pack.alias(celu, "aten::celu_", since=7)
pack.alias(celu_12, "aten::celu_", since=12)
pack.alias(hardswish, "aten::hardswish_", since=7)
pack.alias(hardswish_14, "aten::hardswish_", since=14)
pack.alias(silu, "aten::silu_", since=7)
pack.alias(mish, "aten::mish_", since=7)
pack.alias(mish_18, "aten::mish_", since=18)
