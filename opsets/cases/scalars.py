"""Test cases of the ``oxport.scalars`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import math
import warnings
from typing import Optional

import torch

from oxport.opsets.scalars import pack


#: Sizes of inputs fold to constants unless dynamic_axes lets them vary (as in torch.onnx):
#: the cases of symbolics on run-time numbers make both dims of ``x`` dynamic.
DYNAMIC = {"x": {0: "rows", 1: "cols"}}


def _eq(x: torch.Tensor) -> torch.Tensor:
    return x * int(x.size(0) == 2)


def _ne(x: torch.Tensor) -> torch.Tensor:
    return x * int(x.size(0) != 2)


def _lt(x: torch.Tensor) -> torch.Tensor:
    return x * int(x.size(0) < x.size(1))


def _gt(x: torch.Tensor) -> torch.Tensor:
    return x * int(x.size(0) > x.size(1))


def _le(x: torch.Tensor) -> torch.Tensor:
    return x * int(x.size(0) <= 2)


def _ge(x: torch.Tensor) -> torch.Tensor:
    return x * int(x.size(1) >= 4)


def _add(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.size(1) + 3, -1)


def _sub(x: torch.Tensor) -> torch.Tensor:
    return x * (x.size(1) - x.size(0))


def _mul(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.size(0) * x.size(1))


def _div(x: torch.Tensor) -> torch.Tensor:
    return x * (x.size(1) / x.size(0))


def _floordiv(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.size(1) // 2, -1)


def _remainder(x: torch.Tensor) -> torch.Tensor:
    return x * (x.size(1) % x.size(0))


def _ceil(x: torch.Tensor) -> torch.Tensor:
    return x * math.ceil(x.size(0) / 3)


def _floor(x: torch.Tensor) -> torch.Tensor:
    return x * math.floor(x.size(0) / 3)


def _neg(x: torch.Tensor) -> torch.Tensor:
    return x * -x.size(0)


def _min(x: torch.Tensor) -> torch.Tensor:
    return x * min(x.size(0), x.size(1))


def _max(x: torch.Tensor) -> torch.Tensor:
    return x * max(x.size(0), x.size(1))


def _range(x: torch.Tensor) -> torch.Tensor:
    for i in range(1, x.size(0), 2):
        x = x * i
    return x


def _contains(x: torch.Tensor) -> torch.Tensor:
    dims = [1, 2]
    return x * int(x.size(0) in dims) + int(x.dim() in dims)


class _RaisesWithoutRows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(0) > 0:
            y = x + 1
        else:
            raise ValueError("expected rows")
        return y


def _bool(x: torch.Tensor) -> torch.Tensor:
    if bool(x.sum() > 0):
        return x + 1
    return x - 1


def _not_and_or(x: torch.Tensor) -> torch.Tensor:
    big = x.size(0) > 1
    wide = x.size(1) > 5
    return x * int((big & (not wide)) | wide)


def _scalar_implicit(x: torch.Tensor) -> torch.Tensor:
    return torch.full([2], x.sum())


def _item(x: torch.Tensor) -> torch.Tensor:
    return x * x.sum().item()


def _optional_by_rank(x: torch.Tensor) -> torch.Tensor:
    bias: Optional[torch.Tensor] = x * 2 if x.dim() == 2 else None  # known once the rank is
    if bias is not None:
        return x + bias
    return x


def _identity_test(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if x is y:
        return x
    return x - y


def _dtype_device(x: torch.Tensor) -> torch.Tensor:
    rows = x.unsqueeze(0)  # a value scripted code knows no rank of: dim() is converted
    return torch.zeros(3, dtype=x.dtype, device=x.device) + rows.dim()


def _mode(x: torch.Tensor) -> torch.Tensor:
    mode = "double" if x.unsqueeze(0).dim() == 3 else "half"  # known once the rank is
    double = mode == "double"
    other = mode != "half"
    if double and other:
        return x * 2
    return x / 2


def _queries(x: torch.Tensor) -> torch.Tensor:
    flags = [torch.is_grad_enabled(), torch.is_autocast_enabled(), x.requires_grad,
             x.is_nested, x.is_cuda, x.device.type not in ["cpu"]]
    if any(flags):
        return x
    note = "rank " + "{}".format(x.dim())
    return x * len(note)


def _all_dynamic(x: torch.Tensor) -> torch.Tensor:
    return x * int(all([x.size(0) > 1, x.size(1) > 1]))


def _any_ints(x: torch.Tensor) -> torch.Tensor:
    return x * int(any([x.size(0) - 2, 0])) + int(all([x.size(1), 1]))


def _optional_at_run_time(x: torch.Tensor) -> torch.Tensor:
    best: Optional[torch.Tensor] = None
    for i in range(x.size(0)):
        if best is None or bool(x[i].sum() > best.sum()):
            best = x[i]
    if best is not None:
        return best
    return x.sum(0)


def _device_check(x: torch.Tensor) -> torch.Tensor:
    if x.device == torch.device("cpu") and not x.device != torch.device("cpu"):
        return x + 1
    return x


def _warn(x: torch.Tensor) -> torch.Tensor:
    warnings.warn("scripted code may warn")
    return x * 2


pack.case("aten::eq.int", _eq, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::ne.int", _ne, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::lt.int", _lt, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::gt.int", _gt, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::le.int", _le, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::ge.int", _ge, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::add.int", _add, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::sub.int", _sub, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::mul.int", _mul, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::div.int", _div, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::floordiv.int", _floordiv, (2, 4), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::remainder.int", _remainder, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::ceil.float", _ceil, (5, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::floor.float", _floor, (7, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::neg.int", _neg, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("prim::min", _min, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("prim::max", _max, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("aten::__contains__.int_list", _contains, (2, 3), script=True, dynamic_axes=DYNAMIC)
pack.case("prim::Uninitialized", _RaisesWithoutRows(), (2, 3), script=True,
          dynamic_axes=DYNAMIC)
pack.case("aten::__range_length", _range, (6, 2), script=True, min_opset=9,
          dynamic_axes=DYNAMIC)
pack.case("aten::__derive_index", _range, (6, 2), script=True, min_opset=9,
          dynamic_axes=DYNAMIC)
pack.case("aten::Bool", _bool, (2, 3), script=True, min_opset=9)
pack.case("aten::__not__", _not_and_or, (2, 3), script=True, min_opset=9,
          dynamic_axes=DYNAMIC)
pack.case("aten::__and__.bool", _not_and_or, (2, 3), script=True, min_opset=9,
          dynamic_axes=DYNAMIC)
pack.case("aten::__or__.bool", _not_and_or, (2, 3), script=True, min_opset=9,
          dynamic_axes=DYNAMIC)
pack.case("aten::ScalarImplicit", _scalar_implicit, (2, 3), script=True, min_opset=8)
pack.case("aten::item", _item, (2, 3), script=True)
pack.case("prim::unchecked_cast", _optional_by_rank, (2, 3), script=True)
pack.case("aten::__isnot__", _optional_by_rank, (2, 3), script=True)
pack.case("aten::__is__", _identity_test, (2, 3), (2, 3), script=True)
pack.case(["aten::__is__", "aten::__isnot__", "prim::unchecked_cast"], _optional_at_run_time,
          (3, 2), name="optional", script=True, min_opset=16)
pack.case("prim::dtype", _dtype_device, (3,), script=True)
pack.case("prim::device", _dtype_device, (3,), script=True)
pack.case("aten::dim", _dtype_device, (3,), script=True)
pack.case("aten::warn", _warn, (2, 3), script=True)
for _op in ("aten::is_grad_enabled", "aten::is_autocast_enabled", "prim::requires_grad",
            "prim::is_nested", "prim::is_cuda", "prim::type", "aten::format", "aten::add.str",
            "aten::__contains__.str_list", "aten::any.bool"):
    pack.case(_op, _queries, (2, 3), script=True)
pack.case("aten::all.bool", _all_dynamic, (2, 3), script=True)
pack.case("aten::any.int", _any_ints, (2, 3), script=True)
pack.case("aten::all.int", _any_ints, (2, 3), script=True)
pack.case("aten::eq.str", _mode, (2, 3), script=True, min_opset=9)
pack.case("aten::ne.str", _mode, (2, 3), script=True, min_opset=9)
pack.case("aten::eq.device", _device_check, (2, 3), script=True)
pack.case("aten::ne.device", _device_check, (2, 3), script=True)


def _int_implicit(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    return x.view(-1, n)


pack.case("aten::IntImplicit", _int_implicit, (2, 6), lambda: torch.tensor(3), script=True)
