"""Test cases of the ``oxport.creation`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.creation import pack

_X = (2, 3)
_DYN = {"input_names": ["x"], "dynamic_axes": {"x": [0, 1]}}
# ONNX Runtime 1.31 has no kernels for the opset-22 RandomUniform/RandomNormal(Like), Bernoulli
# and Multinomial, so the random cases stop at 21 (the symbolics serve every opset).
_RANDOM = {"check": "shape", "max_opset": 21}


def _zeros_dynamic(x: torch.Tensor) -> torch.Tensor:
    return x + torch.zeros(x.size(0), x.size(1), dtype=torch.int64)


def _arange_dynamic(x: torch.Tensor) -> torch.Tensor:
    return torch.arange(1, x.size(0) * 2, 3) * 2


def _arange_float(x: torch.Tensor) -> torch.Tensor:
    return torch.arange(0.5, x.size(0), 0.75, dtype=torch.float64)


def _arange_float_bounds_int(x: torch.Tensor) -> torch.Tensor:
    return torch.arange(x.size(0), 8.5, 1.5, dtype=torch.int64)


def _linspace_dynamic(x: torch.Tensor) -> torch.Tensor:
    return torch.linspace(-1.0, 2.0, x.size(1))


def _eye_dynamic(x: torch.Tensor) -> torch.Tensor:
    return torch.eye(x.size(0), x.size(1), dtype=torch.int64)


def _tensor_list(x: torch.Tensor) -> torch.Tensor:
    return x + torch.tensor([1.0, 2.0, 3.0])


def _tensor_dynamic(x: torch.Tensor) -> torch.Tensor:
    return torch.tensor([x.size(0), x.size(1)], dtype=torch.float32)


def _as_tensor(x: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64)


def _randint_low(x: torch.Tensor) -> torch.Tensor:
    return torch.randint(3, 9, (x.size(0), 4))


pack.case("aten::zeros", lambda x: x + torch.zeros(2, 3), _X, name="static")
pack.case("aten::zeros", _zeros_dynamic, _X, name="dynamic_int", min_opset=9, **_DYN)
pack.case("aten::ones", lambda x: torch.ones(3, dtype=torch.float64) * 2, (3,), name="float64")
pack.case("aten::ones", lambda x: x + torch.ones(x.size(1)), _X, name="dynamic", min_opset=9,
          **_DYN)
pack.case("aten::empty", lambda x: torch.empty(2, 3).shape[0] * x, _X)
pack.case("aten::full", lambda x: x + torch.full((2, 3), 1.5), _X, name="float")
pack.case("aten::full", lambda x: torch.full((x.size(1),), 7), _X, name="int_dynamic",
          min_opset=9, **_DYN)
pack.case("aten::full", lambda x: torch.full((2, 2), 3, dtype=torch.float64), _X, name="dtype")
pack.case("aten::zeros_like", lambda x: torch.zeros_like(x) + 1, _X)
pack.case("aten::ones_like", lambda x: torch.ones_like(x, dtype=torch.int32), _X,
          name="dtype", **_DYN)
pack.case("aten::empty_like", lambda x: torch.empty_like(x).shape[1] * x, _X)
pack.case("aten::full_like", lambda x: torch.full_like(x, 3.5), _X, name="float")
pack.case("aten::full_like", lambda x: torch.full_like(x, 4), lambda: torch.arange(6).view(2, 3),
          name="int")
pack.case("aten::full_like", lambda x: torch.full_like(x, x.sum()), _X, name="tensor_value",
          min_opset=8)
pack.case("aten::full_like", lambda x: x.clone().fill_(2.5), _X, name="fill_of_clone")
pack.case("aten::new_zeros", lambda x: x.new_zeros(2, 3), _X)
pack.case("aten::new_ones", lambda x: x.new_ones((x.size(0),)), _X, min_opset=9, **_DYN)
pack.case("aten::new_empty", lambda x: x.new_empty((2,)).shape[0] * x, _X)
pack.case("aten::new_full", lambda x: x.new_full((3,), 2), lambda: torch.ones(2, dtype=torch.int32))
pack.case("aten::fill", lambda x: x.clone().fill_(x.sum()), _X, min_opset=8)
# In-place ops survive mutation removal only on graph inputs (the case overwrites its input).
pack.case("aten::fill_", lambda x: x.fill_(2.5), _X)
pack.case("aten::zero_", lambda x: x.zero_() + 1, _X)
pack.case("aten::scalar_tensor", lambda x: x + torch.scalar_tensor(3.0), _X, name="float")
pack.case("aten::scalar_tensor", lambda x: torch.scalar_tensor(x.size(0), dtype=torch.int32), _X,
          name="dynamic", **_DYN)
pack.case("aten::tensor", _tensor_list, (2, 3), name="const", script=True)
pack.case("aten::tensor", _tensor_dynamic, (2, 3), name="dynamic", script=True, **_DYN)
pack.case("aten::as_tensor", _as_tensor, (2, 3), script=True)
pack.case("aten::arange", lambda x: x + torch.arange(3), _X, name="end")
pack.case("aten::arange", lambda x: torch.arange(1, 7, 2, dtype=torch.float64), _X, name="step")
pack.case("aten::arange", _arange_dynamic, (4, 3), name="dynamic", script=True, min_opset=9, **_DYN)
pack.case("aten::arange", lambda x: torch.arange(5, out=torch.empty(5, dtype=torch.long)) + x,
          lambda: torch.ones(5, dtype=torch.long), name="out")
pack.case("aten::arange",
          lambda x: torch.arange(1, 2, 0.25, out=torch.empty(4, dtype=torch.float64)) + x,
          lambda: torch.ones(4, dtype=torch.float64), name="start_out")
pack.case("aten::arange", _arange_float, (4, 3), name="dynamic_float", script=True, min_opset=9,
          **_DYN)
pack.case("aten::arange", lambda x: torch.arange(x.size(0)) * 2, (4, 3), name="traced_dynamic",
          min_opset=9, **_DYN)
pack.case(("aten::zeros", "aten::ones"), lambda n: (torch.zeros(n, 1), torch.ones(n, 2)),
          lambda: torch.tensor([3]), name="size_from_a_tensor", min_opset=9)
pack.case("aten::arange", _arange_float_bounds_int, (2, 3), name="float_bounds_int_dtype",
          script=True, min_opset=9, **_DYN)
pack.case("aten::arange", lambda e: torch.arange(e, dtype=torch.int64), lambda: torch.tensor(8.5),
          name="float_end_int_dtype", min_opset=9)
pack.case("aten::_dim_arange", lambda x: torch._dim_arange(x, -1), (2, 5), min_opset=9, **_DYN)
pack.case("aten::linspace", lambda x: x + torch.linspace(0, 1, 3), _X, name="static")
pack.case("aten::linspace", _linspace_dynamic, (2, 5), name="dynamic", script=True, min_opset=9,
          **_DYN)
pack.case("aten::linspace", torch.linspace, torch.tensor(3.0), torch.tensor(10.0), 5,
          name="tensor_bounds", min_opset=9)
pack.case("aten::eye", lambda x: x + torch.eye(3), (3, 3), name="square")
pack.case("aten::eye", lambda x: torch.eye(2, 4, dtype=torch.int32), _X, name="rect")
pack.case("aten::eye", _eye_dynamic, (3, 4), name="dynamic", script=True, min_opset=9, **_DYN)
pack.case("aten::rand", lambda x: torch.rand(2, 3) + x, _X, **_RANDOM)
pack.case("aten::randn", lambda x: torch.randn(x.size(0), 4, dtype=torch.float64), _X,
          min_opset=9, **_RANDOM, **_DYN)
pack.case("aten::rand_like", torch.rand_like, _X, **_RANDOM)
pack.case("aten::randn_like", lambda x: torch.randn_like(x, dtype=torch.float64), _X, **_RANDOM)
pack.case("aten::randint", lambda x: torch.randint(5, (2, 3)), _X, name="high", **_RANDOM)
pack.case("aten::randint", _randint_low, _X, name="low_dynamic", script=True, min_opset=9,
          **_RANDOM, **_DYN)
pack.case("aten::bernoulli", torch.bernoulli, lambda: torch.rand(3, 4), name="probs", **_RANDOM)
pack.case("aten::bernoulli", lambda x: torch.bernoulli(x, 0.3), (3, 4), name="p", **_RANDOM)
pack.case("aten::multinomial", lambda x: torch.multinomial(x, 4, replacement=True),
          lambda: torch.rand(2, 5), name="2d", **_RANDOM)
pack.case("aten::multinomial", lambda x: torch.multinomial(x, 1), lambda: torch.rand(5),
          name="1d", **_RANDOM)
pack.case("aten::bernoulli", torch.bernoulli, lambda: torch.randint(0, 2, (3, 4)).float(),
          name="certain", max_opset=21)  # probabilities of 0 and 1 make the draw exact
pack.case("aten::normal", lambda m, s: torch.normal(m, s), (3, 4), lambda: torch.rand(3, 1),
          name="tensors", **_RANDOM)
pack.case("aten::normal", lambda m: torch.normal(m, 0.0), (3, 4), name="exact_mean",
          max_opset=21)
pack.case("aten::normal", lambda s: torch.normal(2.0, s) * 0, lambda: torch.rand(2, 3),
          name="std_tensor", max_opset=21)
pack.case("aten::normal", lambda x: x.clone().normal_(5.0, 2.0) + x, (2, 5), name="in_place",
          min_opset=9, **_RANDOM)
pack.case("aten::normal", lambda x: torch.normal(1.0, 2.0, (2, 5)) + x, (2, 5), name="sized",
          **_RANDOM)
pack.case("aten::randint_like", lambda x: torch.randint_like(x, 4), (3, 4), **_RANDOM)
pack.case("aten::randint_like", lambda x: torch.randint_like(x, 5, 6, dtype=torch.int32),
          (3, 4), name="exact", max_opset=21)  # [5, 6) holds only 5
