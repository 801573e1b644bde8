"""Indexing writes: copy_, index_put (``x[idx] = v``), index_copy, index_fill, scatter,
scatter_add, scatter_reduce, masked_fill, masked_scatter.

Every in-place variant (``index_put_``...) returns the new tensor; the walker then
binds it to what was mutated and writes it through the views it came from.
The seed's unsupported write patterns all export here (opset 11): several tensor
indices of any rank, non-adjacent indices, negative indices, and values that need
broadcasting.
"""

from __future__ import annotations

import math

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.errors import SymbolicDeclined
from oxport.ir import Type, Value
from oxport.opsets.creation import range_values
from oxport.opsets.indexing import (
    index_entries,
    index_rows,
    indexed_first,
    is_mask,
    linear_index,
    normalize_index,
    scatter_along,
    slice_writer,
    spread_along,
)
from oxport.opsets.shape import (
    dim_size,
    ints,
    permuted,
    rank_of,
    scalar_as_vector,
    scalar_int,
    shape_of,
    shape_slice,
    shape_with,
)

pack = OpPack("oxport.scatter", cases="oxport.opsets.cases.scatter")


def where(g, condition: Value, a: Value, b: Value) -> Value:
    """``Where``, done with And/Or for bool data (ONNX Runtime has no bool Where kernel)."""
    if a.type().dtype() == torch.bool:
        return g.op("Or", g.op("And", condition, a), g.op("And", g.op("Not", condition), b))
    return g.op("Where", condition, a, b)


def _like(g, value: Value, self: Value) -> Value:
    """A value (number or tensor) in ``self``'s dtype."""
    dtype = self.type().dtype()
    if dtype is None:
        sh._unimplemented(g.original_node.kind(), "an input of unknown dtype")
    if value.is_const and not isinstance(value.const, torch.Tensor):
        return g.constant(torch.tensor(value.const, dtype=dtype))
    return sh.cast_to(g, value, dtype)


def _one_element(value: Value) -> bool:
    sizes = value.type().varyingSizes()
    return value.is_const and not isinstance(value.const, torch.Tensor) or (
        sizes is not None and all(s == 1 for s in sizes))


# -- copy_ ---------------------------------------------------------------------------
@pack.symbolic("aten::copy_", since=8)
def copy_(g, self: Value, src: Value, non_blocking: Value | None = None) -> Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor
    copy.Dict_Tensor(Dict(Tensor, t)(a) self) -> Dict(Tensor, t)
    copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)

    ``self.copy_(src)``: ``src`` cast and broadcast to ``self``."""
    return g.op("Expand", _like(g, _unexpanded(src), self), shape_of(g, self)).setType(
        self.type())


def _unexpanded(value: Value) -> Value:
    """``value`` before the Expand that made it, if one did: broadcast to the destination,
    it gives the same at any size (a trace of ``x[:, n:] = v`` bakes the sizes it expands
    ``v`` to, which a dynamic axis changes)."""
    node = value.producer
    if node is not None and not node.domain and node.op_type == "Expand":
        return node.input_values[0]
    return value


pack.alias(copy_, "aten::copy", since=8)  # torch.export's functional form of copy_


@pack.symbolic("aten::set_", since=7)
def set_(g, self: Value, source: Value | None = None) -> Value:
    """set_.source_Tensor(Tensor(a!) self, Tensor source) -> Tensor(a!)

    ``self.set_(source)``: ``self`` becomes ``source``, its shape and dtype too."""
    if source is None or not sh._is_tensor(source):
        raise SymbolicDeclined("aten::set_", "only set_(source) with a source tensor converts")
    return g.op("Identity", source)


# -- functional writes into a view (torch.export's graphs) ---------------------------------
@pack.symbolic("aten::slice_scatter", since=9)
def slice_scatter(g, self: Value, src: Value, dim: Value | None = None,
                  start: Value | None = None, end: Value | None = None,
                  step: Value | None = None) -> Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor

    ``self`` with ``self[start:end:step]`` along ``dim`` replaced by ``src``."""
    axis = (sh._maybe_get_const(dim, "i") if dim is not None else 0) % max(
        rank_of("aten::slice_scatter", self), 1)
    begin = sh._maybe_get_const(start, "i") if start is not None else 0
    stride = sh._get_const(step, "i", "step") if step is not None else 1
    write = slice_writer(axis, 0 if begin is None else begin, stride)
    return write(g, self, _like(g, src, self)).setType(self.type())


