"""Test cases of the ``oxport.elementwise`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.elementwise import pack

_X = (2, 3, 4)
_HALF = dict(rtol=1e-2, atol=1e-3)  # fp16 cases: ORT may compute in float32 and round once


def _ints(low: int = -20, high: int = 20, shape=(3, 4), dtype=torch.int64):
    return lambda: torch.randint(low, high, shape, dtype=dtype)


def _nonzero_ints(dtype=torch.int64):
    return lambda: torch.randint(1, 7, (3, 4), dtype=dtype) * (torch.randint(0, 2, (3, 4),
                                                                         dtype=dtype) * 2 - 1)


def _half(*shape):
    return lambda: torch.randn(*shape).half()


def _bools(*shape):
    return lambda: torch.rand(*shape) > 0.5


def _positive(*shape):
    return lambda: torch.rand(*shape) + 0.5


pack.case("aten::add", lambda x, y: x + 2 * y, _X, _X, name="tensor")
pack.case("aten::add", lambda x: torch.add(x, x, alpha=0.5) + 1, _X, name="alpha")
pack.case("aten::add", lambda x, y: torch.add(x, y, alpha=3), _ints(), _ints(), name="int_alpha")
pack.case("aten::add", lambda x, y: x + y, _ints(dtype=torch.int32), _ints(), name="int32_int64")
pack.case("aten::add", lambda x, y: x + y, _bools(3, 4), _bools(3, 4), name="bool")
pack.case("aten::add", lambda x: x + 2.5, _half(3, 4), name="fp16_scalar", **_HALF)
pack.case("aten::add", lambda x, y: x + y, _half(3, 4), (3, 4), name="fp16_fp32", **_HALF)
pack.case("aten::add_", lambda x, y: x.add_(y), _X, _X)
pack.case("aten::sub", lambda x, y: torch.sub(x, y, alpha=2) - 1.5, _X, _X)
pack.case("aten::sub", lambda x: x - 1.5, _ints(), name="int_float_scalar")
pack.case("aten::sub_", lambda x, y: x.sub_(y), _X, _X)
pack.case("aten::rsub", lambda x: 1 - x, _X, name="scalar")
pack.case("aten::rsub", lambda x: torch.rsub(x, 3, alpha=2), _X, name="alpha")
pack.case("aten::mul", lambda x, y: x * y * 3, _X, (3, 4))
pack.case("aten::mul", lambda x: x * 2.5, _ints(), name="int_float_scalar")
pack.case("aten::mul", lambda x, y: x * y, _bools(3, 4), _bools(3, 4), name="bool")
pack.case("aten::mul", lambda x, y: x * y, _bools(3, 4), _ints(), name="bool_int")
pack.case("aten::mul", lambda x: x * 0.5, _half(3, 4), name="fp16", **_HALF)
pack.case("aten::mul_", lambda x: x.mul_(3), _X)
pack.case("aten::div", lambda x, y: x / y, _X, _positive(2, 3, 4), name="float")
pack.case("aten::div", lambda x: torch.div(x, 3, rounding_mode="floor"), _ints(),
          name="int_floor")
pack.case("aten::div", lambda x, y: torch.div(x, y, rounding_mode="floor"), _ints(),
          _nonzero_ints(), name="int_floor_tensor")
pack.case("aten::div", lambda x, y: torch.div(x, y, rounding_mode="trunc"), _ints(),
          _nonzero_ints(), name="int_trunc")
pack.case("aten::div", lambda x: torch.div(x * 4, 3, rounding_mode="trunc"), _X,
          name="float_trunc", min_opset=9)
pack.case("aten::div", lambda x: torch.div(x * 4, 3, rounding_mode="floor"), _X,
          name="float_floor")
pack.case("aten::div", lambda x: x / 3, _ints(), name="int_true")
pack.case("aten::div", lambda x, y: x / y, _half(3, 4), _positive(3, 4), name="fp16_fp32",
          **_HALF)
pack.case("aten::div_", lambda x: x.div_(3), _X)
pack.case("aten::floor_divide", lambda x, y: x // y, _ints(), _nonzero_ints(), name="int")
pack.case("aten::floor_divide", lambda x: (x * 4) // 3, _X, name="float")
pack.case("aten::remainder", lambda x, y: x % y, _ints(), _nonzero_ints(), name="int")
pack.case("aten::remainder", lambda x: (x * 5) % -1.5, _X, name="float")
pack.case("aten::remainder", lambda x: torch.remainder(7, x), _positive(3, 4),
          name="scalar_tensor")
pack.case("aten::fmod", lambda x, y: torch.fmod(x, y), _ints(), _nonzero_ints(), name="int")
pack.case("aten::fmod", lambda x: torch.fmod(x * 5, -1.5), _X, name="float")
pack.case("aten::pow", lambda x: x ** 2, _X, name="tensor_scalar")
pack.case("aten::pow", lambda x: 2 ** x, _X, name="scalar_tensor")
pack.case("aten::pow", lambda x, y: torch.pow(x, y), _positive(3, 4), (3, 4),
          name="tensor_tensor")
pack.case("aten::pow", lambda x: x ** 3, _ints(-5, 5), name="int")
pack.case("aten::pow", lambda x: x ** 1.5, _ints(0, 5), name="int_float_exponent")
pack.case("aten::pow", lambda x: x ** 2, _half(3, 4), name="fp16", **_HALF)
pack.case("aten::pow_", lambda x: x.pow_(2), _X)
pack.case("aten::square", torch.square, _X)
pack.case("aten::neg", torch.neg, _X)
pack.case("aten::neg", torch.neg, _ints(), name="int")
pack.case("aten::abs", torch.abs, _X)
pack.case("aten::abs", torch.abs, _ints(), name="int")
pack.case("aten::abs_", lambda x: x.abs_(), _X)
pack.case("aten::reciprocal", torch.reciprocal, _positive(3, 4))
pack.case("aten::reciprocal", torch.reciprocal, _nonzero_ints(), name="int")
pack.case("aten::sign", torch.sign, lambda: torch.randn(3, 4).round())
pack.case("aten::sign", torch.sign, _ints(-2, 3), name="int")
pack.case("aten::floor", torch.floor, _X)
pack.case("aten::floor", torch.floor, _ints(), name="int")
pack.case("aten::floor_", lambda x: x.floor_(), _X)
pack.case("aten::ceil", torch.ceil, _X)
pack.case("aten::ceil_", lambda x: x.ceil_(), _X)
pack.case("aten::round", torch.round, lambda: torch.tensor([0.5, 1.5, 2.5, -0.5, -1.7, 3.2]))
pack.case("aten::round", lambda x: torch.round(x * 100, decimals=2), _X, name="decimals")
pack.case("aten::round", lambda x: torch.round(x * 1000, decimals=-2), _X, name="neg_decimals")
pack.case("aten::round_", lambda x: x.round_(), _X)
pack.case("aten::trunc", torch.trunc, lambda: torch.randn(3, 4) * 4)
pack.case("aten::frac", torch.frac, lambda: torch.randn(3, 4) * 4)
for _name in ("maximum", "minimum"):
    pack.case(f"aten::{_name}", getattr(torch, _name), _X, (3, 4))
    pack.case(f"aten::{_name}", getattr(torch, _name), _ints(), _ints(dtype=torch.int32),
              name="int")
    pack.case(f"aten::{_name}", getattr(torch, _name), _bools(3, 4), _bools(3, 4), name="bool")
pack.case("aten::max.other", torch.max, _X, (4,))
pack.case("aten::max.other", torch.max, _ints(), _ints(), name="int")
pack.case("aten::min.other", torch.min, _X, (4,))
pack.case("aten::min.other", torch.min, _half(3, 4), (3, 4), name="fp16_fp32", **_HALF)
pack.case("aten::clamp", lambda x: torch.clamp(x, -0.5, 0.5), _X, name="both")
pack.case("aten::clamp", lambda x: torch.clamp(x, min=0.1), _X, name="min")
pack.case("aten::clamp", lambda x: torch.clamp(x, max=0.1), _X, name="max")
pack.case("aten::clamp", lambda x: torch.clamp(x, -3, 4), _ints(), name="int", min_opset=8)
pack.case("aten::clamp", lambda x, lo, hi: torch.clamp(x, lo, hi), _X, (3, 4),
          lambda: torch.rand(4) + 0.5, name="tensors", min_opset=8)
pack.case("aten::clamp", lambda x, hi: torch.clamp(x, max=hi), _X, (4,), name="tensor_max",
          min_opset=8)
pack.case("aten::clamp", lambda x: torch.clamp(x, -0.5, 0.5), _half(3, 4), name="fp16", **_HALF)
pack.case("aten::clamp_", lambda x: x.clamp_(-0.5, 0.5), _X)
pack.case("aten::clamp_min", lambda x: torch.clamp_min(x, 0.2), _X)
pack.case("aten::clamp_min_", lambda x: x.clamp_min_(0.2), _X)
pack.case("aten::clamp_max", lambda x: torch.clamp_max(x, 0.2), _X)
pack.case("aten::clamp_max_", lambda x: x.clamp_max_(0.2), _X)
pack.case("aten::lerp", lambda x, y: torch.lerp(x, y, 0.3), _X, _X, name="scalar")
pack.case("aten::lerp", torch.lerp, _X, _X, lambda: torch.rand(2, 3, 4), name="tensor")
pack.case("aten::addcmul", lambda x, y, z: torch.addcmul(x, y, z, value=0.5), _X, _X, (3, 4))
pack.case("aten::addcdiv", lambda x, y, z: torch.addcdiv(x, y, z, value=2), _X, _X,
          _positive(3, 4))
pack.case("aten::nan_to_num", torch.nan_to_num,
          lambda: torch.tensor([1.0, float("nan"), float("inf"), -float("inf")]))
pack.case("aten::nan_to_num", lambda x: torch.nan_to_num(x, 1.0, 9.0, -9.0),
          lambda: torch.tensor([1.0, float("nan"), float("inf"), -float("inf")]).half(),
          name="fp16_values", **_HALF)


# Scripted graphs carry no traced dtypes inside: promotion alone decides.
def _script_int_float(x: torch.Tensor) -> torch.Tensor:
    return (x + 2.5) * 2 - x / 4


def _script_clamp(x: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, min=0.1) * 2 + torch.clamp(x, None, 0.2)


def _script_int_divisions(x: torch.Tensor) -> torch.Tensor:
    return (x // 3 + x % 3) * torch.div(x, 4, rounding_mode="trunc")


def _script_scale_by_size(x: torch.Tensor) -> torch.Tensor:
    return x * x.size()[-1] ** -0.5  # int ** float is a float: the product stays fp16


pack.case("aten::add", _script_int_float, _ints(), name="script_int_float", script=True)
pack.case("aten::pow", _script_scale_by_size, _half(2, 3), name="script_int_float",
          script=True, **_HALF)
pack.case("aten::clamp", _script_clamp, _X, name="script", script=True)
pack.case("aten::floor_divide", _script_int_divisions, _ints(), name="script", script=True)

# Dtypes the opset or ONNX Runtime has no kernel for (computed wider, cast back) and a
# traced Python number taking a float64 tensor's dtype.
pack.case("aten::mul", lambda x: x * 2.5, lambda: torch.randn(3, 4, dtype=torch.float64),
          name="float64_python_float")
pack.case("aten::sub", lambda x, y: x - y, _ints(-5, 5, dtype=torch.int8),
          _ints(-5, 5, dtype=torch.int8), name="int8")
pack.case("aten::pow", lambda x: x ** 2, _ints(0, 10, dtype=torch.uint8), name="uint8")
pack.case("aten::square", torch.square, _ints(0, 10, dtype=torch.uint8), name="uint8")
pack.case("aten::clamp", lambda x: x.clamp(-2, 3), _ints(-5, 5, dtype=torch.int16), name="int16",
          min_opset=8)


# Complex tensors (inputs, weights, constants, numbers), carried as real pairs.
def _complex(*shape: int):
    return lambda: torch.randn(*shape, dtype=torch.complex64)


class _ComplexWeight(torch.nn.Module):
    """A complex parameter and a complex constant tensor, added and multiplied."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 3, dtype=torch.complex64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real((x + self.w) * torch.tensor([1 + 1j, 2 - 1j, 0.5j]))


pack.case(["aten::add", "aten::mul"], _ComplexWeight, _complex(2, 3), name="complex_weight")
pack.case("aten::mul", lambda x: torch.view_as_real(x * (2 + 3j)), _complex(2, 2),
          name="complex_number")
pack.case("aten::mul", lambda r: torch.view_as_real(r * 1j), (3,), name="real_times_complex")
pack.case(["aten::add", "aten::sub"],
          lambda x, r: tuple(torch.view_as_real(v) for v in (x + r * 2, x - r, r - x, x + 1.5,
                                                             x - 3j, x.sub(x, alpha=2))),
          _complex(2, 3), (3,), name="complex_and_real")
