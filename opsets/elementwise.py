"""Elementwise arithmetic: add/sub/mul/div and relatives, pow, rounding, clamping, min/max.

Binary ops follow PyTorch's type promotion (``sh.result_dtype``): Python scalars take the
tensor's dtype, integer true division gives float32, bools add as ``Or`` and multiply as
``And``. In a traced graph the dtype TorchScript recorded for the node's output settles
what a 0-d constant was (``sh.traced_dtype``). Where ONNX lacks an integer kernel at an
older opset, integers go through float64 (exact below 2**53) and back.
"""

from __future__ import annotations

import builtins
from typing import Any

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Value
from oxport.opsets.common import clamp_values, float_input, is_int, promote, scalar
from oxport.opsets.signal import (
    as_complex_pairs,
    as_pairs,
    complex_abs,
    complex_add,
    complex_mul,
    complex_operand,
    is_complex,
    pair_dtype,
)
from oxport.types import onnx_dtype

pack = OpPack("oxport.elementwise", cases="oxport.opsets.cases.elementwise")

def via_double(g, dtype: torch.dtype, build, *values: Value) -> Value:
    """``build(*values)`` computed in float64 and cast back to ``dtype``."""
    doubles = [sh.cast_to(g, v, torch.float64) for v in values]
    return sh.cast_to(g, build(*doubles), dtype)


# -- add, sub, mul, rsub ---------------------------------------------------------------
def _scaled(g, value: Value, alpha: Any, dtype: torch.dtype | None) -> Value:
    """``alpha * value`` (``value`` itself when alpha is absent or 1)."""
    if sh._is_none(alpha):
        return value
    factor = sh._maybe_get_const(alpha, "f")
    if isinstance(factor, Value):
        return g.op("Mul", value, sh.cast_to(g, factor, dtype) if dtype else factor)
    if factor == 1:
        return value
    return g.op("Mul", value, scalar(g, int(factor) if is_int(dtype) else factor, dtype))


def _complex_operands(g, kind: str, self: Value, other: Value
                      ) -> tuple[Value, Value, bool, bool] | None:
    """Both operands, complex ones as pairs, and which are complex; None when neither is."""
    dtype = pair_dtype(self, other)
    (a, a_complex), (b, b_complex) = (complex_operand(g, v, i, kind, dtype)
                                      for i, v in enumerate((self, other)))
    return (a, b, a_complex, b_complex) if a_complex or b_complex else None


def _complex_sum(g, kind: str, self: Value, other: Value, alpha: Value | None,
                 subtract: bool) -> Value | None:
    """``self +/- alpha * other`` when an operand is complex (as pairs); None otherwise."""
    operands = _complex_operands(g, kind, self, other)
    if operands is None:
        return None
    a, b, a_complex, b_complex = operands
    if not sh._is_none(alpha) and sh._maybe_get_const(alpha, "f") != 1:
        if not b_complex:
            b = as_complex_pairs(g, b, pair_dtype(a))
            b_complex = True
        b = _scaled(g, b, alpha, pair_dtype(a, b))
    return as_pairs(g, complex_add(g, a, b, a_complex, b_complex, subtract))


@pack.symbolic("aten::add", since=7, accepts_complex=True)
def add(g, self: Value, other: Value, alpha: Value | None = None) -> Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
    add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)

    ``self + alpha * other``; bools add as logical or; complex tensors and numbers as real
    pairs."""
    complex_sum = _complex_sum(g, "aten::add", self, other, alpha, subtract=False)
    if complex_sum is not None:
        return complex_sum
    (a, b), dtype = promote(g, "aten::add", self, other)
    b = _scaled(g, b, alpha, dtype)
    return g.op("Or" if dtype == torch.bool else "Add", a, b)


@pack.symbolic("aten::sub", since=7, accepts_complex=True)
def sub(g, self: Value, other: Value, alpha: Value | None = None) -> Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
    sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)

    ``self - alpha * other``; complex tensors and numbers as real pairs."""
    complex_sum = _complex_sum(g, "aten::sub", self, other, alpha, subtract=True)
    if complex_sum is not None:
        return complex_sum
    (a, b), dtype = promote(g, "aten::sub", self, other)
    return g.op("Sub", a, _scaled(g, b, alpha, dtype))