@pack.symbolic("aten::select_scatter", since=9)
def select_scatter(g, self: Value, src: Value, dim: Value, index: Value) -> Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor

    ``self`` with ``self.select(dim, index)`` replaced by ``src``."""
    axis = sh._get_const(dim, "i", "dim") % rank_of("aten::select_scatter", self)
    position = normalize_index(g, scalar_int(g, sh._maybe_get_const(index, "i")), self, axis)
    new = sh._unsqueeze_helper(g, _like(g, src, self), [axis])
    return scatter_along(g, self, axis, sh._reshape_helper(g, position, [1]), new)


# -- index_put -----------------------------------------------------------------------------
@pack.symbolic("aten::index_put", since=9)
def index_put(g, self: Value, indices: Value, values: Value,
              accumulate: Value | None = None) -> Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor
    index_put.hacked_twin(Tensor self, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor
    index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)

    ``x[indices] = values`` (``+=`` with accumulate): Where for a mask and one value,
    else ScatterND (opset 11) on ``x`` with its indexed dims flattened; accumulate adds
    with ScatterND's reduction from opset 16, by one-hot rows before (exact with repeated
    indices either way)."""
    op = "aten::index_put"
    add = bool(sh._maybe_get_const(accumulate, "b")) if accumulate is not None else False
    entries = index_entries(op, self, indices)
    values = _like(g, values, self)
    if not entries:
        new = g.op("Expand", values, shape_of(g, self))
        return g.op("Add", self, new) if add else new
    if len(entries) == 1 and is_mask(entries[0][1]) and _one_element(values):
        return _masked_put(g, self, *entries[0], values, add)
    if g.opset < 11:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 11, "assigning through tensor indices "
                                            "needs ScatterND")
    indexed = index_rows(g, op, self, entries)
    flat, perm = indexed_first(g, self, indexed.dims)
    linear = linear_index(g, self, indexed)
    start, b = indexed.dims[0], indexed.rank
    moved = indexed.adjacent and start > 0  # torch keeps the indexed block in place
    if moved:
        target = g.op("Concat", shape_slice(g, self, 0, start), shape_of(g, linear),
                      shape_slice(g, self, indexed.dims[-1] + 1), axis_i=0)
    else:
        target = g.op("Concat", shape_of(g, linear), shape_slice(g, flat, 1), axis_i=0)
    spread = g.op("Expand", values, target)
    if moved:
        rest = rank_of(op, self) - len(indexed.dims)
        spread = g.op("Transpose", spread, perm_i=list(range(start, start + b)) + list(
            range(start)) + list(range(start + b, b + rest)))
    updates = g.op("Reshape", spread, g.op("Concat", ints(g, [-1]), shape_slice(g, flat, 1),
                                           axis_i=0))
    if add and g.opset < 16:
        rows = spread_along(g, sh._reshape_helper(g, linear, [-1]), 0, rank_of(op, flat), updates)
        out = _reduce_by_onehot(g, flat, 0, rows, updates, "sum", partial=False)
    else:
        out = g.op("ScatterND", flat, sh._reshape_helper(g, linear, [-1, 1]), updates,
                   reduction_s="add" if add else None)
    if len(indexed.dims) > 1:
        rank = rank_of(op, self)
        out = g.op("Reshape", out, g.op("Gather", shape_of(g, self), ints(g, perm), axis_i=0))
        out.setType(Type.tensor(self.type().dtype(), [None] * rank))
    if perm != sorted(perm):
        out = g.op("Transpose", out, perm_i=[perm.index(d) for d in range(len(perm))])
    return out


def _masked_put(g, self: Value, dim: int, mask: Value, value: Value, add: bool) -> Value:
    """``x[..., mask] = v`` (or ``+= v``) for a single value: a Where over the mask."""
    rank, mask_rank = rank_of("aten::index_put", self), rank_of("aten::index_put", mask)
    mask = sh.cast_to(g, mask, torch.bool)
    trailing = rank - dim - mask_rank
    if trailing:
        mask = sh._unsqueeze_helper(g, mask, list(range(mask_rank, mask_rank + trailing)))
    value = sh._reshape_helper(g, value, []).setType(Type.tensor(self.type().dtype(), []))
    if add:
        zero = g.constant(torch.zeros((), dtype=self.type().dtype()))
        return g.op("Add", self, where(g, mask, value, zero))
    return where(g, mask, value, self)


