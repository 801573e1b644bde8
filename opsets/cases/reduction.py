"""Test cases of the ``oxport.reduction`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.cases import scalar
from oxport.opsets.reduction import pack

_X = (2, 3, 4)


def _ints(*shape: int, dtype: torch.dtype = torch.int32):
    return lambda: torch.randint(0 if dtype == torch.uint8 else -5, 6, shape, dtype=dtype)


def _bools(*shape: int):
    return lambda: torch.rand(shape) > 0.5


pack.case("aten::sum", lambda x: x.sum(), _X, name="all")
pack.case("aten::sum", lambda x: x.sum([0, 2], keepdim=True), _X, name="dims_keepdim")
pack.case("aten::sum", lambda x: x.sum(-1, dtype=torch.float64), _X, name="dtype")
pack.case("aten::sum", lambda x: x.sum(1), _ints(2, 3, 4), name="int32")
pack.case("aten::sum", lambda x: x.sum(), _bools(2, 3), name="bool")
pack.case("aten::mean", lambda x: x.mean(), _X, name="all")
pack.case("aten::mean", lambda x: x.mean((0, -1), keepdim=True), _X, name="dims")
pack.case("aten::mean", lambda x: x.mean(1), lambda: torch.randn(3, 4, dtype=torch.float64),
          name="float64")
pack.case("aten::prod", lambda x: x.prod(), (2, 3), name="all")
pack.case("aten::prod", lambda x: x.prod(1, keepdim=True), _X, name="dim")
pack.case("aten::prod", lambda x: x.prod(0), _ints(3, 4), name="int32")
pack.case("aten::amax", lambda x: x.amax((0, 2)), _X, name="dims")
pack.case("aten::amax", lambda x: x.amax(), _X, name="all")
pack.case("aten::amin", lambda x: x.amin(1, keepdim=True), _X, name="dim")
pack.case("aten::amin", lambda x: x.amin(0), _ints(3, 4, dtype=torch.int8), name="int8")
pack.case("aten::max", lambda x: x.max(), _X, name="all")
pack.case("aten::max", lambda x: x.max(1), _X, name="dim")
pack.case("aten::max", lambda x: x.max(-1, keepdim=True), _ints(3, 4, dtype=torch.int64),
          name="dim_int")
pack.case("aten::min", lambda x: x.min(), _ints(3, 4, dtype=torch.uint8), name="all_uint8")
pack.case("aten::min", lambda x: x.min(0), _X, name="dim")
pack.case("aten::argmax", lambda x: x.argmax(), _X, name="all")
pack.case("aten::argmax", lambda x: x.argmax(keepdim=True), (3, 4), name="all_keepdim")
pack.case("aten::argmax", lambda x: x.argmax(1, keepdim=True), _ints(3, 4, dtype=torch.int64),
          name="dim_int")
pack.case("aten::argmin", lambda x: x.argmin(-1), _X, name="dim")
pack.case("aten::argmin", lambda x: x.argmin(0), _ints(3, 4, dtype=torch.uint8), name="uint8")
pack.case("aten::var", lambda x: x.var(), _X, name="all")
pack.case("aten::var", lambda x: x.var((0, 2), keepdim=True), _X, name="dims")
pack.case("aten::var", lambda x: x.var(1, correction=0), lambda: torch.randn(3, 4).double(),
          name="population")
pack.case("aten::std", lambda x: x.std(), _X, name="all")
pack.case("aten::std", lambda x: x.std(1, unbiased=False), _X, name="biased")
pack.case("aten::std", lambda x: torch.std(x, -1, correction=2, keepdim=True), (3, 5),
          name="correction")
pack.case("aten::var_mean", lambda x: torch.var_mean(x, 1), _X)
pack.case("aten::std_mean", lambda x: torch.std_mean(x), _X)
pack.case("aten::logsumexp", lambda x: torch.logsumexp(x, 1), _X, name="dim")
pack.case("aten::logsumexp", lambda x: torch.logsumexp(x, (0, 1), keepdim=True), _ints(3, 4),
          name="int")
pack.case("aten::all", lambda x: x.all(), _bools(2, 3), name="all")
pack.case("aten::all", lambda x: x.all(1), _ints(3, 4, dtype=torch.uint8), name="uint8")
pack.case("aten::any", lambda x: x.any(0, keepdim=True), _ints(3, 4), name="dim")
pack.case("aten::any", lambda x: x.any(), _X, name="all")
pack.case("aten::count_nonzero", lambda x: torch.count_nonzero(x), _ints(3, 4), name="all")
pack.case("aten::count_nonzero", lambda x: torch.count_nonzero(x, (0, 2)), _bools(2, 3, 4),
          name="dims")
pack.case("aten::cumsum", lambda x: torch.cumsum(x, 1), _X, name="float")
pack.case("aten::cumsum", lambda x: torch.cumsum(x, -1), _ints(3, 4), name="int32")
pack.case("aten::cumsum", lambda x: torch.cumsum(x, 0, dtype=torch.float64), (3, 4), name="dtype")
pack.case("aten::cumprod", lambda x: torch.cumprod(x, 1), _X, name="float")
pack.case("aten::cumprod", lambda x: torch.cumprod(x, 0), _ints(4, 3), name="int32")
pack.case("aten::diff", lambda x: torch.diff(x), _X, name="last")
pack.case("aten::diff", lambda x: torch.diff(x, n=2, dim=0), (4, 3), name="twice")
pack.case("aten::diff", lambda x: torch.diff(x, prepend=x[:, :1] - 1, dim=-1),
          _ints(2, 5), name="prepend")  # transformers' packed-sequence detection
pack.case("aten::diff", lambda x, y: torch.diff(x, dim=1, append=y), (2, 3), (2, 2),
          name="append")
pack.case("aten::diff", lambda x: torch.diff(x), _bools(2, 4), name="bool")
pack.case("aten::topk", lambda x: torch.topk(x, 2), _X, name="largest")
pack.case("aten::topk", lambda x: torch.topk(x, 3, dim=1, largest=False), _X, name="smallest")
pack.case("aten::topk", lambda x: torch.topk(x, x.size(0), dim=0), (3, 4), name="dynamic_k",
          min_opset=10, input_names=["x"], dynamic_axes={"x": [0]})
pack.case("aten::topk", lambda x: torch.topk(x, 2), lambda: torch.randperm(12).reshape(3, 4),
          name="int", min_opset=11)
pack.case("aten::sort", lambda x: torch.sort(x), _X, name="ascending")
pack.case("aten::sort", lambda x: torch.sort(x, 0, descending=True), (3, 4), name="descending")
pack.case("aten::sort", lambda x: torch.sort(x, stable=True, dim=1), (3, 4), name="stable")
pack.case("aten::argsort", lambda x: torch.argsort(x, 1, descending=True), _X)
pack.case("aten::kthvalue", lambda x: torch.kthvalue(x, 2, 1), _X, name="dim")
pack.case("aten::kthvalue", lambda x: torch.kthvalue(x, 3, keepdim=True), (2, 5), name="keepdim")
pack.case("aten::median", lambda x: torch.median(x), (3, 4), name="all")
pack.case("aten::median", lambda x: torch.median(x, 1), (3, 5), name="dim")
pack.case("aten::median", lambda x: torch.median(x, 0, keepdim=True), (4, 3), name="even")
pack.case("aten::_unique2", lambda x: torch.unique(x), lambda: torch.randint(0, 5, (3, 4)).float(),
          name="values")
pack.case("aten::_unique2",
          lambda x: torch.unique(x, return_inverse=True, return_counts=True),
          _ints(3, 4, dtype=torch.int64), name="inverse_counts")
pack.case("aten::_unique2", lambda x: torch.unique(x), _ints(6, dtype=torch.int32), name="int32")
pack.case("aten::unique_dim", lambda x: torch.unique(x, dim=0, return_counts=True),
          lambda: torch.tensor([[1, 2], [0, 5], [1, 2], [0, 1]]))


def _expert_ids() -> torch.Tensor:
    """Sorted expert ids as a float tensor, as transformers' MoE layers feed histc."""
    return torch.randint(0, 4, (12,)).sort().values.float()


