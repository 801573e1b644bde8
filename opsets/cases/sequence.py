"""Test cases of the ``oxport.sequence`` pack (imported by the op-test runner only)."""

from __future__ import annotations

from typing import List, Tuple

import torch

from oxport.opsets.cases.scalars import DYNAMIC
from oxport.opsets.sequence import pack


# (TorchScript's own passes turn appends to a fresh list in straight-line code into one
# bigger list, so these cases mutate lists inside loops or branches.)
def _append(x: torch.Tensor) -> torch.Tensor:
    rows = [x]
    for i in range(x.size(0)):
        rows.append(rows[i] + 1)
    return torch.cat(rows, 0)


def _append_numbers(x: torch.Tensor) -> torch.Tensor:
    sizes: list[int] = []
    for d in x.size():
        sizes.append(d * 2)
    return x.new_zeros(sizes) + x.sum()


def _append_branch(x: torch.Tensor) -> torch.Tensor:
    rows = [x]
    if x.size(0) > 1:
        rows.append(x * 2)
    return torch.stack(rows)


def _getitem(x: torch.Tensor) -> torch.Tensor:
    rows = [x, x * 2, x * 3]
    return rows[1] + rows[x.size(0) - 3]


def _len(x: torch.Tensor) -> torch.Tensor:
    return x * len(x.split(1, 1))


def _len_tensor(x: torch.Tensor) -> torch.Tensor:
    return x * len(x)


def _set_item(x: torch.Tensor) -> torch.Tensor:
    rows = [x, x]
    rows[x.size(0) - 2] = x * 3
    return rows[0] - rows[1]


def _insert(x: torch.Tensor) -> torch.Tensor:
    rows = [x]
    for i in range(x.size(0)):
        rows.insert(0, x + i)
    return torch.stack(rows)


def _insert_numbers(x: torch.Tensor) -> torch.Tensor:
    dims: list[int] = []
    for d in x.size():
        dims.insert(0, d)
    return x.reshape(dims) * 2


def _pop(x: torch.Tensor) -> torch.Tensor:
    rows = [x, x * 2, x * 3]
    last = rows.pop()
    return last + torch.stack(rows).sum(0)


def _delete(x: torch.Tensor) -> torch.Tensor:
    rows = [x, x * 2, x * 3]
    del rows[1]
    return torch.stack(rows)


def _delete_numbers(x: torch.Tensor) -> torch.Tensor:
    sizes = [x.size(1), 5, x.size(0)]
    del sizes[-2]
    return x.reshape(sizes)


def _delete_grown(x: torch.Tensor) -> torch.Tensor:
    rows: List[torch.Tensor] = []
    for i in range(x.size(0)):
        rows.append(x[i] * i)
    del rows[0]
    return torch.stack(rows)


def _list_concat(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([x] + [x * 2])


def _extend_in_place(x: torch.Tensor) -> torch.Tensor:
    rows: List[torch.Tensor] = []
    for i in range(x.size(0)):
        rows += [x[i] * i, x[i] + i]
    return torch.stack(rows)


def _extend(x: torch.Tensor) -> torch.Tensor:
    rows: List[torch.Tensor] = []
    for i in range(x.size(0)):
        rows.extend([x[i] - i])
    return torch.stack(rows)


def _list_concat_grown(x: torch.Tensor) -> torch.Tensor:
    evens: List[torch.Tensor] = []
    odds: List[torch.Tensor] = []
    for i in range(x.size(0)):
        evens.append(x[i] * 2)
        odds.append(x[i] * 2 + 1)
    return torch.stack([x[0]] + evens + odds + [x[1]])


def _list_slice(x: torch.Tensor) -> torch.Tensor:
    rows = [x, x * 2, x * 3]
    return torch.stack(rows[1:])


def _list_slice_grown(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows: List[torch.Tensor] = []
    for i in range(x.size(0)):
        rows.append(x[i] * i)
    return (torch.stack(rows[1:]), torch.stack(rows[-3:x.size(0) - 1]),
            torch.stack(rows[::-2]))


def _len_str(x: torch.Tensor) -> torch.Tensor:
    mode = "matrix" if x.unsqueeze(0).dim() == 3 else "other"  # known once the rank is
    return x * len(mode)


def _list_copy(x: torch.Tensor) -> torch.Tensor:
    rows = list([x, x + 1])
    return torch.stack(rows)


pack.case("aten::append.t", _append, (2, 3), script=True, min_opset=13)
pack.case("aten::append.t", _append_numbers, (2, 3), name="numbers", script=True, min_opset=9,
          dynamic_axes=DYNAMIC)  # (static sizes would fold the loop away)
pack.case("aten::append.t", _append_branch, (2, 3), name="branch", script=True, min_opset=13,
          dynamic_axes=DYNAMIC)
pack.case("aten::__getitem__.t", _getitem, (3, 2), script=True, min_opset=11)
pack.case("aten::len.t", _len, (2, 3), script=True)
pack.case("aten::len.Tensor", _len_tensor, (2, 3), script=True)
pack.case("aten::len.str", _len_str, (2, 3), script=True)
pack.case("aten::_set_item.t", _set_item, (2, 3), script=True, min_opset=11,
          dynamic_axes=DYNAMIC)
pack.case("aten::insert.t", _insert, (2, 3), script=True, min_opset=13)
pack.case("aten::insert.t", _insert_numbers, (2, 3, 4), name="numbers", script=True,
          min_opset=9, dynamic_axes=DYNAMIC)  # (static sizes would fold the loop away)
pack.case("aten::pop.t", _pop, (2, 3), script=True)
pack.case("aten::Delete.t", _delete, (2, 3), script=True)
pack.case("aten::Delete.t", _delete_numbers, (2, 3), name="numbers", script=True, min_opset=9)
pack.case("aten::Delete.t", _delete_grown, (4, 3), name="grown", script=True, min_opset=11)
pack.case("aten::add.t", _list_concat, (2, 3), script=True)
pack.case("aten::add.t", _list_concat_grown, (3, 2), name="grown", script=True, min_opset=13,
          dynamic_axes=DYNAMIC)
pack.case("aten::add_.t", _extend_in_place, (3, 2), script=True, min_opset=13,
          dynamic_axes=DYNAMIC)
pack.case("aten::extend.t", _extend, (3, 2), script=True, min_opset=13, dynamic_axes=DYNAMIC)
pack.case("aten::slice.t", _list_slice, (2, 3), script=True)
pack.case("aten::slice.t", _list_slice_grown, (4, 3), name="grown", script=True, min_opset=13,
          dynamic_axes=DYNAMIC)
pack.case("aten::list.t", _list_copy, (2, 3), script=True)