pack.alias(index_put, "aten::index_put_", since=9)


# -- index_copy, index_fill -------------------------------------------------------------------
def _axis(op: str, self: Value, dim: Value) -> int:
    return sh._get_const(dim, "i", "dim") % max(rank_of(op, self), 1)


@pack.symbolic("aten::index_copy", since=9)
def index_copy(g, self: Value, dim: Value, index: Value, source: Value) -> Value:
    """index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor
    index_copy_(Tensor(a!) self, int dim, Tensor index, Tensor source) -> Tensor(a!)

    Rows ``index`` of ``self`` along ``dim`` become ``source``'s: ScatterElements."""
    axis = _axis("aten::index_copy", self, dim)
    if source.type().dim() is not None and source.type().dim() < rank_of("aten::index_copy", self):
        source = sh._unsqueeze_helper(g, source, [axis])
    return scatter_along(g, self, axis, sh._reshape_helper(g, index, [-1]), source)


pack.alias(index_copy, "aten::index_copy_", since=9)


@pack.symbolic("aten::index_fill", since=9)
def index_fill(g, self: Value, dim: Value, index: Value, value: Value) -> Value:
    """index_fill.int_Tensor(Tensor self, int dim, Tensor index, Tensor value) -> Tensor
    index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor
    index_fill_.int_Tensor(Tensor(a!) self, int dim, Tensor index, Tensor value) -> Tensor(a!)

    Rows ``index`` along ``dim`` set to ``value``: ScatterElements of a broadcast value."""
    axis = _axis("aten::index_fill", self, dim)
    positions = sh._reshape_helper(g, index, [-1])
    fill = g.op("Expand", _like(g, value, self),
                shape_with(g, self, axis, shape_of(g, positions)))
    return scatter_along(g, self, axis, positions, fill)


pack.alias(index_fill, "aten::index_fill_", since=9)


def _index_add_source(g, self: Value, axis: int, source: Value,
                      alpha: Value | None) -> Value:
    """``index_add``'s ``source`` in ``self``'s dtype and rank, times ``alpha``."""
    source = _like(g, source, self)
    if source.type().dim() is not None and source.type().dim() < rank_of("aten::index_add", self):
        source = sh._unsqueeze_helper(g, source, [axis])
    scale = 1 if alpha is None else sh._maybe_get_const(alpha, "f")
    if isinstance(scale, Value) or scale != 1:
        source = g.op("Mul", source, _like(g, alpha, self))
    return source


@pack.symbolic("aten::index_add", since=9)
@scalar_as_vector
def index_add(g, self: Value, dim: Value, index: Value, source: Value,
              alpha: Value | None = None) -> Value:
    """index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor
    index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)

    ``source`` (times ``alpha``) added into rows ``index`` along ``dim``, by one-hot rows
    (exact with repeated indices; ScatterElements adds from opset 16)."""
    axis = _axis("aten::index_add", self, dim)
    source = _index_add_source(g, self, axis, source, alpha)
    positions = sh.cast_to(g, sh._reshape_helper(g, index, [-1]), torch.int64)
    rows = spread_along(g, positions, axis, rank_of("aten::index_add", self), source)
    return _reduce_by_onehot(g, self, axis, rows, source, "sum", partial=False)


@pack.symbolic("aten::index_add", since=16)
@scalar_as_vector
def index_add_16(g, self: Value, dim: Value, index: Value, source: Value,
                 alpha: Value | None = None) -> Value:
    """index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor
    index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)

    ScatterElements with reduction='add'."""
    axis = _axis("aten::index_add", self, dim)
    source = _index_add_source(g, self, axis, source, alpha)
    return scatter_along(g, self, axis, sh._reshape_helper(g, index, [-1]), source, "add")


pack.alias(index_add, "aten::index_add_", since=9)
pack.alias(index_add_16, "aten::index_add_", since=16)



# -- scatter ------------------------------------------------------------------------------
_REDUCTIONS = {"add": "add", "multiply": "mul", "sum": "add", "prod": "mul", "amax": "max",
               "amin": "min"}


