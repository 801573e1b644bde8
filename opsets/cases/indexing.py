"""Test cases of the ``oxport.indexing`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.indexing import pack


def _long(*data):
    return lambda: torch.tensor(data)


def _mask(*shape):
    return lambda: torch.rand(*shape) > 0.5


def _parts_of_grown_list(x: torch.Tensor) -> torch.Tensor:
    rows = [x]
    for i in range(x.size(0)):
        rows.append(x * i)
    return rows[1][:, 1] + rows[2][:, 1:].sum(1)  # (items of a Sequence: rank unknown)


DYN = {"x": [0, 1]}
pack.case(["aten::select", "aten::slice"], _parts_of_grown_list, (3, 4), name="unknown_rank",
          script=True, min_opset=13, input_names=["x"], dynamic_axes=DYN)
pack.case("aten::select", lambda x: x[1] + x[:, -1].sum(), (3, 4), input_names=["x"],
          dynamic_axes=DYN)
pack.case("aten::slice", lambda x: x[1:, -3:-1], (3, 4, 5))
pack.case("aten::slice", lambda x: x[::2, 1::3], (3, 5), name="step", min_opset=10)
pack.case("aten::slice", lambda x: x[:, x.size(1) - 2:], (3, 4), name="dynamic", min_opset=10,
          input_names=["x"], dynamic_axes=DYN)
pack.case("aten::slice", lambda x, e, s: x[:e:s, 1::s] * 2, (7, 5), _long(5), _long(2),
          name="step_at_run_time", min_opset=10, input_names=["x", "e", "s"])


def _write_strided_at_run_time(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    x[::s, 1:] = 1.0
    return x


pack.case("aten::slice", _write_strided_at_run_time, (7, 5), _long(3),
          name="write_step_at_run_time", min_opset=11, input_names=["x", "s"])


def _complex(*shape: int):
    return lambda: torch.randn(*shape, dtype=torch.complex64)


def _rotate_by_complex_slice(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Llama 4's rotary embedding: complex rotations sliced and unsqueezed, then applied."""
    rotations = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * rotations[:, :, None, :]).flatten(3)


pack.case("aten::slice", lambda z: torch.view_as_real(z[1:, -2:] * z[:2, :-1:2][:, :1]),
          _complex(3, 4), name="complex", min_opset=10)
pack.case("aten::slice", _rotate_by_complex_slice, (2, 3, 4, 8), (2, 3, 4),
          name="complex_rotary", min_opset=17)
pack.case("aten::narrow", lambda x: x.narrow(1, 1, 2) + x.narrow(1, -2, 2), (3, 4))


def _narrow_by_size(x: torch.Tensor) -> torch.Tensor:
    return torch.narrow(x, 0, 0, x.shape[0] - 1)  # scripted: size arithmetic folds to an int


pack.case("aten::narrow", _narrow_by_size, (3, 3), name="length_from_size", script=True)
pack.case("aten::index", lambda x, i: x[i], (4, 3), _long(0, 2, 3))
pack.case("aten::index", lambda x, i: x[:, i], (4, 3), _long(-1, 0), name="negative")
pack.case("aten::index", lambda x, i, j: x[i, j], (4, 5), _long([1, 2], [2, -3]), _long(-2, 3),
          name="seed_negative")
pack.case("aten::index", lambda x, i, j: x[:, i, j], (2, 4, 5), _long(1, 2), _long(0, 4),
          name="adjacent")
pack.case("aten::index", lambda x, i, j: x[i, :, j], (4, 2, 5), _long([1], [3]), _long(0, 4),
          name="apart")
pack.case("aten::index", lambda x, m: x[m], (3, 4), _mask(3, 4), name="mask")
pack.case("aten::index", lambda x, m: x[:, m], (2, 3, 4), _mask(3), name="mask_dim1")
pack.case("aten::index", lambda x, m, i: x[m, i], (3, 4), _mask(3), _long(1), name="mask_and_int")
pack.case("aten::index", lambda x, i: x[None, ..., i], (3, 4), _long(1, 1), name="none_ellipsis")
pack.case("aten::index_select", lambda x, i: x.index_select(1, i), (3, 4), _long(3, 0, 3))
pack.case("aten::gather", lambda x, i: x.gather(1, i), (3, 4), _long([0, 3], [1, 1], [2, 0]))
pack.case("aten::masked_select", lambda x, m: x.masked_select(m), (3, 4), _mask(4))
pack.case("aten::nonzero", lambda x: x.nonzero(), _mask(3, 4))
pack.case("aten::nonzero_numpy", lambda x: x.nonzero(as_tuple=True), _mask(3, 4))
pack.case("aten::where", lambda x: torch.where(x)[1], _mask(2, 3, 4))
pack.case("aten::gather", lambda x, i: x.gather(0, i), (3, 4), _long([2, 0, 1, 1], [0, 0, 2, 1]),
          name="dim0_ints_later", min_opset=9)
pack.case("aten::take", lambda x, i: torch.take(x, i), (3, 4), _long([[0, 11], [-1, 5]]),
          input_names=["x", "i"], dynamic_axes={"x": [0, 1], "i": [0, 1]})
pack.case("aten::one_hot", lambda i: torch.nn.functional.one_hot(i, 5), _long([[0, 4], [2, 2]]))
pack.case("aten::one_hot", lambda i: torch.nn.functional.one_hot(i), _long(3, 0, 1),
          name="classes_from_data")


def _one_hot_classes_at_run_time(i: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(i, int(n.to(torch.int32)[0]))


for _script in (False, True):
    pack.case("aten::one_hot", _one_hot_classes_at_run_time, _long(3, 0, 1),
              lambda: torch.tensor([6.0]), name=f"classes_at_run_time{'_script' * _script}",
              input_names=["i", "n"], script=_script)
pack.case("aten::bucketize", lambda x, b: torch.bucketize(x, b), (2, 5),
          lambda: torch.tensor([-1.0, 0.0, 0.5, 1.0]), input_names=["x", "b"],
          dynamic_axes={"x": [0, 1], "b": [0]})
pack.case("aten::bucketize", lambda x, b: torch.bucketize(x, b, out_int32=True, right=True),
          _long([1, 2, 3, 4]), _long(1, 3), name="right_int32")
