"""Test cases of the ``oxport.prim`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

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


pack.case("aten::Int", _int_of, (4, 3), script=True)
pack.case("aten::Float", _float_scale, (2, 3), script=True)