def _scatter(g, op: str, op_type: str, self: Value, dim: Value, index: Value, src: Value,
             reduction: str | None = None) -> Value:
    """ScatterElements (Scatter before 11) with ``src`` cut or broadcast to ``index``."""
    axis = _axis(op, self, dim)
    if not sh._is_tensor(src) or (src.is_const and not isinstance(src.const, torch.Tensor)):
        src = g.op("Expand", _like(g, src, self), shape_of(g, index))
    else:
        src = _cut_to(g, op, _like(g, src, self), index)
    return g.op(op_type, self, index, src, axis_i=axis, reduction_s=reduction)


def _cut_to(g, op: str, src: Value, index: Value) -> Value:
    """``src`` sliced to ``index``'s shape where they differ (scatter reads only that part);
    sizes unknown at trace time are cut at run time."""
    sizes = src.type().varyingSizes()
    if sizes is not None and None not in sizes and sizes == index.type().varyingSizes():
        return src
    rank = rank_of(op, index)
    if g.opset < 10:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 10, "src larger than index")
    return g.op("Slice", src, ints(g, [0] * rank), shape_of(g, index),
                ints(g, list(range(rank))))


def _spans(self: Value, index: Value, axis: int) -> bool:
    """Whether ``index`` is statically as large as ``self`` in every dim but ``axis``."""
    ours, theirs = self.type().varyingSizes(), index.type().varyingSizes()
    return ours is not None and theirs is not None and all(
        a is not None and a == b for d, (a, b) in enumerate(zip(ours, theirs)) if d != axis)


def _reduce_by_onehot(g, self: Value, axis: int, index: Value, src: Value, mode: str,
                      partial: bool) -> Value:
    """``self`` with ``src`` (shaped like ``index``) reduced into it at ``index`` along
    ``axis`` (sum, amax or amin), exact with repeated indices and without ScatterElements'
    reductions: each ``src`` item meets a one-hot row of the positions along ``axis``; the
    rows are reduced over ``axis``, moved into place and combined with ``self``. Where
    ``index`` may span less of ``self``'s other dims (``partial``), the reduced rows are
    written onto the reduction's identity first. Bools (sum: "or") go through int32."""
    if self.type().dtype() == torch.bool:
        as_ints = _reduce_by_onehot(g, sh.cast_to(g, self, torch.int32), axis, index,
                                    sh.cast_to(g, src, torch.int32), mode, partial)
        return sh.cast_to(g, as_ints, torch.bool)
    reduce_op, combine_op = _ONEHOT_REDUCTIONS[mode]
    rank = rank_of(g.original_node.kind(), self)
    dtype = self.type().dtype()
    identity = torch.tensor([_identity(mode, dtype)], dtype=dtype)
    positions = range_values(g, 0, dim_size(g, self, axis), 1, torch.int64, g.original_node.kind())
    onehot = g.op("Equal", sh._unsqueeze_helper(g, index, [rank]), positions)
    rows = g.op("Where", onehot, sh._unsqueeze_helper(g, src, [rank]),
                g.constant(identity.reshape(())))
    reduced = sh.reduce_helper(g, reduce_op, rows, [axis], keepdims_i=0)
    placed = permuted(g, reduced, [*range(axis), rank - 1, *range(axis, rank - 1)])
    placed.setType(Type.tensor(dtype, [None] * rank))
    if partial:
        base = g.op("ConstantOfShape", shape_of(g, self), value_t=identity).setType(self.type())
        placed = scatter_along(g, base, axis, positions, placed)
    return g.op(combine_op, self, placed).setType(self.type())


#: mode: (the reduction over one-hot rows, how its result combines with self)
_ONEHOT_REDUCTIONS = {"sum": ("ReduceSum", "Add"), "amax": ("ReduceMax", "Max"),
                      "amin": ("ReduceMin", "Min")}


@pack.symbolic("aten::scatter", since=9)
def scatter(g, self: Value, dim: Value, index: Value, src: Value,
            reduce: Value | None = None) -> Value:
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor
    scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
    scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor
    scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor
    scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)

    ``scatter`` with a tensor or a number (ONNX Scatter)."""
    if reduce is not None:
        sh._onnx_opset_unsupported_detailed("aten::scatter", g.opset, 16, "reduce=")
    return _scatter(g, "aten::scatter", "Scatter", self, dim, index, src)


@pack.symbolic("aten::scatter", since=11)
def scatter_11(g, self: Value, dim: Value, index: Value, src: Value,
               reduce: Value | None = None) -> Value:
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor
    scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
    scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor
    scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor
    scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)
    """
    if reduce is not None:
        sh._onnx_opset_unsupported_detailed("aten::scatter", g.opset, 16, "reduce=")
    return _scatter(g, "aten::scatter", "ScatterElements", self, dim, index, src)


