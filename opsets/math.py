"""Math functions, comparisons, logical and bitwise ops, ``where``.

Unary float functions take integer inputs as float32, as PyTorch does. Comparisons
promote their operands with PyTorch's rules before comparing; where an older opset lacks
a comparison for a type, it is rebuilt from the ones it has.
"""

from __future__ import annotations

import math

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Value
from oxport.opsets.common import float_input, is_int, promote, scalar
from oxport.opsets.elementwise import floor_divide_values
from oxport.opsets.elementwise import is_inf as _is_inf

pack = OpPack("oxport.math", cases="oxport.opsets.cases.math")


# -- unary float functions -----------------------------------------------------------------
def _unary(op_type: str, name: str):
    def symbolic(g, self: Value) -> Value:
        return g.op(op_type, float_input(g, f"aten::{name}", self))
    symbolic.__name__ = name
    signature = ("(Tensor(a!) self) -> Tensor(a!)" if name.endswith("_")
                 else "(Tensor self) -> Tensor")
    symbolic.__doc__ = f"{name}{signature}\n\nAs ONNX ``{op_type}``."
    return symbolic


for _name, _op, _since in (
        ("sqrt", "Sqrt", 7), ("exp", "Exp", 7), ("log", "Log", 7), ("sin", "Sin", 7),
        ("cos", "Cos", 7), ("tan", "Tan", 7), ("asin", "Asin", 7), ("acos", "Acos", 7),
        ("atan", "Atan", 7), ("sinh", "Sinh", 9), ("cosh", "Cosh", 9), ("asinh", "Asinh", 9),
        ("acosh", "Acosh", 9), ("atanh", "Atanh", 9), ("erf", "Erf", 9)):
    pack.symbolic(f"aten::{_name}", since=_since)(_unary(_op, _name))
    if _name in ("sqrt", "exp", "log"):
        pack.symbolic(f"aten::{_name}_", since=_since)(_unary(_op, f"{_name}_"))


@pack.symbolic("aten::rsqrt", since=7)
def rsqrt(g, self: Value) -> Value:
    """rsqrt(Tensor self) -> Tensor"""
    return g.op("Reciprocal", g.op("Sqrt", float_input(g, "aten::rsqrt", self)))


@pack.symbolic("aten::exp2", since=7)
def exp2(g, self: Value) -> Value:
    """exp2(Tensor self) -> Tensor"""
    x = float_input(g, "aten::exp2", self)
    return g.op("Pow", scalar(g, 2.0, x.type().dtype()), x)


@pack.symbolic("aten::expm1", since=7)
def expm1(g, self: Value) -> Value:
    """expm1(Tensor self) -> Tensor"""
    x = float_input(g, "aten::expm1", self)
    return g.op("Sub", g.op("Exp", x), scalar(g, 1.0, x.type().dtype()))


@pack.symbolic("aten::log1p", since=7)
def log1p(g, self: Value) -> Value:
    """log1p(Tensor self) -> Tensor"""
    x = float_input(g, "aten::log1p", self)
    return g.op("Log", g.op("Add", x, scalar(g, 1.0, x.type().dtype())))


def _log_base(base: float, name: str):
    def symbolic(g, self: Value) -> Value:
        x = float_input(g, f"aten::{name}", self)
        return g.op("Div", g.op("Log", x), scalar(g, math.log(base), x.type().dtype()))
    symbolic.__name__ = name
    symbolic.__doc__ = f"{name}(Tensor self) -> Tensor\n\n``log(x) / log({base:g})``."
    return symbolic


log2 = pack.symbolic("aten::log2", since=7)(_log_base(2.0, "log2"))
log10 = pack.symbolic("aten::log10", since=7)(_log_base(10.0, "log10"))


@pack.symbolic("aten::erfc", since=9)
def erfc(g, self: Value) -> Value:
    """erfc(Tensor self) -> Tensor"""
    x = float_input(g, "aten::erfc", self)
    return g.op("Sub", scalar(g, 1.0, x.type().dtype()), g.op("Erf", x))


@pack.symbolic("aten::atan2", since=9)
def atan2(g, self: Value, other: Value) -> Value:
    """atan2(Tensor self, Tensor other) -> Tensor

    ``atan(y / x)`` moved to the right quadrant; ``atan2(0, 0) = 0``."""
    (y, x), dtype = promote(g, "aten::atan2", self, other)
    if not dtype or not dtype.is_floating_point:
        y, x = sh.cast_to(g, y, torch.float32), sh.cast_to(g, x, torch.float32)
        dtype = torch.float32
    zero = scalar(g, 0.0, dtype)
    angle = g.op("Atan", g.op("Div", y, x))
    half_turn = g.op("Where", g.op("Less", y, zero), scalar(g, -math.pi, dtype),
                     scalar(g, math.pi, dtype))
    angle = g.op("Where", g.op("Less", x, zero), g.op("Add", angle, half_turn), angle)
    both_zero = g.op("And", _is_zero(g, x, zero), _is_zero(g, y, zero))
    return g.op("Where", both_zero, zero, angle)