@pack.symbolic("aten::rsub", since=7)
def rsub(g, self: Value, other: Value, alpha: Value | None = None) -> Value:
    """rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor

    ``other - alpha * self``."""
    (a, b), dtype = promote(g, "aten::rsub", self, other)
    return g.op("Sub", b, _scaled(g, a, alpha, dtype))


@pack.symbolic("aten::mul", since=7, accepts_complex=True)
def mul(g, self: Value, other: Value) -> Value:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor
    mul.Scalar(Tensor self, Scalar other) -> Tensor
    mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)

    ``self * other``; bools multiply as logical and; complex tensors as real pairs."""
    operands = _complex_operands(g, "aten::mul", self, other)
    if operands is not None:
        return as_pairs(g, complex_mul(g, *operands))
    (a, b), dtype = promote(g, "aten::mul", self, other)
    return g.op("And" if dtype == torch.bool else "Mul", a, b)


pack.alias(add, "aten::add_", since=7)
pack.alias(sub, "aten::sub_", since=7)
pack.alias(mul, "aten::mul_", since=7)


# -- division ----------------------------------------------------------------------------
def _trunc(g, x: Value, dtype: torch.dtype | None) -> Value:
    """Round toward zero (floats; needs opset 9 for Where)."""
    if g.opset < 9:
        sh._onnx_opset_unsupported_detailed("trunc", g.opset, 9,
                                            "rounding toward zero needs Where")
    negative = g.op("Less", x, scalar(g, 0, dtype))
    return g.op("Where", negative, g.op("Ceil", x), g.op("Floor", x))


def floor_divide_values(g, a: Value, b: Value, dtype: torch.dtype | None) -> Value:
    """``floor(a / b)`` for two values of ``dtype``."""
    if not is_int(dtype):
        return g.op("Floor", g.op("Div", a, b))
    if g.opset < 9:  # Less on integers arrives at 9
        return via_double(g, dtype, lambda x, y: g.op("Floor", g.op("Div", x, y)), a, b)
    quotient = g.op("Div", a, b)  # integer Div truncates toward zero
    rest = g.op("Sub", a, g.op("Mul", quotient, b))
    zero = scalar(g, 0, dtype)
    signs_differ = g.op("Xor", g.op("Less", rest, zero), g.op("Less", b, zero))
    inexact = g.op("Not", g.op("Equal", rest, zero))
    adjust = sh.cast_to(g, g.op("And", inexact, signs_differ), dtype)
    return g.op("Sub", quotient, adjust)


@pack.symbolic("aten::div", since=7)
def div(g, self: Value, other: Value, rounding_mode: Value | None = None) -> Value:
    """div.Tensor(Tensor self, Tensor other) -> Tensor
    div.Scalar(Tensor self, Scalar other) -> Tensor
    div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor
    div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor
    div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)

    True division (integers give float32), or ``floor`` / ``trunc`` rounding."""
    mode = (None if sh._is_none(rounding_mode)
            else sh._get_const(rounding_mode, "s", "rounding_mode"))
    (a, b), dtype = promote(g, "aten::div", self, other)
    if mode is None:
        if dtype is None or not dtype.is_floating_point:
            a, b = sh.cast_to(g, a, torch.float32), sh.cast_to(g, b, torch.float32)
        return g.op("Div", a, b)
    if mode == "floor":
        return floor_divide_values(g, a, b, dtype)
    if is_int(dtype):
        return g.op("Div", a, b)
    return _trunc(g, g.op("Div", a, b), dtype)


pack.alias(div, "aten::div_", since=7)


@pack.symbolic("aten::floor_divide", since=7)
def floor_divide(g, self: Value, other: Value) -> Value:
    """floor_divide(Tensor self, Tensor other) -> Tensor
    floor_divide.Scalar(Tensor self, Scalar other) -> Tensor

    ``self // other``: floor division, as PyTorch does since 1.13."""
    (a, b), dtype = promote(g, "aten::floor_divide", self, other)
    return floor_divide_values(g, a, b, dtype)


