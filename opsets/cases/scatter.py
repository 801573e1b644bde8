"""Test cases of the ``oxport.scatter`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.scatter import pack


def _long(*data):
    return lambda: torch.tensor(data)


def _mask(*shape):
    return lambda: torch.rand(*shape) > 0.5


class InPlaceIndexedAssignment(torch.nn.Module):
    """The seed's FAQ example."""

    def forward(self, data: torch.Tensor, new_data: torch.Tensor) -> torch.Tensor:
        data[1] = new_data
        return data


def _put(x, i, v):
    x[i] = v
    return x


def _put2(x, i, j, v):
    x[i, j] = v
    return x


def _put_apart(x, i, j, v):
    x[i, :, j] = v
    return x


def _put_slice_broadcast(x, i, v):
    x = x.clone()
    x[i, 1:3] = v
    return x


def _put_mask(x, m):
    x[m] = 0.5
    return x


def _add_mask(x, m):
    x[m] += 2.0
    return x


def _copy_rows(x, v):
    x = x.clone()
    x[:, 1:3] = v
    x[0, ::2] = 7.0
    return x * 2


def _inc_columns(x, i):
    x = x.clone()
    x[:, i] += 1
    return x


DYN = {"x": [0, 1]}
pack.case("aten::copy_", InPlaceIndexedAssignment(), (3, 4), (4,), name="seed", min_opset=11)
pack.case("aten::copy_", _copy_rows, (3, 4), (3, 1), name="slices", min_opset=11,
          input_names=["x", "v"], dynamic_axes={"x": [0], "v": [0]})
pack.case("aten::copy_", lambda x, y: x.copy_(y) * 1, (2, 3), (3,), name="whole")
pack.case("aten::set_", lambda x, y: x.set_(y), (2, 3), (4, 6))
pack.case("aten::set_", lambda x, y: x.set_(y) + x, (2, 3), (5, 2), name="read_after",
          input_names=["x", "y"], dynamic_axes={"x": [0, 1], "y": [0, 1]})
pack.case("aten::index_put", lambda x, i, v: x.index_put((i,), v), (4, 3), _long(0, 2), (3,),
          min_opset=11)
pack.case("aten::index_put", lambda x, i, v: x.index_put((i,), v, accumulate=True), (4, 3),
          _long(0, 2, 0), (3, 3), name="accumulate", min_opset=11)
pack.case("aten::index_put", lambda x, i, j, v: x.index_put((i, j), v, accumulate=True),
          (4, 3, 2), _long(0, 2, 0, 0), _long(1, 1, 1, 2), (4, 2), name="accumulate_rank2",
          min_opset=11, input_names=["x", "i", "j", "v"],
          dynamic_axes={"x": [0], "i": [0], "j": [0], "v": [0]})
pack.case("aten::index_put", lambda x, m: x.index_put((m,), torch.tensor(0.5)), (3, 4),
          _mask(3, 4), name="mask")
pack.case("aten::index_put_", _put, (4, 3), _long(-1, 1), (2, 3), min_opset=11,
          input_names=["x", "i", "v"], dynamic_axes={"x": [0, 1], "i": [0], "v": [0, 1]})
pack.case("aten::index_put_", _put2, (4, 5), _long([1, 2], [2, 3]), _long(2, 3), (2, 2),
          name="seed_rank2", min_opset=11)
pack.case("aten::index_put_", _put2, (4, 5), _long(1, -2), _long(-2, 3), (1,),
          name="seed_negative", min_opset=11)
pack.case("aten::index_put_", _put_apart, (4, 3, 5), _long(2, 3), _long(1, 2), (3,),
          name="seed_apart", min_opset=11)
pack.case("aten::index_put_", _put_slice_broadcast, (3, 4, 5), _long([0, 2], [1, 1]), (5,),
          name="seed_broadcast", min_opset=11)
pack.case("aten::index_put_", _inc_columns, (3, 4), _long(0, 2), name="slice_view", min_opset=11)
pack.case("aten::index_put_", _put_mask, (3, 4), _mask(3, 4), name="mask")
pack.case("aten::index_put_", _add_mask, (3, 4), _mask(3), name="mask_add", min_opset=11)
pack.case("aten::index_copy", lambda x, i, s: x.index_copy(1, i, s), (3, 4), _long(3, 0),
          (3, 2))
