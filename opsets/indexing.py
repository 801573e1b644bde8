"""Indexing reads: select, slice, narrow, advanced indexing (``aten::index``),
index_select, gather, masked_select, nonzero.

``select``/``slice``/``narrow`` are views: each records how to write a new value
of the view back into its base (``g.record_view``), so that an in-place op on
the view (``x[1] = v`` traces as ``select`` + ``copy_``) updates the base too.
Negative tensor indices are normalised at run time (unlike ``torch.onnx``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.context import ViewWriter
from oxport.errors import UnsupportedOperatorError
from oxport.ir import Type, Value
from oxport.opsets.shape import (
    INT64_MAX,
    dim_size,
    ints,
    rank_of,
    scalar_int,
    shape_of,
    shape_slice,
    tensor_list,
)
from oxport.opsets.signal import is_complex

pack = OpPack("oxport.indexing", cases="oxport.opsets.cases.indexing")


# -- views and writing back into them ------------------------------------------------
def scatter_along(g, base: Value, axis: int, positions: Value, new: Value,
                  reduction: str | None = None) -> Value:
    """``base`` with ``base[..., positions[i], ...] = new[..., i, ...]`` along ``axis``
    (``reduction="add"``: added to it, from opset 16)."""
    if g.opset < 9:
        raise UnsupportedOperatorError(
            f"Writing in place into a slice or an element of a tensor ({g.original_node.kind()} "
            f"at {g.source or 'unknown'}) needs Scatter: export with opset_version=9 or higher.")
    index = spread_along(g, positions, axis, rank_of("scatter_along", base), new)
    op_type = "ScatterElements" if g.opset >= 11 else "Scatter"
    return g.op(op_type, base, index, sh.cast_to(g, new, base.type().dtype()),
                axis_i=axis, reduction_s=reduction).setType(base.type())


def spread_along(g, positions: Value, axis: int, rank: int, like: Value) -> Value:
    """The 1-D ``positions`` laid along ``axis`` and broadcast to ``like``'s shape (of rank
    ``rank``): ScatterElements' index for writing ``like`` at those positions."""
    spread = [1] * rank
    spread[axis] = -1
    return g.op("Expand", sh._reshape_helper(g, positions, spread), shape_of(g, like))


def normalize_index(g, index: Value, x: Value, axis: int) -> Value:
    """``index`` as int64 with negative entries counted from the end of ``x``'s ``axis``."""
    index = sh.cast_to(g, index, torch.int64)
    if index.is_const and isinstance(index.const, torch.Tensor):
        if bool((index.const >= 0).all()):
            return index
        if bool((index.const < 0).all()):
            return g.op("Add", index, dim_size(g, x, axis)).setType(index.type())
    if g.opset < 9:  # no Where: a run-time index is taken as non-negative
        return index
    negative = g.op("Less", index, g.constant(torch.tensor(0)))
    return g.op("Where", negative, g.op("Add", index, dim_size(g, x, axis)), index).setType(
        index.type())


def _clamp_start(g, start: int | Value, x: Value, axis: int) -> Value | int:
    """A slice start as Python counts it: negative from the end, clamped at 0."""
    if not isinstance(start, Value) and start >= 0:
        return start
    begin = normalize_index(g, scalar_int(g, start), x, axis)
    zero = g.constant(torch.tensor(0))
    return g.op("Where", g.op("Less", begin, zero), zero, begin)


def slice_writer(axis: int, start: int | Value, step: int | Value) -> ViewWriter:
    def write(g, base: Value, new: Value) -> Value:
        one = g.constant(torch.tensor(1))
        offsets = g.op("Range", g.constant(torch.tensor(0)), dim_size(g, new, axis), one)
        if isinstance(step, Value) or step != 1:
            offsets = g.op("Mul", offsets, scalar_int(g, step))
        positions = g.op("Add", offsets, scalar_int(g, _clamp_start(g, start, base, axis)))
        return scatter_along(g, base, axis, positions, new)
    return write


def _whole(g, base: Value, new: Value) -> Value:
    return new


# -- select, slice, narrow ---------------------------------------------------------------
def _axis(self: Value, dim: Value, op: str, pairs: bool = False) -> int:
    """The non-negative axis of a constant ``dim`` (a negative one needs the rank, less the
    pairs' axis of a complex tensor when ``pairs``); declines for a list (its own overloads
    take it)."""
    if self.type().kind() != "TensorType":
        sh._unimplemented(op, f"a {self.type()} input")
    axis = sh._get_const(dim, "i", "dim")
    return axis if axis >= 0 else axis % max(rank_of(op, self) - pairs, 1)