@pack.symbolic("aten::scatter", since=16)
def scatter_16(g, self: Value, dim: Value, index: Value, src: Value,
               reduce: Value | None = None) -> Value:
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor
    scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
    scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor
    scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor
    scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)

    With ``reduce='add'|'multiply'`` as ScatterElements' reduction."""
    mode = sh._get_const(reduce, "s", "reduce") if reduce is not None else None
    return _scatter(g, "aten::scatter", "ScatterElements", self, dim, index, src,
                    _REDUCTIONS[mode] if mode else None)


pack.alias(scatter, "aten::scatter_", since=9)
pack.alias(scatter_11, "aten::scatter_", since=11)
pack.alias(scatter_16, "aten::scatter_", since=16)


@pack.symbolic("aten::scatter_add", since=9)
def scatter_add(g, self: Value, dim: Value, index: Value, src: Value) -> Value:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
    scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)

    By one-hot rows (exact with repeated indices; ScatterElements adds from opset 16)."""
    op = "aten::scatter_add"
    axis = _axis(op, self, dim)
    return _reduce_by_onehot(g, self, axis, index, _cut_to(g, op, _like(g, src, self), index),
                             "sum", partial=not _spans(self, index, axis))


@pack.symbolic("aten::scatter_add", since=16)
def scatter_add_16(g, self: Value, dim: Value, index: Value, src: Value) -> Value:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
    scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)

    ScatterElements with reduction='add'."""
    return _scatter(g, "aten::scatter_add", "ScatterElements", self, dim, index, src, "add")


pack.alias(scatter_add, "aten::scatter_add_", since=9)
pack.alias(scatter_add_16, "aten::scatter_add_", since=16)


@pack.symbolic("aten::scatter_reduce", since=16)
def scatter_reduce(g, self: Value, dim: Value, index: Value, src: Value, reduce: Value,
                   include_self: Value | None = None) -> Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor
    scatter_reduce_.two(Tensor(a!) self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor(a!)

    ScatterElements with sum/prod/amax/amin reductions (amax/amin by one-hot rows
    before 18); ``mean`` divides the sums by the counts (floored for integers). With
    include_self=False the positions that ``index`` reaches first take the reduction's
    identity, so only ``src`` counts there. 0-d operands scatter as 1-element vectors."""
    op = "aten::scatter_reduce"
    if sh._get_tensor_rank(self) == 0:  # ScatterElements takes rank >= 1: as 1-vectors
        vectors = [sh._unsqueeze_helper(g, v, [0]).setType(Type.tensor(v.type().dtype(), (1,)))
                   for v in (self, index, src)]
        return sh._squeeze_helper(g, scatter_reduce(g, vectors[0], dim, *vectors[1:], reduce,
                                                    include_self), [0])
    mode = sh._get_const(reduce, "s", "reduce")
    include = include_self is None or sh._get_const(include_self, "b", "include_self")
    if (mode not in _REDUCTIONS and mode != "mean") or mode in ("add", "multiply"):
        sh._unimplemented(op, f"reduce={mode!r}")
    dtype = self.type().dtype()
    if not include:
        identity = g.op("Expand", g.constant(torch.tensor(_identity(mode, dtype), dtype=dtype)),
                        shape_of(g, index))
        self = g.op("ScatterElements", self, index, identity,
                    axis_i=_axis(op, self, dim)).setType(self.type())
    if mode in ("amax", "amin") and g.opset < 18:
        axis = _axis(op, self, dim)
        return _reduce_by_onehot(g, self, axis, index, _cut_to(g, op, _like(g, src, self), index),
                                 mode, partial=not _spans(self, index, axis))
    if mode != "mean":
        return _scatter(g, op, "ScatterElements", self, dim, index, src, _REDUCTIONS[mode])
    sums = _scatter(g, op, "ScatterElements", self, dim, index, src, "add")
    ones = g.op("ConstantOfShape", shape_of(g, index), value_t=torch.ones(1, dtype=dtype))
    start = g.op("ConstantOfShape", shape_of(g, self),
                 value_t=torch.full((1,), int(include), dtype=dtype))
    start.setType(self.type())
    counts = g.op("Max", _scatter(g, op, "ScatterElements", start, dim, index, ones, "add"),
                  g.constant(torch.tensor(1, dtype=dtype)))  # unreached: self / 1
    if dtype.is_floating_point:
        return g.op("Div", sums, counts)
    quotient = g.op("Div", sh.cast_to(g, sums, torch.float64),
                    sh.cast_to(g, counts, torch.float64))
    return sh.cast_to(g, g.op("Floor", quotient), dtype)


def _identity(mode: str, dtype: torch.dtype) -> float | int:
    """The value a reduction leaves unchanged (what include_self=False starts from)."""
    if mode in ("sum", "mean"):
        return 0
    if mode == "prod":
        return 1
    if dtype.is_floating_point:
        return -math.inf if mode == "amax" else math.inf
    info = torch.iinfo(dtype)
    return info.min if mode == "amax" else info.max


pack.alias(scatter_reduce, "aten::scatter_reduce_", since=16)


# -- masked_fill, masked_scatter ---------------------------------------------------------------
@pack.symbolic("aten::masked_fill", since=9)
def masked_fill(g, self: Value, mask: Value, value: Value) -> Value:
    """masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor
    masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor
    masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)

    ``Where(mask, value, self)`` with the value in ``self``'s dtype."""
    return where(g, sh.cast_to(g, mask, torch.bool), sh._reshape_helper(
        g, _like(g, value, self), []).setType(Type.tensor(self.type().dtype(), [])), self)