@pack.symbolic("aten::remainder", since=7)
def remainder(g, self: Value, other: Value) -> Value:
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor
    remainder.Scalar(Tensor self, Scalar other) -> Tensor
    remainder.Scalar_Tensor(Scalar self, Tensor other) -> Tensor

    Python's ``%``: ``a - floor(a / b) * b``, with the sign of the divisor."""
    (a, b), dtype = promote(g, "aten::remainder", self, other)
    return g.op("Sub", a, g.op("Mul", floor_divide_values(g, a, b, dtype), b))


@pack.symbolic("aten::remainder", since=10)
def remainder_10(g, self: Value, other: Value) -> Value:
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor
    remainder.Scalar(Tensor self, Scalar other) -> Tensor
    remainder.Scalar_Tensor(Scalar self, Tensor other) -> Tensor

    Python's ``%`` with Mod: integer Mod has the divisor's sign; floats fix up fmod."""
    (a, b), dtype = promote(g, "aten::remainder", self, other)
    if is_int(dtype):
        return g.op("Mod", a, b, fmod_i=0)
    rest = g.op("Mod", a, b, fmod_i=1)
    zero = scalar(g, 0, dtype)
    wrong_sign = g.op("Or",
                      g.op("And", g.op("Less", rest, zero), g.op("Greater", b, zero)),
                      g.op("And", g.op("Greater", rest, zero), g.op("Less", b, zero)))
    return g.op("Where", wrong_sign, g.op("Add", rest, b), rest)


@pack.symbolic("aten::fmod", since=10)
def fmod(g, self: Value, other: Value) -> Value:
    """fmod.Tensor(Tensor self, Tensor other) -> Tensor
    fmod.Scalar(Tensor self, Scalar other) -> Tensor

    C's ``fmod``: the remainder has the sign of the dividend."""
    (a, b), _ = promote(g, "aten::fmod", self, other)
    return g.op("Mod", a, b, fmod_i=1)


# -- powers, signs and other unary arithmetic -------------------------------------------
@pack.symbolic("aten::pow", since=7)
def pow(g, self: Value, exponent: Value) -> Value:  # noqa: A001 - the aten name
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor
    pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor
    pow.Scalar(Scalar self, Tensor exponent) -> Tensor
    pow_.Tensor(Tensor(a!) self, Tensor exponent) -> Tensor(a!)

    ``self ** exponent``; integer powers go through float64 before opset 12."""
    (a, b), dtype = promote(g, "aten::pow", self, exponent)
    if is_int(dtype):
        return via_double(g, dtype, lambda x, y: g.op("Pow", x, y), a, b)
    return g.op("Pow", a, b)


@pack.symbolic("aten::pow", since=12)
def pow_12(g, self: Value, exponent: Value) -> Value:
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor
    pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor
    pow.Scalar(Scalar self, Tensor exponent) -> Tensor
    pow_.Tensor(Tensor(a!) self, Tensor exponent) -> Tensor(a!)

    ``self ** exponent`` (Pow takes integers from opset 12)."""
    (a, b), _ = promote(g, "aten::pow", self, exponent)
    return g.op("Pow", a, b)


pack.alias(pow, "aten::pow_", since=7)
pack.alias(pow_12, "aten::pow_", since=12)


@pack.symbolic("aten::square", since=7)
def square(g, self: Value) -> Value:
    """square(Tensor self) -> Tensor"""
    return g.op("Mul", self, self)


@pack.symbolic("aten::neg", since=7)
def neg(g, self: Value) -> Value:
    """neg(Tensor self) -> Tensor"""
    return g.op("Neg", self)


@pack.symbolic("aten::abs", since=7, accepts_complex=True)
def abs(g, self: Value) -> Value:  # noqa: A001 - the aten name
    """abs(Tensor self) -> Tensor
    abs_(Tensor(a!) self) -> Tensor(a!)

    Abs; the magnitude of a complex tensor."""
    return complex_abs(g, self) if is_complex(g, 0, "aten::abs") else g.op("Abs", self)


pack.alias(abs, "aten::abs_", since=7)


@pack.symbolic("aten::reciprocal", since=7)
def reciprocal(g, self: Value) -> Value:
    """reciprocal(Tensor self) -> Tensor

    ``1 / self`` (integers give float32)."""
    return g.op("Reciprocal", float_input(g, "aten::reciprocal", self))