@pack.symbolic("aten::select", since=7)
def select(g, self: Value, dim: Value, index: Value) -> Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)

    ``x[..., i]``: Gather with a 0-d index (negative indices count from the end)."""
    axis = _axis(self, dim, "aten::select")
    position = scalar_int(g, sh._maybe_get_const(index, "i"))
    if g.opset < 11:  # Gather counts negative indices from the end only from opset 11
        position = normalize_index(g, position, self, axis)

    def write(g, base: Value, new: Value) -> Value:
        new = sh._unsqueeze_helper(g, new, [axis])
        return scatter_along(g, base, axis, sh._reshape_helper(g, position, [1]), new)

    g.record_view(write)
    return g.op("Gather", self, position, axis_i=axis)


def _scalar_bound(g, bound: int | Value) -> int | Value:
    """A run-time slice bound as a 0-d int64 (a 1-element tensor index ``x[i:]`` traces as
    a ``[1]`` tensor, which Slice would get as ``[1, 1]``)."""
    if isinstance(bound, Value) and bound.type().dim() != 0:
        return scalar_int(g, bound)
    return bound


@pack.symbolic("aten::slice", since=7, accepts_complex=True)
def slice(g, self: Value, dim: Value | None = None, start: Value | None = None,  # noqa: A001
          end: Value | None = None, step: Value | None = None) -> Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)

    Slice (constant bounds below opset 10; run-time bounds and steps from 10); a complex
    tensor's real pairs are sliced along the same axis (a negative dim counts before the
    pairs' axis)."""
    pairs = is_complex(g, 0, "aten::slice")
    axis = _axis(self, dim, "aten::slice", pairs) if dim is not None else 0
    begin = sh._maybe_get_const(start, "i") if start is not None else 0
    stop = sh._maybe_get_const(end, "i") if end is not None else INT64_MAX
    stride = sh._maybe_get_const(step, "i") if step is not None else 1
    begin = 0 if begin is None else _scalar_bound(g, begin)
    stop = INT64_MAX if stop is None else _scalar_bound(g, stop)
    stride = _scalar_bound(g, stride)
    if isinstance(begin, int) and begin == 0 and isinstance(stop, int) and stop >= INT64_MAX \
            and isinstance(stride, int) and stride == 1:
        g.record_view(_whole)
        return self
    g.record_view(slice_writer(axis, begin, stride))
    return sh._slice_helper(g, self, [axis], [begin], [stop], [stride])


@pack.symbolic("aten::narrow", since=7)
def narrow(g, self: Value, dim: Value, start: Value, length: Value) -> Value:
    """narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)
    narrow.Tensor(Tensor(a) self, int dim, Tensor start, SymInt length) -> Tensor(a)

    ``x.narrow(dim, start, length)``: Slice ``[start, start + length)``."""
    rank = rank_of("aten::narrow", self)
    axis = sh._get_const(dim, "i", "dim") % rank
    begin = sh._maybe_get_const(start, "i")
    count = sh._maybe_get_const(length, "i")
    if isinstance(begin, int) and isinstance(count, int):
        stop = INT64_MAX if begin < 0 and begin + count == 0 else begin + count
    else:
        begin = scalar_int(g, begin)
        stop = g.op("Add", begin, scalar_int(g, count))
    g.record_view(slice_writer(axis, begin, 1))
    return sh._slice_helper(g, self, [axis], [begin], [stop])


# -- advanced indexing ---------------------------------------------------------------
@dataclass
class _Indexed:
    """``x[indices]`` after masks became index rows: (dim, int64 index) pairs."""

    dims: list[int]
    indices: list[Value]
    rank: int  # of the broadcast index shape

    @property
    def adjacent(self) -> bool:
        return self.dims == list(range(self.dims[0], self.dims[0] + len(self.dims)))


def index_entries(op: str, x: Value, indices: Value) -> list[tuple[int, Value]]:
    """(first dim, tensor) for every tensor in an ``aten::index`` list (None skips a dim)."""
    entries, dim = [], 0
    for item in sh._unpack_list(indices):
        if sh._is_none(item):
            dim += 1
            continue
        if item.type().dtype() in (torch.bool, torch.uint8):
            mask_rank = rank_of(op, item)
            if mask_rank == 0:
                sh._unimplemented(op, "a 0-d boolean index")
            entries.append((dim, item))
            dim += mask_rank
        else:
            entries.append((dim, item))
            dim += 1
    return entries


def is_mask(item: Value) -> bool:
    return item.type().dtype() in (torch.bool, torch.uint8)


