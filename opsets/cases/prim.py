"""Test cases of the ``oxport.prim`` pack (imported by the op-test runner only)."""

from __future__ import annotations

from typing import List

import torch

from oxport.opsets.cases.scalars import DYNAMIC
from oxport.opsets.prim import pack


def _unpack_size(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    return x.reshape(cols, rows)


def _float_scale(x: torch.Tensor) -> torch.Tensor:
    return x * float(x.size(0))


pack.case("prim::Constant", lambda x: x * 2 + 1.5, (2, 3))
pack.case("prim::ListConstruct", lambda x: x.reshape([3, -1]), (2, 3), name="const")
pack.case("prim::ListConstruct", lambda x: x.reshape(x.size(1), x.size(0)), (2, 3),
          name="dynamic", input_names=["x"], dynamic_axes={"x": [0, 1]})
pack.case("prim::ListUnpack", _unpack_size, (2, 3), script=True)
pack.case("prim::NumToTensor", lambda x: x * x.size(1), (2, 3), input_names=["x"],
          dynamic_axes={"x": [1]})


def _int_of(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(int(x.size(0) / 2), -1)


def _numbers_of_one_element(x: torch.Tensor) -> torch.Tensor:
    return torch.tensor([float(x), int(x) * 2.0])


pack.case("aten::Int", _int_of, (4, 3), script=True, dynamic_axes=DYNAMIC)
pack.case(["aten::Int", "aten::Float"], _numbers_of_one_element, (1,), name="one_element",
          script=True)
pack.case("aten::Float", _float_scale, (2, 3), script=True, dynamic_axes=DYNAMIC)


def _data(x: torch.Tensor) -> torch.Tensor:
    return x.data * 2


def _layout(x: torch.Tensor) -> torch.Tensor:
    if x.layout == torch.strided:
        return x + 1
    return x


def _is_floating_point(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point() and not y.is_floating_point():
        return x + y
    return x


def _is_pinned(x: torch.Tensor) -> torch.Tensor:
    if x.is_pinned():
        return x + 1
    return x - 1


def _tolist(x: torch.Tensor) -> torch.Tensor:
    values: List[float] = x.tolist()
    return torch.tensor(values) * 2


def _tolist_ints(x: torch.Tensor) -> torch.Tensor:
    sizes: List[int] = x.tolist()
    return torch.zeros(sizes[0], sizes[1])


pack.case("prim::data", _data, (2, 3), script=True)
pack.case("prim::layout", _layout, (2, 3), script=True)
pack.case("aten::is_floating_point", _is_floating_point, (2, 3),
          lambda: torch.tensor([1, 2, 3]), script=True)
pack.case("aten::is_pinned", _is_pinned, (2, 3), script=True)
pack.case("prim::tolist", _tolist, (4,), script=True)
pack.case("prim::tolist", _tolist_ints, lambda: torch.tensor([2, 3]), name="ints", script=True,
          min_opset=9)


def _print(x: torch.Tensor) -> torch.Tensor:
    print("rows:", x.size(0))
    return x + 1


pack.case("prim::Print", _print, (2, 3), script=True)