@pack.symbolic("aten::sign", since=7)
def sign(g, self: Value) -> Value:
    """sign(Tensor self) -> Tensor

    ``(self > 0) - (self < 0)`` before ONNX had Sign."""
    dtype = self.type().dtype() or torch.float32
    if dtype == torch.bool:
        return self
    x = self if dtype.is_floating_point else sh.cast_to(g, self, torch.float64)
    zero = scalar(g, 0, x.type().dtype())
    positive = g.op("Cast", g.op("Greater", x, zero), to_i=onnx_dtype(dtype))
    negative = g.op("Cast", g.op("Less", x, zero), to_i=onnx_dtype(dtype))
    return g.op("Sub", positive, negative)


@pack.symbolic("aten::sign", since=9)
def sign_9(g, self: Value) -> Value:
    """sign(Tensor self) -> Tensor"""
    return self if self.type().dtype() == torch.bool else g.op("Sign", self)


# -- rounding ------------------------------------------------------------------------------
def _rounding(op_type: str, name: str):
    def symbolic(g, self: Value) -> Value:
        if not (self.type().dtype() or torch.float32).is_floating_point:
            return self  # integers are already whole
        return g.op(op_type, self)
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self) -> Tensor\n"
                        f"{name}_(Tensor(a!) self) -> Tensor(a!)\n\n"
                        f"As ONNX ``{op_type}`` (integers pass through).")
    return symbolic


floor = pack.symbolic("aten::floor", since=7)(_rounding("Floor", "floor"))
ceil = pack.symbolic("aten::ceil", since=7)(_rounding("Ceil", "ceil"))
pack.alias(floor, "aten::floor_", since=7)
pack.alias(ceil, "aten::ceil_", since=7)


@pack.symbolic("aten::round", since=11)
@sh.parse_args("v", "i")
def round(g, self: Value, decimals: int = 0) -> Value:  # noqa: A001 - the aten name
    """round(Tensor self) -> Tensor
    round.decimals(Tensor self, *, int decimals) -> Tensor
    round_(Tensor(a!) self) -> Tensor(a!)

    Round half to even, to ``decimals`` places as PyTorch scales (x * 10**d, round, / 10**d)."""
    dtype = self.type().dtype() or torch.float32
    if not dtype.is_floating_point:
        return self
    if decimals == 0:
        return g.op("Round", self)
    scale = scalar(g, 10.0 ** builtins.abs(decimals), dtype)
    if decimals > 0:
        return g.op("Div", g.op("Round", g.op("Mul", self, scale)), scale)
    return g.op("Mul", g.op("Round", g.op("Div", self, scale)), scale)


pack.alias(round, "aten::round_", since=11)


@pack.symbolic("aten::trunc", since=9)
def trunc(g, self: Value) -> Value:
    """trunc(Tensor self) -> Tensor

    Round toward zero (``torch.fix`` too)."""
    dtype = self.type().dtype() or torch.float32
    return self if not dtype.is_floating_point else _trunc(g, self, dtype)


@pack.symbolic("aten::frac", since=9)
def frac(g, self: Value) -> Value:
    """frac(Tensor self) -> Tensor

    ``self - trunc(self)``."""
    return g.op("Sub", self, _trunc(g, self, self.type().dtype()))


# -- min / max / clamp ------------------------------------------------------------------------
def _extremum(op_type: str, bool_op: str, name: str):
    def symbolic(g, self: Value, other: Value) -> Value:
        (a, b), dtype = promote(g, f"aten::{name.partition('.')[0]}", self, other)
        if dtype == torch.bool:
            return g.op(bool_op, a, b)
        if is_int(dtype) and g.opset < 12:  # Max/Min take integers from opset 12
            return via_double(g, dtype, lambda x, y: g.op(op_type, x, y), a, b)
        return g.op(op_type, a, b)
    symbolic.__name__ = name.replace(".", "_")
    symbolic.__doc__ = (f"{name}(Tensor self, Tensor other) -> Tensor\n\n"
                        f"Elementwise ``{op_type}`` (broadcasting from opset 8).")
    return symbolic