pack.case("aten::index_copy_", lambda x, i, s: x.index_copy_(0, i, s), (3, 4),
          _long(2), (1, 4))
pack.case("aten::index_fill", lambda x, i: x.index_fill(1, i, -1.0), (3, 4), _long(3, 0),
          input_names=["x", "i"], dynamic_axes={"x": [0, 1], "i": [0]})
pack.case("aten::index_fill_", lambda x, i: x.index_fill_(0, i, torch.tensor(2.0)),
          (3, 4), _long(1))
pack.case("aten::scatter", lambda x, i, s: x.scatter(1, i, s), (3, 4), _long([0, 3], [1, 2]),
          (2, 2))
pack.case("aten::scatter", lambda x, i, s: x.scatter(1, i, s), (3, 4), _long([0, 3], [1, 2]),
          (2, 3), name="src_larger", min_opset=10)
pack.case("aten::scatter", lambda x, i: x.scatter(0, i, 1.5), (3, 4), _long([0, 2, 1, 0]),
          name="value")
pack.case("aten::scatter", lambda x, i, s: x.scatter(1, i, s, reduce="add"), (3, 4),
          _long([0, 0], [1, 2]), (2, 2), name="reduce_add", min_opset=16)
pack.case("aten::scatter_", lambda x, i, s: x.scatter_(0, i, s, reduce="multiply"),
          (3, 4), _long([0, 2, 1, 0]), (1, 4), min_opset=16)
pack.case("aten::scatter_", lambda x, i: x.scatter_(1, i, -2.0), (3, 4), _long([1], [2]),
          name="value")
pack.case("aten::scatter_add", lambda x, i, s: x.scatter_add(1, i, s), (3, 4),
          _long([0, 0, 3], [1, 1, 1]), (2, 3))
pack.case("aten::scatter_add_", lambda x, i, s: x.scatter_add_(0, i, s), (3, 2),
          _long([0, 0], [2, 0]), (2, 2))
pack.case("aten::scatter_add", lambda x, i, s: x.scatter_add(0, i, s), (4, 3),
          _long([0, 1, 0], [0, 0, 3], [0, 0, 3]), (3, 3), name="repeated_dynamic",
          input_names=["x", "i", "s"], dynamic_axes={"x": [0], "i": [0], "s": [0]})
pack.case("aten::scatter_add", lambda x, i, s: x.scatter_add(1, i, s),
          _long([1, 2, 3], [4, 5, 6]), _long([2, 2], [0, 2]), _long([7, 8, 1], [9, 10, 1]),
          name="int64_src_larger", min_opset=10)


