"""Elementwise arithmetic and activations."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Value

pack = OpPack("oxport.elementwise")


def _binary(op_type: str):
    def symbolic(g, self: Value, other: Value) -> Value:
        a, b = sh.promote(g, self, other)
        return g.op(op_type, a, b)
    return symbolic


@pack.symbolic("aten::add", since=7)
def add(g, self: Value, other: Value, alpha: Value | None = None) -> Value:
    """``self + alpha * other``."""
    a, b = sh.promote(g, self, other)
    scale = sh._maybe_get_const(alpha, "f") if alpha is not None else 1
    if not isinstance(scale, Value) and scale != 1:
        b = g.op("Mul", b, sh._cast_to(g, g.constant(torch.tensor(scale)), b.type().dtype())
                 if b.type().dtype() is not None else scale)
    return g.op("Add", a, b)


@pack.symbolic("aten::sub", since=7)
def sub(g, self: Value, other: Value, alpha: Value | None = None) -> Value:
    """``self - alpha * other``."""
    a, b = sh.promote(g, self, other)
    scale = sh._maybe_get_const(alpha, "f") if alpha is not None else 1
    if not isinstance(scale, Value) and scale != 1:
        b = g.op("Mul", b, sh._cast_to(g, g.constant(torch.tensor(scale)), b.type().dtype())
                 if b.type().dtype() is not None else scale)
    return g.op("Sub", a, b)


@pack.symbolic("aten::mul", since=7)
def mul(g, self: Value, other: Value) -> Value:
    a, b = sh.promote(g, self, other)
    if a.type().dtype() == torch.bool:
        return g.op("And", a, b)
    return g.op("Mul", a, b)


@pack.symbolic("aten::div", since=7)
def div(g, self: Value, other: Value, rounding_mode: Value | None = None) -> Value:
    """True division (integers promote to float), or trunc/floor rounding."""
    mode = sh._maybe_get_const(rounding_mode, "s") if rounding_mode is not None else None
    a, b = sh.promote(g, self, other)
    dtype = a.type().dtype()
    if mode is None and dtype is not None and not dtype.is_floating_point:
        a, b = sh._cast_to(g, a, torch.float32), sh._cast_to(g, b, torch.float32)
    quotient = g.op("Div", a, b)
    if mode == "floor" and dtype is not None and dtype.is_floating_point:
        return g.op("Floor", quotient)
    if mode == "floor":
        float_q = g.op("Div", sh._cast_to(g, a, torch.float32), sh._cast_to(g, b, torch.float32))
        return sh._cast_to(g, g.op("Floor", float_q), dtype)
    if mode == "trunc" and dtype is not None and dtype.is_floating_point:
        sign = g.op("Sign", quotient)
        return g.op("Mul", g.op("Floor", g.op("Abs", quotient)), sign)
    return quotient


def _unary(op_type: str, name: str):
    def symbolic(g, self: Value, *_: Value) -> Value:
        return g.op(op_type, self)
    symbolic.__name__ = name
    symbolic.__doc__ = f"``aten::{name}`` as ONNX ``{op_type}``."
    return symbolic


for _name, _op in {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp",
                   "neg": "Neg"}.items():
    pack.symbolic(f"aten::{_name}", since=7)(_unary(_op, _name))
pack.symbolic("aten::relu_", since=7)(_unary("Relu", "relu_"))


@pack.symbolic("aten::elu", since=7)
@sh.parse_args("v", "f", "f", "f")
def elu(g, input: Value, alpha: float, scale: float = 1.0, input_scale: float = 1.0) -> Value:
    if scale != 1.0 or input_scale != 1.0:
        sh._unimplemented("aten::elu", "scale and input_scale other than 1")
    return g.op("Elu", input, alpha_f=alpha)


_X = (2, 3, 4)
pack.case("aten::add", lambda x, y: x + 2 * y, _X, _X, name="tensor")
pack.case("aten::add", lambda x: torch.add(x, x, alpha=0.5) + 1, _X, name="alpha_scalar")
pack.case("aten::sub", lambda x, y: torch.sub(x, y, alpha=2) - 1.5, _X, _X)
pack.case("aten::mul", lambda x, y: x * y * 3, _X, (3, 4))
pack.case("aten::div", lambda x, y: x / y, _X, lambda: torch.rand(2, 3, 4) + 0.5, name="float")
pack.case("aten::div", lambda x: torch.div(x, 3, rounding_mode="floor"),
          lambda: torch.randint(-20, 20, (4, 5)), name="int_floor")
pack.case("aten::div", lambda x: torch.div(x, 3), lambda: torch.randint(-20, 20, (4, 5)),
          name="int_true")
for _name in ("relu", "sigmoid", "tanh", "exp", "neg"):
    pack.case(f"aten::{_name}", getattr(torch, _name), _X)
pack.case("aten::relu_", torch.nn.ReLU(inplace=True), _X)
pack.case("aten::elu", lambda x: F.elu(x, 0.7), _X)