def _is_zero(g, x: Value, zero: Value) -> Value:
    """``x == 0`` (false for NaN): Equal of floats from opset 11, else neither < nor > nor NaN."""
    if g.opset >= 11:
        return g.op("Equal", x, zero)
    unequal = g.op("Or", g.op("Less", x, zero), g.op("Greater", x, zero))
    return g.op("Not", g.op("Or", unequal, g.op("IsNaN", x)))


@pack.symbolic("aten::isnan", since=9)
def isnan(g, self: Value) -> Value:
    """isnan(Tensor self) -> Tensor

    IsNaN for floats; all False for integers and bools."""
    if (self.type().dtype() or torch.float32).is_floating_point:
        return g.op("IsNaN", self)
    return _all_false(g, self)


@pack.symbolic("aten::isinf", since=10)
def isinf(g, self: Value) -> Value:
    """isinf(Tensor self) -> Tensor

    IsInf for floats (half precision as float32 before opset 20); False for integers."""
    if (self.type().dtype() or torch.float32).is_floating_point:
        return _is_inf(g, self)
    return _all_false(g, self)


@pack.symbolic("aten::isfinite", since=10)
def isfinite(g, self: Value) -> Value:
    """isfinite(Tensor self) -> Tensor

    Neither infinite nor NaN for floats; all True for integers and bools."""
    if (self.type().dtype() or torch.float32).is_floating_point:
        return g.op("Not", g.op("Or", _is_inf(g, self), g.op("IsNaN", self)))
    return _all_of(g, self, True)


def _all_false(g, like: Value) -> Value:
    return _all_of(g, like, False)


def _all_of(g, like: Value, truth: bool) -> Value:
    return g.op("ConstantOfShape", g.op("Shape", like), value_t=torch.tensor([truth]))


