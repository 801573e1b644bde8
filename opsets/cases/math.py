"""Test cases of the ``oxport.math`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.math import pack

_X = (2, 3, 4)
_HALF = dict(rtol=1e-2, atol=1e-3)  # fp16 cases: ORT may compute in float32 and round once


def _ints(low: int = -5, high: int = 6, dtype=torch.int64, shape=(3, 4)):
    return lambda: torch.randint(low, high, shape, dtype=dtype)


def _uniform(low: float, high: float):
    return lambda: torch.rand(3, 4) * (high - low) + low


def _bools():
    return lambda: torch.rand(3, 4) > 0.5


def _specials():
    return lambda: torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0, -2.0])


_UNIT = _uniform(-0.9, 0.9)
_POS = _uniform(0.1, 3.0)
for _name, _input in (("sqrt", _POS), ("exp", _X), ("log", _POS), ("sin", _X), ("cos", _X),
                      ("tan", _UNIT), ("asin", _UNIT), ("acos", _UNIT), ("atan", _X),
                      ("sinh", _X), ("cosh", _X), ("asinh", _X), ("acosh", _uniform(1.1, 4)),
                      ("atanh", _UNIT), ("erf", _X), ("rsqrt", _POS), ("exp2", _X),
                      ("expm1", _X), ("log1p", _POS), ("log2", _POS), ("log10", _POS),
                      ("erfc", _X)):
    pack.case(f"aten::{_name}", getattr(torch, _name), _input)
for _name in ("sqrt", "exp", "log"):
    pack.case(f"aten::{_name}_", lambda x, n=_name: getattr(x, f"{n}_")(), _POS)
pack.case("aten::sqrt", torch.sqrt, _ints(0, 9), name="int")
pack.case("aten::exp", torch.exp, lambda: torch.randn(3, 4).half(), name="fp16", **_HALF)
pack.case("aten::log2", torch.log2, _ints(1, 9), name="int")
pack.case("aten::atan2", torch.atan2, _X, _X)
pack.case("aten::atan2", torch.atan2, lambda: torch.tensor([0.0, 1.0, -1.0, 0.0, -2.0]),
          lambda: torch.tensor([0.0, -1.0, -1.0, -3.0, 0.0]), name="quadrants")
pack.case("aten::atan2", torch.atan2, lambda: torch.tensor([0.0, 1.0, float("nan"), 0.0]),
          lambda: torch.tensor([float("nan"), 0.0, 0.0, 0.0]), name="nan")
pack.case("aten::isnan", torch.isnan, _specials())
pack.case("aten::isnan", torch.isnan, _ints(), name="int")
pack.case("aten::isinf", torch.isinf, _specials())
pack.case("aten::isinf", torch.isinf, lambda: _specials()().half(), name="fp16")
pack.case("aten::isinf", torch.isinf, _ints(), name="int")

_CMP = {"eq": torch.eq, "ne": torch.ne, "gt": torch.gt, "lt": torch.lt, "ge": torch.ge,
        "le": torch.le}
_ROUNDED = lambda: torch.randn(3, 4).round()  # noqa: E731 - equal values happen
for _name, _fn in _CMP.items():
    pack.case(f"aten::{_name}", _fn, _ROUNDED, _ROUNDED, name="float")
    pack.case(f"aten::{_name}", lambda x, f=_fn: f(x, 1), _ints(), name="int_scalar")
    pack.case(f"aten::{_name}", lambda x, f=_fn: f(x, 0.5), _ints(), name="int_float_scalar")
    pack.case(f"aten::{_name}", _fn, _ints(dtype=torch.int32), _ROUNDED, name="int_float")
    pack.case(f"aten::{_name}", _fn, _bools(), _bools(), name="bool")
    pack.case(f"aten::{_name}", lambda x, f=_fn: f(x, 0.5), lambda: torch.randn(3, 4).half(),
              name="fp16_scalar")
    pack.case(f"aten::{_name}", _fn, _ints(dtype=torch.uint8, low=0), _ints(dtype=torch.int8),
              name="uint8_int8")
pack.case("aten::eq", torch.eq, _specials(), _specials(), name="nan", min_opset=9)
pack.case("aten::ge", torch.ge, _specials(), _specials(), name="nan", min_opset=9)

for _name in ("and", "or", "xor"):
    _fn = getattr(torch, f"logical_{_name}")
    pack.case(f"aten::logical_{_name}", _fn, _bools(), _bools())
    pack.case(f"aten::logical_{_name}", _fn, _ints(-1, 2), _X, name="numbers")
pack.case("aten::logical_not", torch.logical_not, _bools())
pack.case("aten::logical_not", torch.logical_not, _ints(-1, 2), name="int")
pack.case("aten::bitwise_not", torch.bitwise_not, _bools())
pack.case("aten::bitwise_not", torch.bitwise_not, _ints(-100, 100), name="int")
pack.case("aten::bitwise_not", torch.bitwise_not, _ints(0, 255, dtype=torch.uint8),
          name="uint8", min_opset=18)
for _op, _fn in (("and", lambda x, y: x & y), ("or", lambda x, y: x | y),
                 ("xor", lambda x, y: x ^ y)):
    for _name in (f"__{_op}__", f"bitwise_{_op}"):
        _call = _fn if _name.startswith("__") else getattr(torch, _name)
        pack.case(f"aten::{_name}", _call, _bools(), _bools(), name="bool")
        pack.case(f"aten::{_name}", _call, _ints(-50, 50), _ints(-50, 50, dtype=torch.int32),
                  name="int", min_opset=18)
pack.case("aten::__and__", lambda x: x & 6, _ints(0, 50), name="int_scalar", min_opset=18)
pack.case("aten::__lshift__", lambda x: x << 3, _ints(0, 30, dtype=torch.uint8), name="scalar")
pack.case("aten::__lshift__", lambda x, y: x << y, _ints(0, 30, dtype=torch.uint8),
          _ints(0, 3, dtype=torch.uint8), name="tensor")
pack.case("aten::__rshift__", lambda x: x >> 2, _ints(0, 255, dtype=torch.uint8))
pack.case("aten::bitwise_left_shift", lambda x: torch.bitwise_left_shift(x, 1),
          _ints(0, 100, dtype=torch.uint8))
pack.case("aten::bitwise_right_shift", lambda x: torch.bitwise_right_shift(x, 1),
          _ints(0, 100, dtype=torch.uint8))

pack.case("aten::where.self", lambda c, x, y: torch.where(c, x, y), _bools(), (3, 4), (4,))
pack.case("aten::where.self", lambda x, y: torch.where(x > 0, x, y), (3, 4),
          lambda: torch.randint(0, 5, (3, 4)), name="mixed_dtypes")
pack.case("aten::where.self", lambda c, x, y: torch.where(c, x, y), _bools(),
          lambda: torch.randn(3, 4).half(), (3, 4), name="fp16_fp32", **_HALF)
pack.case("aten::where.ScalarOther", lambda x: torch.where(x > 0, x, 0.5), (3, 4))
pack.case("aten::where.ScalarOther", lambda x: torch.where(x > 0, x, 0.5),
          lambda: torch.randn(3, 4).half(), name="fp16", **_HALF)
pack.case("aten::where.ScalarSelf", lambda x: torch.where(x > 0, 2, x), _ints())
pack.case("aten::where.Scalar", lambda x: torch.where(x > 0, 1.0, 0.0), (3, 4))



# Scripted graphs carry no traced dtypes inside: promotion alone decides.
def _script_compare(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((x > 0.5) & (y <= 2)) | (x == y)


def _script_where(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x, 0.5) * 2


pack.case("aten::gt", _script_compare, _ints(), _ROUNDED, name="script", script=True)
pack.case("aten::where.ScalarOther", _script_where, _ints(), name="script", script=True)
pack.case("aten::isfinite", torch.isfinite, _specials())
pack.case("aten::isfinite", torch.isfinite, lambda: _specials()().half(), name="fp16")
pack.case("aten::isfinite", torch.isfinite, _ints(), name="int")
pack.case("aten::logit", torch.logit, lambda: torch.rand(2, 3, 4) * 0.98 + 0.01)
pack.case("aten::logit", lambda x: torch.logit(x, 0.25), lambda: torch.rand(2, 3),
          name="eps")
pack.case("aten::__lshift__", lambda x, y: x << y, _ints(-50, 50), _ints(0, 5), name="signed")
pack.case("aten::__rshift__", lambda x, y: x >> y, _ints(-50, 50), _ints(0, 5), name="signed")
pack.case("aten::bitwise_right_shift", lambda x: torch.bitwise_right_shift(x, 3),
          _ints(-100, 100, dtype=torch.int32), name="int32")
pack.case("aten::bitwise_left_shift", lambda x: torch.bitwise_left_shift(x, 2),
          _ints(-100, 100, dtype=torch.int8), name="int8")
pack.case("aten::where.self", lambda c, x, y: torch.where(c, x, y), _bools(),
          lambda: torch.randint(-5, 5, (3, 4), dtype=torch.int16),
          lambda: torch.randint(-5, 5, (3, 4), dtype=torch.int16), name="int16")
pack.case("aten::where.self", lambda c, x, y: torch.where(c, x, y), _bools(), _bools(), _bools(),
          name="bool")  # ONNX Runtime has no Where of int16 or bool: computed in int32


# -- the hand-written RMSNorm that the ort and onnx targets fuse (plugins/targets/norms.py) --
class _HandRMSNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm: float32 statistics, rsqrt, weight last."""

    def __init__(self, size: int = 16) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(size) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = x.to(torch.float32)
        hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * hidden.to(x.dtype)


class _ResidualRMSNorm(_HandRMSNorm):
    """A norm of a residual sum that is read again (SkipSimplifiedLayerNormalization)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        total = a + b
        return super().forward(total), total * 2


class _HalfRMSNorm(_HandRMSNorm):
    def __init__(self) -> None:
        super().__init__()
        self.half()


for _target, _opset in (("ort", None), ("onnx", 23)):
    pack.case("aten::rsqrt", _HandRMSNorm, (2, 3, 16), name=f"rms_norm_{_target}",
              export_kwargs={"target": _target}, min_opset=_opset)
    pack.case("aten::rsqrt", _ResidualRMSNorm, (2, 3, 16), (2, 3, 16),
              name=f"residual_rms_norm_{_target}", export_kwargs={"target": _target},
              min_opset=_opset)
pack.case("aten::rsqrt", _HalfRMSNorm, lambda: torch.randn(2, 3, 16).half(),
          name="rms_norm_ort_fp16", export_kwargs={"target": "ort"}, atol=2e-3, rtol=2e-3)