def index_rows(g, op: str, x: Value, entries: list[tuple[int, Value]]) -> _Indexed:
    """Every index as a normalised int64 tensor, masks turned into NonZero rows."""
    dims, indices, rank = [], [], 0
    for dim, item in entries:
        if is_mask(item):
            mask_rank = rank_of(op, item)
            rows = g.op("NonZero", sh.cast_to(g, item, torch.bool))
            for j in range(mask_rank):
                dims.append(dim + j)
                indices.append(g.op("Gather", rows, g.constant(torch.tensor(j)), axis_i=0))
            rank = max(rank, 1)
        else:
            dims.append(dim)
            indices.append(normalize_index(g, item, x, dim))
            rank = max(rank, rank_of(op, item))
    return _Indexed(dims, indices, rank)


def linear_index(g, x: Value, indexed: _Indexed) -> Value:
    """The row of ``x``'s indexed dims, flattened in order, that each index picks."""
    linear = indexed.indices[0]
    for dim, index in zip(indexed.dims[1:], indexed.indices[1:]):
        linear = g.op("Add", g.op("Mul", linear, dim_size(g, x, dim)), index)
    return linear


def indexed_first(g, x: Value, dims: list[int]) -> tuple[Value, list[int]]:
    """``x`` transposed so ``dims`` lead, with those dims flattened into one."""
    rank = rank_of("aten::index", x)
    perm = dims + [d for d in range(rank) if d not in dims]
    xt = g.op("Transpose", x, perm_i=perm) if perm != list(range(rank)) else x
    xt.setType(Type.tensor(x.type().dtype(), [None] * rank))
    if len(dims) == 1:
        return xt, perm
    flat_shape = g.op("Concat", ints(g, [-1]), shape_slice(g, xt, len(dims)), axis_i=0)
    return g.op("Reshape", xt, flat_shape).setType(
        Type.tensor(x.type().dtype(), [None] * (rank - len(dims) + 1))), perm


@pack.symbolic("aten::index", since=9)
def index(g, self: Value, indices: Value) -> Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor
    index.Tensor_hacked_twin(Tensor self, Tensor[] indices) -> Tensor
    index.list_Tensor(Tensor[] self, Tensor el) -> int

    Advanced indexing: one tensor is a Gather, one mask a Compress; several indices (and
    masks as NonZero rows, any ranks, adjacent or not) gather a flattened row index."""
    entries = index_entries("aten::index", self, indices)
    if not entries:
        return self
    if len(entries) == 1:
        dim, item = entries[0]
        if is_mask(item):
            return _compress(g, self, dim, sh.cast_to(g, item, torch.bool))
        position = normalize_index(g, item, self, dim) if g.opset < 11 else item
        return g.op("Gather", self, sh.cast_to(g, position, torch.int64), axis_i=dim)
    indexed = index_rows(g, "aten::index", self, entries)
    flat, _ = indexed_first(g, self, indexed.dims)
    out = g.op("Gather", flat, linear_index(g, self, indexed), axis_i=0)
    rest = rank_of("aten::index", self) - len(indexed.dims)
    start = indexed.dims[0]
    if not indexed.adjacent or start == 0:
        return out
    b = indexed.rank
    return g.op("Transpose", out, perm_i=[b + i for i in range(start)] + list(range(b))
                + [b + i for i in range(start, rest)])


def _compress(g, x: Value, dim: int, mask: Value) -> Value:
    """``x[..., mask]`` for a mask over dims ``dim..``: Compress on those dims flattened."""
    mask_rank = rank_of("aten::index", mask)
    if mask_rank > 1:
        rank = rank_of("aten::index", x)
        parts = ([shape_slice(g, x, 0, dim)] if dim else []) + [ints(g, [-1])] + (
            [shape_slice(g, x, dim + mask_rank)] if dim + mask_rank < rank else [])
        x = g.op("Reshape", x, g.op("Concat", *parts, axis_i=0) if len(parts) > 1 else parts[0])
        mask = sh._reshape_helper(g, mask, [-1])
    return g.op("Compress", x, mask, axis_i=dim)


@pack.symbolic("aten::index_select", since=7)
def index_select(g, self: Value, dim: Value, index: Value) -> Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    rank = rank_of("aten::index_select", self)
    axis = sh._get_const(dim, "i", "dim") % max(rank, 1)
    if index.type().dim() == 0:
        index = sh._reshape_helper(g, index, [1])
    return g.op("Gather", self, index, axis_i=axis)


@pack.symbolic("aten::gather", since=11)
def gather(g, self: Value, dim: Value, index: Value, sparse_grad: Value | None = None) -> Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    rank = rank_of("aten::gather", self)
    return g.op("GatherElements", self, index, axis_i=sh._get_const(dim, "i", "dim") % rank)


@pack.symbolic("aten::gather", since=9)
def gather_9(g, self: Value, dim: Value, index: Value, sparse_grad: Value | None = None) -> Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor

    Before GatherElements: a OneHot of ``index`` along ``dim`` picks ``self``'s entries by
    multiplying and summing (index and self of one shape outside ``dim``)."""
    rank = rank_of("aten::gather", self)
    axis = sh._get_const(dim, "i", "dim") % rank
    depth = g.op("Gather", shape_of(g, self), g.constant(torch.tensor([axis])), axis_i=0)
    picks = g.op("OneHot", index, depth, g.constant(torch.tensor([0, 1])), axis_i=axis)
    products = g.op("Mul", sh._unsqueeze_helper(g, self, [axis + 1]),
                    sh.cast_to(g, picks, self.type().dtype()))
    return sh.reduce_helper(g, "ReduceSum", products, [axis], keepdims_i=0)