@pack.symbolic("aten::logit", since=8)  # broadcasting Max/Min
def logit(g, self: Value, eps: Value | None = None) -> Value:
    """logit(Tensor self, float? eps=None) -> Tensor

    ``log(p / (1 - p))``, ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    p = float_input(g, "aten::logit", self)
    dtype = p.type().dtype() or torch.float32
    if eps is not None and not sh._is_none(eps):
        margin = sh._get_const(eps, "f", "eps")
        p = g.op("Min", g.op("Max", p, scalar(g, margin, dtype)), scalar(g, 1 - margin, dtype))
    return g.op("Log", g.op("Div", p, g.op("Sub", scalar(g, 1, dtype), p)))


# -- comparisons -------------------------------------------------------------------------------
def _operands(g, self: Value, other: Value) -> tuple[Value, Value, torch.dtype | None]:
    a, b = sh.promote(g, self, other)
    return a, b, sh.result_dtype(self, other)


def _numeric(g, a: Value, b: Value, dtype: torch.dtype | None, floats_only: bool):
    """Operands an ordering op accepts: bools as uint8, and (``floats_only``) ints as float64."""
    if dtype == torch.bool:
        dtype = torch.float64 if floats_only else torch.uint8
    elif floats_only and is_int(dtype):
        dtype = torch.float64
    else:
        return a, b
    return sh.cast_to(g, a, dtype), sh.cast_to(g, b, dtype)


def _equal_7(g, a: Value, b: Value, dtype: torch.dtype | None) -> Value:
    """Equal before opset 11 (bool, int32 and int64 only): floats as neither less nor greater."""
    if dtype is not None and dtype.is_floating_point:
        ordered = g.op("Or", g.op("Less", a, b), g.op("Greater", a, b))
        if g.opset >= 9:
            ordered = g.op("Or", ordered, g.op("Or", g.op("IsNaN", a), g.op("IsNaN", b)))
        return g.op("Not", ordered)
    if dtype not in (None, torch.bool, torch.int32, torch.int64):
        a, b = sh.cast_to(g, a, torch.int64), sh.cast_to(g, b, torch.int64)
    return g.op("Equal", a, b)


@pack.symbolic("aten::eq", since=7)
def eq(g, self: Value, other: Value) -> Value:
    """eq.Tensor(Tensor self, Tensor other) -> Tensor
    eq.Scalar(Tensor self, Scalar other) -> Tensor
    eq.Tensor_list(Tensor[] a, Tensor[] b) -> bool
    """
    return _equal_7(g, *_operands(g, self, other))


@pack.symbolic("aten::eq", since=11)
def eq_11(g, self: Value, other: Value) -> Value:
    """eq.Tensor(Tensor self, Tensor other) -> Tensor
    eq.Scalar(Tensor self, Scalar other) -> Tensor
    eq.Tensor_list(Tensor[] a, Tensor[] b) -> bool
    """
    a, b, _ = _operands(g, self, other)
    return g.op("Equal", a, b)


@pack.symbolic("aten::ne", since=7)
def ne(g, self: Value, other: Value) -> Value:
    """ne.Tensor(Tensor self, Tensor other) -> Tensor
    ne.Scalar(Tensor self, Scalar other) -> Tensor
    ne.Tensor_list(Tensor[] a, Tensor[] b) -> bool
    """
    return g.op("Not", _equal_7(g, *_operands(g, self, other)))


@pack.symbolic("aten::ne", since=11)
def ne_11(g, self: Value, other: Value) -> Value:
    """ne.Tensor(Tensor self, Tensor other) -> Tensor
    ne.Scalar(Tensor self, Scalar other) -> Tensor
    ne.Tensor_list(Tensor[] a, Tensor[] b) -> bool
    """
    a, b, _ = _operands(g, self, other)
    return g.op("Not", g.op("Equal", a, b))


def _ordering(op_type: str, name: str, since: int):
    def symbolic(g, self: Value, other: Value) -> Value:
        a, b, dtype = _operands(g, self, other)
        a, b = _numeric(g, a, b, dtype, floats_only=g.opset < 9)
        return g.op(op_type, a, b)
    symbolic.__name__ = name if since == 7 else f"{name}_{since}"
    symbolic.__doc__ = (f"{name}.Tensor(Tensor self, Tensor other) -> Tensor\n"
                        f"{name}.Scalar(Tensor self, Scalar other) -> Tensor\n\n"
                        f"As ONNX ``{op_type}``.")
    return symbolic


def _ordering_or_equal(op_type: str, name: str):
    def symbolic(g, self: Value, other: Value) -> Value:
        a, b, dtype = _operands(g, self, other)
        strict_a, strict_b = _numeric(g, a, b, dtype, floats_only=g.opset < 9)
        strict = g.op(op_type, strict_a, strict_b)
        equal = _equal_7(g, a, b, dtype) if g.opset < 11 else g.op("Equal", a, b)
        return g.op("Or", strict, equal)
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}.Tensor(Tensor self, Tensor other) -> Tensor\n"
                        f"{name}.Scalar(Tensor self, Scalar other) -> Tensor\n\n"
                        "``a > b or a == b`` before GreaterOrEqual/LessOrEqual (opset 12).")
    return symbolic


for _name, _op in (("gt", "Greater"), ("lt", "Less")):
    pack.symbolic(f"aten::{_name}", since=7)(_ordering(_op, _name, 7))
for _name, _op in (("ge", "Greater"), ("le", "Less")):
    pack.symbolic(f"aten::{_name}", since=7)(_ordering_or_equal(_op, _name))
    pack.symbolic(f"aten::{_name}", since=12)(_ordering(f"{_op}OrEqual", _name, 12))


# -- logical and bitwise --------------------------------------------------------------------------
def _as_bool(g, x: Value) -> Value:
    return sh.cast_to(g, x, torch.bool)


def _logical(op_type: str, name: str):
    def symbolic(g, self: Value, other: Value) -> Value:
        return g.op(op_type, _as_bool(g, self), _as_bool(g, other))
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, Tensor other) -> Tensor\n\n"
                        f"``{op_type}`` of the inputs' truth values.")
    return symbolic


for _name, _op in (("and", "And"), ("or", "Or"), ("xor", "Xor")):
    pack.symbolic(f"aten::logical_{_name}", since=7)(_logical(_op, f"logical_{_name}"))


@pack.symbolic("aten::logical_not", since=7)
def logical_not(g, self: Value) -> Value:
    """logical_not(Tensor self) -> Tensor"""
    return g.op("Not", _as_bool(g, self))


@pack.symbolic("aten::bitwise_not", since=7)
def bitwise_not(g, self: Value) -> Value:
    """bitwise_not(Tensor self) -> Tensor

    Not for bools; ``-x - 1`` for int32/int64 before BitwiseNot (opset 18)."""
    dtype = self.type().dtype()
    if dtype == torch.bool:
        return g.op("Not", self)
    if dtype not in (torch.int32, torch.int64):
        sh._onnx_opset_unsupported_detailed("aten::bitwise_not", g.opset, 18,
                                            f"bitwise_not on {dtype} needs BitwiseNot")
    return g.op("Sub", g.op("Neg", self), scalar(g, 1, dtype))


@pack.symbolic("aten::bitwise_not", since=18)
def bitwise_not_18(g, self: Value) -> Value:
    """bitwise_not(Tensor self) -> Tensor"""
    return g.op("Not" if self.type().dtype() == torch.bool else "BitwiseNot", self)


def _bitwise(logical: str, bitwise: str, name: str, since: int):
    kind = f"aten::{name}"

    def symbolic(g, self: Value, other: Value) -> Value:
        (a, b), dtype = promote(g, kind, self, other)
        if dtype == torch.bool:
            return g.op(logical, a, b)
        if since < 18:
            sh._onnx_opset_unsupported_detailed(kind, g.opset, 18,
                                                f"{kind} on integers needs {bitwise}")
        return g.op(bitwise, a, b)
    symbolic.__name__ = name.strip("_") + ("" if since == 7 else f"_{since}")
    symbolic.__doc__ = (f"{name}.Tensor(Tensor self, Tensor other) -> Tensor\n"
                        "and its Scalar overloads\n\n"
                        f"``{logical}`` for bools, ``{bitwise}`` for integers (opset 18).")
    return symbolic


for _op in ("and", "or", "xor"):
    _logical_op, _bitwise_op = _op.capitalize(), f"Bitwise{_op.capitalize()}"
    for _name in (f"__{_op}__", f"bitwise_{_op}"):
        for _since in (7, 18):
            pack.symbolic(f"aten::{_name}", since=_since)(
                _bitwise(_logical_op, _bitwise_op, _name, _since))

_UNSIGNED = (torch.uint8, torch.uint32, torch.uint64)


def _shift(direction: str, name: str):
    kind = f"aten::{name}"

    def symbolic(g, self: Value, other: Value) -> Value:
        (a, b), dtype = promote(g, kind, self, other)
        if not is_int(dtype):
            sh._unimplemented(kind, f"a {dtype} tensor: shifts take integers")
        if dtype in _UNSIGNED and g.opset >= 11:
            return g.op("BitShift", a, b, direction_s=direction)
        return _arithmetic_shift(g, a, b, dtype, direction)
    symbolic.__name__ = name.strip("_")
    symbolic.__doc__ = (f"{name}.Tensor(Tensor self, Tensor other) -> Tensor\n"
                        "and its Scalar overloads\n\n"
                        f"BitShift {direction} for unsigned integers (opset 11); signed ones, "
                        "and every integer before 11, multiply or floor-divide by 2**shift.")
    return symbolic


def _arithmetic_shift(g, a: Value, b: Value, dtype: torch.dtype, direction: str) -> Value:
    """``a << b`` as ``a * 2**b`` and ``a >> b`` as ``floor(a / 2**b)``, in int64 (ONNX
    Runtime's Mul and Div lack the narrow integer types before opset 14)."""
    a, b = sh.cast_to(g, a, torch.int64), sh.cast_to(g, b, torch.int64)
    power = sh.cast_to(g, g.op("Pow", g.constant(torch.tensor(2.0, dtype=torch.float64)),
                                sh.cast_to(g, b, torch.float64)), torch.int64)
    if direction == "LEFT":
        shifted = g.op("Mul", a, power)
    else:
        shifted = floor_divide_values(g, a, power, torch.int64)
    return sh.cast_to(g, shifted, dtype)


for _name, _direction in (("__lshift__", "LEFT"), ("bitwise_left_shift", "LEFT"),
                          ("__rshift__", "RIGHT"), ("bitwise_right_shift", "RIGHT")):
    pack.symbolic(f"aten::{_name}", since=9)(_shift(_direction, _name))


# -- where ---------------------------------------------------------------------------------------
def where(g, condition: Value, self: Value, other: Value) -> Value:
    """where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor
    where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor
    where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor
    where.self(Tensor condition, Tensor self, Tensor other) -> Tensor

    ``self`` where ``condition`` holds, else ``other``; the branches promoted together."""
    (a, b), _ = promote(g, "aten::where", self, other)
    return g.op("Where", _as_bool(g, condition), a, b)


for _overload in ("self", "ScalarSelf", "ScalarOther", "Scalar"):
    pack.symbolic(f"aten::where.{_overload}", since=9)(where)