for _name, _op, _bool in (("max.other", "Max", "Or"), ("min.other", "Min", "And"),
                          ("maximum", "Max", "Or"), ("minimum", "Min", "And")):
    pack.symbolic(f"aten::{_name}", since=8)(_extremum(_op, _bool, _name))


@pack.symbolic("aten::clamp", since=7)
def clamp(g, self: Value, min: Value | None = None,  # noqa: A002 - the aten names
          max: Value | None = None) -> Value:  # noqa: A002
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor
    clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor
    clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)

    Clip for number bounds (attributes before 11, inputs after); Max/Min for tensors."""
    return clamp_values(g, "aten::clamp", self, min, max)


@pack.symbolic("aten::clamp_min", since=7)
def clamp_min(g, self: Value, min: Value) -> Value:  # noqa: A002
    """clamp_min(Tensor self, Scalar min) -> Tensor
    clamp_min.Tensor(Tensor self, Tensor min) -> Tensor
    clamp_min_(Tensor(a!) self, Scalar min) -> Tensor(a!)
    """
    return clamp_values(g, "aten::clamp_min", self, min, None)


@pack.symbolic("aten::clamp_max", since=7)
def clamp_max(g, self: Value, max: Value) -> Value:  # noqa: A002
    """clamp_max(Tensor self, Scalar max) -> Tensor
    clamp_max.Tensor(Tensor self, Tensor max) -> Tensor
    clamp_max_(Tensor(a!) self, Scalar max) -> Tensor(a!)
    """
    return clamp_values(g, "aten::clamp_max", self, None, max)


pack.alias(clamp, "aten::clamp_", since=7)
pack.alias(clamp_min, "aten::clamp_min_", since=7)
pack.alias(clamp_max, "aten::clamp_max_", since=7)


# -- fused arithmetic -------------------------------------------------------------------------
@pack.symbolic("aten::lerp", since=7)
def lerp(g, self: Value, end: Value, weight: Value) -> Value:
    """lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor
    lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor

    ``self + weight * (end - self)``."""
    (a, b, w), _ = promote(g, "aten::lerp", self, end, weight)
    return g.op("Add", a, g.op("Mul", w, g.op("Sub", b, a)))


def _fused(op_type: str, name: str):
    def symbolic(g, self: Value, tensor1: Value, tensor2: Value, value: Any = None) -> Value:
        (a, t1, t2), dtype = promote(g, f"aten::{name}", self, tensor1, tensor2)
        return g.op("Add", a, _scaled(g, g.op(op_type, t1, t2), value, dtype))
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, Tensor tensor1, Tensor tensor2, *, "
                        "Scalar value=1) -> Tensor\n\n"
                        f"``self + value * ({op_type} of tensor1 and tensor2)``.")
    return symbolic


pack.symbolic("aten::addcmul", since=7)(_fused("Mul", "addcmul"))
pack.symbolic("aten::addcdiv", since=7)(_fused("Div", "addcdiv"))


def is_inf(g, x: Value, positive: bool = True, negative: bool = True) -> Value:
    """IsInf, casting half-precision inputs to float32 before opset 20."""
    if g.opset < 20 and x.type().dtype() in (torch.float16, torch.bfloat16):
        x = sh.cast_to(g, x, torch.float32)
    return g.op("IsInf", x, detect_positive_i=int(positive), detect_negative_i=int(negative))


@pack.symbolic("aten::nan_to_num", since=10)
@sh.parse_args("v", "none", "none", "none")
def nan_to_num(g, self: Value, nan: Any = None, posinf: Any = None, neginf: Any = None) -> Value:
    """nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor

    NaN, +inf and -inf replaced (by 0 and the dtype's largest and lowest finite values)."""
    dtype = self.type().dtype() or torch.float32
    if not dtype.is_floating_point:
        return self
    info = torch.finfo(dtype)
    out = self
    for mask, replacement, default in (
            (g.op("IsNaN", self), nan, 0.0),
            (is_inf(g, self, negative=False), posinf, info.max),
            (is_inf(g, self, positive=False), neginf, info.min)):
        number = (default if sh._is_none(replacement)
                  else sh._get_const(replacement, "f", "nan_to_num"))
        out = g.op("Where", mask, scalar(g, number, dtype), out)
    return out