@pack.symbolic("aten::take", since=7)
def take(g, self: Value, index: Value) -> Value:
    """take(Tensor self, Tensor index) -> Tensor

    Elements of the flattened input (an index < 0 counts from the end)."""
    flat = sh._reshape_helper(g, self, [-1])
    return g.op("Gather", flat, normalize_index(g, index, flat, 0), axis_i=0)


@pack.symbolic("aten::one_hot", since=9)
def one_hot(g, self: Value, num_classes: Value) -> Value:
    """one_hot(Tensor self, int num_classes=-1) -> Tensor

    OneHot of int64 0/1 along a new last axis; ``num_classes=-1`` takes max(self) + 1, and a
    ``num_classes`` computed at run time is the depth (as int64)."""
    classes = sh._maybe_get_const(num_classes, "i")
    if isinstance(classes, Value):
        depth = sh.cast_to(g, classes, torch.int64)  # ONNX Runtime's OneHot takes no int32 depth
    elif classes >= 0:
        depth = g.constant(torch.tensor(classes))
    else:
        depth = g.op("Add", sh.reduce_helper(g, "ReduceMax", self, None, keepdims_i=0),
                     g.constant(torch.tensor(1)))
    return g.op("OneHot", self, depth, g.constant(torch.tensor([0, 1])), axis_i=-1)


@pack.symbolic("aten::bucketize", since=9)
def bucketize(g, self: Value, boundaries: Value, out_int32: Value | None = None,
              right: Value | None = None) -> Value:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor
    bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor

    How many boundaries lie below each element (``right=True``: at or below)."""
    rank = rank_of("aten::bucketize", self)
    x, edges = sh.promote(g, sh._unsqueeze_helper(g, self, [rank]), boundaries)
    if right is not None and sh._get_const(right, "b", "right"):
        below = g.op("Not", g.op("Greater", edges, x))
    else:
        below = g.op("Less", edges, x)
    count = sh.reduce_helper(g, "ReduceSum", sh.cast_to(g, below, torch.int64), [rank],
                             keepdims_i=0)
    wide = out_int32 is not None and sh._get_const(out_int32, "b", "out_int32")
    return sh.cast_to(g, count, torch.int32) if wide else count


@pack.symbolic("aten::masked_select", since=9)
def masked_select(g, self: Value, mask: Value) -> Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor

    Broadcast self and mask, flatten both, Compress."""
    both = g.op("Expand", self, shape_of(g, mask))
    flat_mask = sh._reshape_helper(g, g.op("Expand", sh.cast_to(g, mask, torch.bool),
                                           shape_of(g, both)), [-1])
    return g.op("Compress", sh._reshape_helper(g, both, [-1]), flat_mask, axis_i=0)


@pack.symbolic("aten::nonzero", since=9)
def nonzero(g, self: Value) -> Value:
    """nonzero(Tensor self) -> Tensor

    ``[N, rank]`` indices: NonZero's ``[rank, N]`` transposed."""
    return g.op("Transpose", g.op("NonZero", self), perm_i=[1, 0])


@pack.symbolic("aten::nonzero_numpy", since=9)
def nonzero_numpy(g, self: Value) -> Value:
    """nonzero_numpy(Tensor self) -> Tensor[]

    ``nonzero(as_tuple=True)`` and one-argument ``where``: one row of NonZero per dim."""
    rows = g.op("NonZero", self)
    rank = rank_of("aten::nonzero_numpy", self)
    return tensor_list(g, [g.op("Gather", rows, g.constant(torch.tensor(i)), axis_i=0).setType(
        Type.tensor(torch.int64, [None])) for i in range(max(rank, 1))])


@pack.symbolic("aten::where", since=9)
def where_nonzero(g, condition: Value, *others: Value) -> Value:
    """where(Tensor condition) -> Tensor[]

    One-argument ``torch.where(c)``, i.e. ``nonzero(as_tuple=True)``. The three-argument
    overloads are ``aten::where.self`` and its siblings."""
    if others:
        sh._unimplemented("aten::where", "the three-argument form (see aten::where.self)")
    return nonzero_numpy(g, condition)
