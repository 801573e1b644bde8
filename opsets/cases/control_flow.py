"""Test cases of the ``oxport.control_flow`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import warnings
from typing import Optional

import torch

from oxport.opsets.cases.scalars import DYNAMIC
from oxport.opsets.control_flow import pack


def _if_sign(x: torch.Tensor) -> torch.Tensor:
    if bool(x.sum() > 0):
        y = x * 2
    else:
        y = x - 1
    return y


def _if_raises(x: torch.Tensor) -> torch.Tensor:
    if x.size(0) == 0:
        raise ValueError("expected rows")
    return x + 1


def _if_list(x: torch.Tensor) -> torch.Tensor:
    parts = [x]
    if bool(x.sum() > 0):
        parts.append(x * 2)
    return torch.cat(parts, 0)


def _for_loop(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    for i in range(int(n)):
        x = x + i
    return x


def _while_loop(x: torch.Tensor) -> torch.Tensor:
    steps = 0
    while bool(x.sum() < 20.0) and steps < 100:
        x = x + 1.5
        steps += 1
    return x * steps


def _scan_loop(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    rows: list[torch.Tensor] = []
    for i in range(int(n)):
        rows.append(x * i)
    return torch.stack(rows)


def _sequence_loop(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    rows = [x]
    for i in range(int(n)):
        rows.append(rows[-1] + i)
    return torch.cat(rows, 0)


def _if_optional(x: torch.Tensor) -> torch.Tensor:
    y: Optional[torch.Tensor] = None
    if bool(x.sum() > 0):
        y = x * 2
    if y is None:
        return x - 1
    return y


def _loop_optional(x: torch.Tensor) -> torch.Tensor:
    total: Optional[torch.Tensor] = None
    for i in range(x.size(0)):
        if total is None:
            total = x[i]
        else:
            total = total * x[i]
    assert total is not None
    return total


def _if_message(x: torch.Tensor) -> torch.Tensor:
    if bool(x.sum() > 0):
        message = "positive"
    else:
        message = "not positive"
    warnings.warn(message)  # a str chosen at run time, only warned about
    return x + 1


def _count(value: int):
    return lambda: torch.tensor(value)


pack.case("prim::If", _if_sign, (2, 3), script=True, min_opset=9)
pack.case("prim::If", _if_raises, (2, 3), name="raise_branch", script=True, dynamic_axes=DYNAMIC)
pack.case("prim::If", _if_list, (2, 3), name="list_output", script=True, min_opset=13)
pack.case("prim::If", _if_message, (2, 3), name="message", script=True, min_opset=9)
pack.case("prim::If", _if_optional, lambda: torch.ones(2, 3), name="optional", script=True,
          min_opset=16)
pack.case("prim::If", _if_optional, lambda: -torch.ones(2, 3), name="optional_empty",
          script=True, min_opset=16)
pack.case("prim::Loop", _for_loop, lambda: torch.ones(2, 3, dtype=torch.long), _count(5),
          script=True)
pack.case("prim::Loop", _while_loop, (2, 3), name="while", script=True)
pack.case("prim::Loop", _scan_loop, (2, 3), _count(4), name="scan", script=True, min_opset=11)
pack.case("prim::Loop", _loop_optional, (3, 2), name="optional", script=True, min_opset=16)
pack.case("prim::Loop", _sequence_loop, (2, 3), _count(3), name="sequence", script=True,
          min_opset=13)


# torch.export's higher-order scan and map (torch.jit.trace cannot record them).
_EXPORT_ONLY = "a torch.export higher-order op"


class _CumulativeScan(torch.nn.Module):
    """A running sum scaled by a weight the combine function reads from outside, and a
    second output stacked per step."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3))

    def forward(self, init: torch.Tensor, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from torch._higher_order_ops.scan import scan

        def combine(carry: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            total = carry + x * self.weight
            return total, total.relu()

        return scan(combine, init, xs)


def _reverse_scan(init: torch.Tensor, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from torch._higher_order_ops.scan import scan

    def combine(carry: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return carry * x, carry + x

    return scan(combine, init, xs, dim=1, reverse=True)


def _map(xs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    from torch._higher_order_ops.map import map as map_over

    return map_over(lambda x, y: (x @ y).tanh(), xs, y)


pack.case("higher_order::scan", _CumulativeScan, (3,), (4, 3),
          not_traceable=_EXPORT_ONLY)
pack.case("higher_order::scan", _reverse_scan, (2,), (2, 5),
          name="reverse_dim", min_opset=10, not_traceable=_EXPORT_ONLY)  # aten::flip
pack.case("higher_order::scan", _CumulativeScan, (3,), (4, 3),
          name="dynamic", input_names=["init", "xs"], dynamic_axes={"xs": {0: "steps"}},
          not_traceable=_EXPORT_ONLY)
pack.case("higher_order::map_impl", _map, (4, 2, 3), (3, 2),
          not_traceable=_EXPORT_ONLY)
pack.case("higher_order::map_impl", _map, (4, 2, 3), (3, 2),
          name="dynamic", input_names=["xs", "y"], dynamic_axes={"xs": {0: "items"}},
          not_traceable=_EXPORT_ONLY)