pack.case("aten::histc", lambda x: torch.histc(x, bins=5, min=-1, max=1.5), (4, 6),
          name="range_with_outliers")
pack.case("aten::histc", lambda x: torch.histc(x, bins=7), (20,), name="data_range")
pack.case("aten::histc", lambda x: torch.histc(x, bins=3), lambda: torch.full((4,), 2.0),
          name="constant_data")
pack.case("aten::histc", lambda x: torch.histc(x, bins=4, min=0, max=3), _expert_ids,
          name="expert_counts")

pack.case("aten::sum", lambda x: x.sum(0) + x.sum(-1, keepdim=True), scalar, name="0d")
pack.case("aten::mean", lambda x: x.mean(-1), scalar, name="0d")
pack.case("aten::prod", lambda x: x.prod(0), scalar, name="0d")
pack.case("aten::amax", lambda x: x.amax(0), scalar, name="0d")
pack.case("aten::max", lambda x: x.max(0), scalar, name="0d")
pack.case("aten::argmax", lambda x: x.argmax(-1), scalar, name="0d")
pack.case("aten::var_mean", lambda x: torch.var_mean(x, 0, correction=0), scalar, name="0d")
pack.case("aten::logsumexp", lambda x: x.logsumexp(0), scalar, name="0d")
pack.case("aten::cumsum", lambda x: x.cumsum(0), scalar, name="0d")
pack.case("aten::topk", lambda x: x.topk(1, 0), scalar, name="0d")
pack.case("aten::sort", lambda x: torch.sort(x, -1), scalar, name="0d")
pack.case("aten::aminmax", lambda x: torch.aminmax(x), _X)
pack.case("aten::aminmax", lambda x: torch.aminmax(x, dim=1, keepdim=True), _X, name="dim")
pack.case("aten::aminmax", lambda x: torch.aminmax(x, dim=-1), lambda: torch.randint(0, 9, (3, 4)),
          name="ints")
pack.case("aten::_unique", lambda x: torch._unique(x, True, True),
          lambda: torch.randint(0, 5, (3, 4)), input_names=["x"], dynamic_axes={"x": [0, 1]})
pack.case("aten::_unique", lambda x: torch._unique(x)[0] * 2, (6,), name="values_only")
pack.case("aten::any", lambda x: x.any(0), lambda: torch.tensor(True), name="0d")