pack.alias(masked_fill, "aten::masked_fill_", since=9)


@pack.symbolic("aten::masked_scatter", since=11)
def masked_scatter(g, self: Value, mask: Value, source: Value) -> Value:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor
    masked_scatter_(Tensor(a!) self, Tensor mask, Tensor source) -> Tensor(a!)

    The masked positions, in order, take ``source``'s leading elements: ScatterND."""
    full = g.op("Expand", sh.cast_to(g, mask, torch.bool), shape_of(g, self))
    positions = g.op("Transpose", g.op("NonZero", full), perm_i=[1, 0])
    count = shape_slice(g, positions, 0, 1)
    flat = sh._reshape_helper(g, _like(g, source, self), [-1])
    updates = g.op("Slice", flat, ints(g, [0]), count, ints(g, [0]))
    return g.op("ScatterND", self, positions, updates)


pack.alias(masked_scatter, "aten::masked_scatter_", since=11)


def _bincount_dtype(weights: Value | None) -> torch.dtype:
    """PyTorch's bincount result: counts in int64; float32 weights summed as float32, any
    other weights as float64."""
    if weights is None:
        return torch.int64
    return torch.float32 if weights.type().dtype() == torch.float32 else torch.float64


@pack.symbolic("aten::bincount", since=16)
def bincount(g, self: Value, weights: Value | None = None, minlength: Value | None = None
             ) -> Value:
    """bincount(Tensor self, Tensor? weights=None, SymInt minlength=0) -> Tensor

    ScatterElements (reduction add) of the weights (ones without) into zeros of length
    ``max(max(self) + 1, minlength)``; an empty input gives ``minlength`` zeros."""
    op = "aten::bincount"
    if rank_of(op, self) != 1:
        sh._unimplemented(op, "an input that is not 1-D")
    weights = None if weights is None or sh._is_none(weights) else weights
    dtype = _bincount_dtype(weights)
    least = 0 if minlength is None or sh._is_none(minlength) else \
        int(sh._get_const(minlength, "i", "minlength"))
    index = sh.cast_to(g, self, torch.int64)
    # The largest index, or minlength - 1 when it is larger (or the input empty).
    floor = g.constant(torch.tensor([least - 1], dtype=torch.int64))
    top = sh.reduce_helper(g, "ReduceMax", g.op("Concat", index, floor, axis_i=0), [0],
                           keepdims_i=1)
    length = g.op("Add", top, g.constant(torch.tensor([1], dtype=torch.int64)))
    zeros = g.op("ConstantOfShape", length, value_t=torch.zeros(1, dtype=dtype))
    updates = sh.cast_to(g, weights, dtype) if weights is not None else \
        g.op("ConstantOfShape", shape_of(g, index), value_t=torch.ones(1, dtype=dtype))
    return g.op("ScatterElements", zeros, index, updates, axis_i=0, reduction_s="add")