def _scatter_add_rows(x: torch.Tensor, i: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return x.scatter_add(0, i, s)


# Scripted with dynamic axes, src's and index's sizes are unknown: src is cut at run time.
pack.case("aten::scatter_add", _scatter_add_rows, (3, 5), _long([0, 1, 2, 0], [1, 0, 2, 1]),
          (3, 5), name="src_larger_dynamic", script=True, min_opset=10,
          input_names=["x", "i", "s"], dynamic_axes={"i": [0, 1], "s": [0, 1]})
pack.case("aten::scatter_add", lambda x, i, s: x.scatter_add(0, i, s), _mask(3, 2),
          _long([0, 0], [2, 0]), _mask(2, 2), name="bool")
pack.case("aten::scatter_reduce", lambda x, i, s: x.scatter_reduce(0, i, s, "sum"), (3,),
          _long(0, 0, 2, 1), (4,))
pack.case("aten::scatter_reduce", lambda x, i, s: x.scatter_reduce(1, i, s, "amax"), (2, 3),
          _long([0, 0], [2, 1]), (2, 2), name="amax")
pack.case("aten::scatter_reduce", lambda x, i, s: x.scatter_reduce(0, i, s, "amin"), (4, 3),
          _long([0, 1, 3], [0, 0, 3]), (3, 3), name="amin_src_larger",
          input_names=["x", "i", "s"], dynamic_axes={"x": [0]})
pack.case("aten::scatter_reduce_", lambda x, i, s: x.scatter_reduce_(0, i, s, "prod"),
          (3,), _long(0, 0, 2), (3,))
for _mode in ("sum", "prod", "mean", "amax", "amin"):
    pack.case("aten::scatter_reduce",
              lambda x, i, s, m=_mode: x.scatter_reduce(1, i, s, m, include_self=False),
              (2, 4), _long([0, 0, 2], [3, 1, 3]), (2, 3), name=f"{_mode}_without_self")
pack.case("aten::scatter_reduce", lambda x, i, s: x.scatter_reduce(0, i, s, "mean"), (4,),
          _long(0, 0, 2, 0), (4,), name="mean")
for _mode in ("sum", "amax"):  # 0-d operands (amax by one-hot rows before opset 18)
    pack.case("aten::scatter_reduce",
              lambda x, i, s, m=_mode: x.scatter_reduce(0, i, s, m), lambda: torch.tensor(1.5),
              lambda: torch.tensor(0), lambda: torch.tensor(-2.0), name=f"{_mode}_0d")
pack.case("aten::scatter_reduce",
          lambda x, i, s: x.scatter_reduce(0, i, s, "mean", include_self=False),
          _long(5, -7, 3), _long(0, 0, 1, 1), _long(-4, 1, 2, 4), name="mean_int_floors")
pack.case("aten::masked_fill", lambda x, m: x.masked_fill(m, -1), (3, 4), _mask(4),
          input_names=["x", "m"], dynamic_axes={"x": [0], })
pack.case("aten::masked_fill", lambda x, m: x.masked_fill(m, torch.tensor(True)),
          _mask(3, 4), _mask(3, 4), name="bool")
pack.case("aten::masked_fill_", lambda x, m: x.masked_fill_(m, torch.tensor(2.0)),
          (3, 4), _mask(3, 1))
pack.case("aten::masked_scatter", lambda x, m, s: x.masked_scatter(m, s), (3, 4), _mask(3, 4),
          (20,))
pack.case("aten::masked_scatter_", lambda x, m, s: x.masked_scatter_(m, s), (3, 4),
          _mask(4), (3, 4))
pack.case("aten::index_add", lambda x, i, s: x.index_add(1, i, s), (3, 4), _long(3, 0, 3),
          (3, 3), input_names=["x", "i", "s"], dynamic_axes={"x": [0], "s": [0]})
pack.case("aten::index_add", lambda x, i, s: x.index_add(0, i, s, alpha=-2), (3, 4),
          _long(1, 1), (2, 4), name="alpha")
pack.case("aten::index_add", lambda x, i, s: x.index_add(1, i, s), (3, 4),
          lambda: torch.tensor([2, 0, 2], dtype=torch.int32), (3, 3), name="int32_index")
pack.case("aten::index_add", lambda x, i, s: x.index_add(0, i, s, alpha=2),
          lambda: torch.tensor(1.5), _long(0), lambda: torch.tensor(-0.5), name="scalar")


# torch.export's functional forms of writes into views.
pack.case("aten::copy", lambda x, y: torch.ops.aten.copy(x, y), (2, 3), (3,))
pack.case("aten::slice_scatter", lambda x, y: torch.slice_scatter(x, y, 1, 1, 5, 2), (2, 6),
          (2, 2))
pack.case("aten::slice_scatter", lambda x, y: torch.slice_scatter(x, y), (4, 3), (4, 3),
          name="whole")
pack.case("aten::select_scatter", lambda x, y: torch.select_scatter(x, y, 0, -1), (3, 4), (4,))


def _index_add_(x: torch.Tensor, i: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    x.index_add_(0, i, s)
    return x * 2


# Tracing records index_add_ as index_add; scripted code writing into an input keeps it.
pack.case("aten::index_add_", _index_add_, (3, 4), _long(2, 2), (2, 4), script=True)


_BINS = torch.tensor([1, 2, 2, 5, 0, 2])
pack.case("aten::bincount", lambda x: torch.bincount(x), _BINS, name="counts")
pack.case("aten::bincount", lambda x, w: torch.bincount(x, w, minlength=9), _BINS, (6,),
          name="weights_minlength")
pack.case("aten::bincount", lambda x, w: torch.bincount(x, w, minlength=2), _BINS,
          torch.tensor([1, 2, 3, 4, 5, 6]), name="int_weights_minlength_short")
pack.case("aten::bincount", lambda x: torch.bincount(x, minlength=3),
          torch.tensor([], dtype=torch.int64), name="empty")
pack.case("aten::bincount", lambda x: torch.bincount(x), torch.tensor([3, 0, 3], dtype=torch.int32),
          name="int32")
