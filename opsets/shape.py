"""Shape ops: size, view/reshape, flatten, permutes, squeeze/unsqueeze, expand/repeat,
flip/roll, dtype conversions (``to``, ``type_as``), triu/tril and diagonal.

Sizes are read at run time (``Shape``) wherever a dimension may be dynamic: the
walker sees the traced (static) sizes even for ``dynamic_axes``, so a symbolic only
bakes in a size where the traced graph itself does (``squeeze()``, split counts).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value
from oxport.opsets import lists
from oxport.opsets.common import scalar_as_vector
from oxport.opsets.signal import complex_cast, is_complex
from oxport.types import JitScalarType, packed_count

pack = OpPack("oxport.shape", cases="oxport.opsets.cases.shape")

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


# -- helpers shared with the split/indexing modules ---------------------------------
def rank_of(op: str, x: Value) -> int:
    """The static rank of ``x``; declines when it is unknown."""
    rank = x.type().dim()
    if rank is None:
        sh._unimplemented(op, "an input of unknown rank")
    return rank


def int_list(value: Value) -> list[int | Value] | None:
    """The items of an ``int[]`` argument (ints, or Values where computed), else None."""
    if sh._is_packed_list(value):
        return [sh._maybe_get_const(v, "i") for v in sh._unpack_list(value)]
    if value.is_const and isinstance(value.const, (list, tuple)):
        return [int(v) for v in value.const]
    if value.is_const and isinstance(value.const, int):
        return [value.const]
    return None


def ints(g, items: Sequence[int | Value]) -> Value:
    """A 1-D int64 tensor of ``items`` (Python ints and 0-d or 1-element int Values)."""
    parts: list[Value] = []
    run: list[int] = []
    for item in items:
        if isinstance(item, Value) and item.is_const:
            item = int(sh.constant_item(item))
        if isinstance(item, Value):
            if run:
                parts.append(g.constant(torch.tensor(run, dtype=torch.int64)))
                run = []
            parts.append(sh._reshape_helper(g, sh.cast_to(g, item, torch.int64), [1]))
        else:
            run.append(int(item))
    if run or not parts:
        parts.append(g.constant(torch.tensor(run, dtype=torch.int64)))
    if len(parts) == 1:
        return parts[0]
    return g.op("Concat", *parts, axis_i=0).setType(Type.tensor(torch.int64, [len(items)]))


def shape_of(g, x: Value) -> Value:
    rank = x.type().dim()
    return g.op("Shape", x).setType(Type.tensor(torch.int64, [rank] if rank is not None else None))


def shape_slice(g, x: Value, start: int, end: int | None = None) -> Value:
    """``x.shape[start:end]`` as a 1-D int64 tensor."""
    if g.opset >= 15:
        return g.op("Shape", x, start_i=start, end_i=end)
    return sh._slice_helper(g, shape_of(g, x), [0], [start], [INT64_MAX if end is None else end])


def dim_size(g, x: Value, dim: int) -> Value:
    """``x.size(dim)`` as a 0-d int64 tensor."""
    return g.op("Gather", shape_of(g, x), g.constant(torch.tensor(dim)), axis_i=0).setType(
        Type.tensor(torch.int64, []))


def shape_with(g, x: Value, dim: int, middle: Value | None) -> Value:
    """``x``'s shape with dimension ``dim`` replaced by the 1-D ``middle`` (or removed)."""
    rank = rank_of("shape_with", x)
    parts = []
    if dim > 0:
        parts.append(shape_slice(g, x, 0, dim))
    if middle is not None:
        parts.append(middle)
    if dim + 1 < rank:
        parts.append(shape_slice(g, x, dim + 1))
    if len(parts) == 1:
        return parts[0]
    return g.op("Concat", *parts, axis_i=0)


def scalar_int(g, value: int | Value) -> Value:
    """A 0-d int64 tensor."""
    if isinstance(value, Value) and not value.is_const:
        return sh._reshape_helper(g, sh.cast_to(g, value, torch.int64), []).setType(
            Type.tensor(torch.int64, []))
    return g.constant(torch.tensor(int(sh.constant_item(value)), dtype=torch.int64))


def _shape_input(g, shape: Value) -> Value:
    items = int_list(shape)
    if items is not None:
        return ints(g, items)
    return sh.cast_to(g, shape, torch.int64)


def permuted(g, x: Value, perm: list[int]) -> Value:
    """``x`` transposed by ``perm`` (``x`` itself for the identity permutation)."""
    if perm == list(range(len(perm))):
        return x
    return g.op("Transpose", x, perm_i=perm)


# -- size, view, reshape, flatten ---------------------------------------------------
@pack.symbolic("aten::size", since=7, accepts_complex=True)
def size(g, self: Value, dim: Value | None = None) -> Value:
    """size(Tensor self) -> int[]
    size.int(Tensor self, int dim) -> int

    ``x.size()`` as a Shape; ``x.size(d)`` as a 0-d int64 (a constant when static); a
    complex tensor's shape leaves out its real pairs' axis."""
    shape = shape_slice(g, self, 0, -1) if is_complex(g, 0, "aten::size") else None
    if dim is None:
        return shape or shape_of(g, self)
    shape = shape or g.op("Shape", self)
    index = sh._maybe_get_const(dim, "i")
    if not isinstance(index, Value):
        return sh._squeeze_helper(g, sh._slice_helper(
            g, shape, [0], [index], [index + 1 if index != -1 else 2**62]), [0])
    return g.op("Gather", shape, index, axis_i=0)


@pack.symbolic("aten::numel", since=7)
def numel(g, self: Value) -> Value:
    """numel(Tensor self) -> int

    ``x.numel()`` as a 0-d int64 (what F.embedding_bag asks of 2-D input)."""
    return g.op("Size", self).setType(Type.tensor(torch.int64, []))


@pack.symbolic("aten::view", since=7)
def view(g, self: Value, size: Value) -> Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)
    view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)
    reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)

    A dtype packing several numbers in each element (float4_e2m1fn_x2) has each counted
    in ONNX: its last size is scaled to match."""
    if size.type().kind() == "IntType":
        return _view_dtype(g, self, JitScalarType(int(sh._get_const(size, "i", "dtype"))))
    items = int_list(size)
    count = packed_count(self.type().dtype())
    if count > 1:
        items = _packed_sizes(self, items, count)
    shape = ints(g, items) if count > 1 else _shape_input(g, size)
    if items is not None and 0 in items:
        sizes = [i if isinstance(i, int) else None for i in items]
        return _reshape_to_empty(g, self, shape, sizes, items.index(0))
    out = g.op("Reshape", self, shape)
    length = (shape.type().shape or [None])[0] if shape.type().dim() == 1 else None
    if out.type().dim() is None and isinstance(length, int) and not shape.is_const:
        # The rank of a shape computed at run time (ONNX infers it from 14); a constant
        # shape's sizes are left to inference, which knows them all.
        out.setType(Type.tensor(self.type().dtype(), [None] * length))
    return out


def _packed_sizes(x: Value, items: list[int | Value] | None, count: int) -> list[int]:
    """The sizes ``x`` (of a packed dtype) is reshaped to, as ONNX counts them: the last
    one ``count`` times torch's (-1 stays -1); they must be known."""
    if items is None or not all(isinstance(i, int) for i in items):
        sh._unimplemented("aten::view", f"a {x.type().dtype()} tensor reshaped to sizes "
                          "computed at run time: ONNX counts each number an element packs, "
                          "so the sizes must be known to scale; keep them static")
    if not items or items[-1] == -1:
        return list(items)
    return [*items[:-1], items[-1] * count]


def _view_dtype(g, x: Value, to: JitScalarType) -> Value:
    """``x.view(dtype)``: ``x`` itself for its own dtype, else a BitCast (opset 26) between
    types of one bit width."""
    source = x.type().dtype()
    if source == to.dtype():
        return x
    bits = [dtype.itemsize * 8 // packed_count(dtype) for dtype in (source, to.dtype())]
    if source is None or bits[0] != bits[1]:
        sh._unimplemented("aten::view", f"x.view({to.dtype()}) on a {source} tensor: ONNX "
                          "reinterprets bits only between types of one bit width (BitCast); "
                          "keep the data in one dtype where it enters the model (packed FP4 "
                          "numbers as torch.uint8)")
    if g.opset < 26:
        sh._onnx_opset_unsupported_detailed(
            "aten::view", g.opset, 26, f"x.view({to.dtype()}) reinterprets bits (BitCast)")
    return g.op("BitCast", x, to_i=to.onnx_type())


pack.alias(view, "aten::reshape", since=7)


def _reshape_to_empty(g, x: Value, shape: Value, sizes: list[int | None], zero: int
                      ) -> Value:
    """``x`` (empty) reshaped to ``shape``, whose dim ``zero`` is 0: ONNX's Reshape reads a
    0 as "copy the input's dim" unless ``allowzero`` (opset 14), so before 14 ``x`` becomes
    ``(1, …, 0, …, 1)`` (by a -1) and is expanded to ``shape``. ``sizes``: the result's
    type."""
    if g.opset >= 14:
        out = g.op("Reshape", x, shape, allowzero_i=1)
    elif g.opset >= 8:
        ones = [1] * len(sizes)
        ones[zero] = -1
        out = g.op("Expand", g.op("Reshape", x, ints(g, ones)), shape)
    else:
        sh._onnx_opset_unsupported_detailed("Reshape", g.opset, 8, "a size 0")
    return out.setType(Type.tensor(x.type().dtype(), sizes))


@pack.symbolic("aten::view_as", since=7)
def view_as(g, self: Value, other: Value) -> Value:
    """view_as(Tensor(a) self, Tensor other) -> Tensor(a)
    reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)

    ``x.view_as(y)``: Reshape to ``y``'s run-time shape."""
    return g.op("Reshape", self, shape_of(g, other))


pack.alias(view_as, "aten::reshape_as", since=7)


@pack.symbolic("aten::flatten", since=7)
@sh.parse_args("v", "i", "i")
def flatten(g, input: Value, start_dim: int, end_dim: int) -> Value:
    """flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)

    Flatten when the dims run to the end; Reshape over Shape slices otherwise."""
    rank = rank_of("aten::flatten", input)
    start, end = start_dim % max(rank, 1), end_dim % max(rank, 1)
    if rank == 0:
        return sh._reshape_helper(g, input, [1])
    sizes = input.type().varyingSizes() or [None] * rank
    if 0 in sizes:  # Flatten and a Reshape's 0 (copy) would not keep an empty dim
        return _flatten_empty(g, input, start, end, sizes)
    if end == rank - 1:
        flat = g.op("Flatten", input, axis_i=start)
        if start == 0:
            return sh._squeeze_helper(g, flat, [0])
        if start == 1 or rank == 2:
            return flat
    parts = []
    if start > 0:
        parts.append(shape_slice(g, input, 0, start))
    parts.append(g.constant(torch.tensor([-1], dtype=torch.int64)))
    if end < rank - 1:
        parts.append(shape_slice(g, input, end + 1))
    return g.op("Reshape", input, g.op("Concat", *parts, axis_i=0))


def _flatten_empty(g, x: Value, start: int, end: int, sizes: list[int | None]) -> Value:
    """flatten of a tensor with an empty dim: its shape, read at run time (a traced size
    may vary), with the product of dims ``start..end``."""
    rank = len(sizes)
    parts = [shape_slice(g, x, 0, start)] if start > 0 else []
    parts.append(g.op("ReduceProd", shape_slice(g, x, start, end + 1), keepdims_i=1))
    if end < rank - 1:
        parts.append(shape_slice(g, x, end + 1))
    target = g.op("Concat", *parts, axis_i=0) if len(parts) > 1 else parts[0]
    zero = sizes.index(0)
    zero = zero if zero < start else start if zero <= end else zero - (end - start)
    return _reshape_to_empty(g, x, target, [None] * (rank - end + start), zero)


@pack.symbolic("aten::unflatten", since=7)
def unflatten(g, self: Value, dim: Value, sizes: Value) -> Value:
    """unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)

    Split one dimension into ``sizes`` (one of them may be -1)."""
    rank = rank_of("aten::unflatten", self)
    axis = sh._get_const(dim, "i", "dim") % rank
    items = int_list(sizes)
    middle = ints(g, items) if items is not None else sh.cast_to(g, sizes, torch.int64)
    return g.op("Reshape", self, shape_with(g, self, axis, middle))


def _identity(name: str):
    def symbolic(g, self: Value, *_: Value) -> Value:
        return self
    symbolic.__name__ = name
    signature = {"alias": "(Tensor(a) self) -> Tensor(a)",
                 "clone": "(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
                 "contiguous": "(Tensor(a) self, *, MemoryFormat memory_format=0) -> Tensor(a)",
                 "lift": "(Tensor self) -> Tensor",
                 "resolve_conj": "(Tensor(a) self) -> Tensor(a)",
                 "resolve_neg": "(Tensor(a) self) -> Tensor(a)"}[name]
    symbolic.__doc__ = f"{name}{signature}\n\nChanges nothing an ONNX graph can see."
    return symbolic


for _name in ("contiguous", "clone"):
    pack.symbolic(f"aten::{_name}", since=7, accepts_complex=True)(_identity(_name))


@pack.symbolic("aten::detach", since=7, accepts_complex=True)
def detach(g, self: Value) -> Value:
    """detach(Tensor(a) self) -> Tensor(a)

    The same tensor, sharing its storage: in-place writes to it reach ``self`` (F.embedding
    with ``max_norm`` renormalizes ``weight.detach()`` in place)."""
    g.record_view(lambda g, base, new: new)
    return self


# -- permutations ---------------------------------------------------------------
@pack.symbolic("aten::permute", since=7)
@sh.parse_args("v", "is")
def permute(g, self: Value, dims: list[int]) -> Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    rank = len(dims)
    return permuted(g, self, [d % rank for d in dims])


@pack.symbolic("aten::transpose", since=7)
def transpose(g, self: Value, dim0: Value, dim1: Value) -> Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)

    Swap two dimensions (the tracer records swapaxes/swapdims as transpose)."""
    rank = rank_of("aten::transpose", self)
    if rank == 0:
        return self
    a, b = sh._get_const(dim0, "i", "dim0") % rank, sh._get_const(dim1, "i", "dim1") % rank
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return permuted(g, self, perm)


@pack.symbolic("aten::t", since=7)
def t(g, self: Value) -> Value:
    """t(Tensor(a) self) -> Tensor(a)

    Transpose a 2-D tensor; 0-D and 1-D tensors are returned as is."""
    rank = rank_of("aten::t", self)
    return self if rank < 2 else g.op("Transpose", self, perm_i=[1, 0])


@pack.symbolic("aten::numpy_T", since=7)
def numpy_T(g, self: Value) -> Value:  # noqa: N802 - the aten name
    """numpy_T(Tensor(a) self) -> Tensor(a)
    numpy_T.a(Tensor(a) self) -> Tensor(a)

    ``x.T``: reverse every dimension."""
    rank = rank_of("aten::numpy_T", self)
    return permuted(g, self, list(range(rank))[::-1])


@pack.symbolic("aten::mT", since=7)
def mT(g, self: Value) -> Value:  # noqa: N802 - the aten name
    """mT(Tensor(a) self) -> Tensor(a)
    mT.a(Tensor(a) self) -> Tensor(a)
    mH(Tensor(a) self) -> Tensor(a)
    mH.a(Tensor(a) self) -> Tensor(a)

    ``x.mT`` (and ``x.mH`` of a real tensor): swap the last two dimensions."""
    rank = rank_of("aten::mT", self)
    if rank < 2:
        sh._unimplemented("aten::mT", "a tensor of rank < 2")
    return permuted(g, self, [*range(rank - 2), rank - 1, rank - 2])


pack.alias(mT, "aten::mH", since=7)


@pack.symbolic("aten::movedim", since=7)
@scalar_as_vector
@sh.parse_args("v", "is", "is")
def movedim(g, self: Value, source: list[int], destination: list[int]) -> Value:
    """movedim.int(Tensor(a) self, int source, int destination) -> Tensor(a)
    movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)

    Move ``source`` dims to ``destination``; the rest keep their order (the tracer records moveaxis as movedim)."""
    rank = rank_of("aten::movedim", self)
    perm = [-1] * rank
    sources = [s % rank for s in source]
    for src, dst in zip(sources, destination):
        perm[dst % rank] = src
    rest = iter(d for d in range(rank) if d not in sources)
    return permuted(g, self, [p if p >= 0 else next(rest) for p in perm])


# -- squeeze, unsqueeze ---------------------------------------------------------
@pack.symbolic("aten::squeeze", since=7)
def squeeze(g, self: Value, dim: Value | None = None) -> Value:
    """squeeze(Tensor(a) self) -> Tensor(a)
    squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)
    squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)

    Squeeze the given dims that have size 1 (all such dims without ``dim``).

    ``squeeze()`` is a Squeeze without axes: every dim of size 1 at run time goes, as in
    eager at any size (typed with the traced rank). Given dims of static size are removed
    when 1; from opset 11, a given dim of unknown size (or of a trace exported with
    dynamic axes), or a ``dim`` computed at run time, goes only if it is 1 at run time
    (:func:`_squeeze_if_one`). Below 11, which are 1 comes from the traced sizes (a
    warning names a dynamic one); a dim of unknown size is squeezed.
    """
    sizes = self.type().varyingSizes()
    if dim is None:
        if sizes is not None and 1 not in sizes and None not in sizes:
            return self
        out = g.op("Squeeze", self)
        if sizes is not None and None not in sizes:
            return out.setType(self.type().with_sizes([s for s in sizes if s != 1]))
        rank = _traced_rank(g)  # a dim of unknown size (data-dependent): the traced rank
        return out.setType(self.type().with_sizes(None if rank is None else [None] * rank))
    rank = rank_of("aten::squeeze", self)
    if rank == 0:
        return self
    if g.opset >= 11 and not sh._is_constant(dim):
        return _squeeze_if_one(g, self, dim)
    dims = sorted({d % rank for d in sh._get_const(dim, "is", "dim")})
    if g.opset >= 11 and (sizes is None or g.sizes_may_vary
                          or any(sizes[d] is None for d in dims)):
        return _squeeze_if_one(g, self, dims)
    for axis in dims:
        g.uses_traced_size(self, axis, f"whether squeeze({axis}) removes its dim")
    axes = [d for d in dims if sizes is None or sizes[d] in (1, None)]
    traced_rank = _traced_rank(g)
    if axes and traced_rank is not None and rank - len(axes) != traced_rank:
        # a dim of unknown (data-dependent) size that was not 1 when traced
        axes = [d for d in axes if sizes is not None and sizes[d] == 1]
    return sh._squeeze_helper(g, self, axes) if axes else self


def _squeeze_if_one(g, x: Value, dims: Value | list[int]) -> Value:
    """``x`` without those of ``dims`` that are 1 at run time: a Reshape to the shape
    Compressed to the other dims (typed with the traced rank, as torch.onnx's If). Given
    dims (a list) each keep their size unless it is 1, so a static one folds; a ``dims``
    tensor computed at run time (0-d or 1-D, negative dims allowed) masks the whole
    shape. Below opset 14 a Reshape reads a 0 as "keep that dim", so an empty dim after a
    squeezed one is refused by ONNX Runtime."""
    rank = rank_of("aten::squeeze", x)
    one = g.constant(torch.tensor(1))
    if isinstance(dims, list):
        parts, begin = [], 0
        for axis in dims:
            if axis > begin:
                parts.append(shape_slice(g, x, begin, axis))
            size = shape_slice(g, x, axis, axis + 1)
            parts.append(g.op("Compress", size, g.op("Not", g.op("Equal", size, one)), axis_i=0))
            begin = axis + 1
        if begin < rank:
            parts.append(shape_slice(g, x, begin))
        target = g.op("Concat", *parts, axis_i=0) if len(parts) > 1 else parts[0]
    else:
        shape = shape_of(g, x)
        dims = sh._reshape_helper(g, sh.cast_to(g, dims, torch.int64), [-1, 1])
        dims = g.op("Mod", g.op("Add", dims, g.constant(torch.tensor(rank))),
                    g.constant(torch.tensor(rank)))
        hits = sh.cast_to(g, g.op("Equal", dims, g.constant(torch.arange(rank))), torch.int32)
        named = sh.cast_to(g, sh.reduce_helper(g, "ReduceMax", hits, [0], keepdims_i=0),
                           torch.bool)
        keep = g.op("Or", g.op("Not", named), g.op("Not", g.op("Equal", shape, one)))
        target = g.op("Compress", shape, keep, axis_i=0)
    out = g.op("Reshape", x, target, allowzero_i=1) if g.opset >= 14 else \
        g.op("Reshape", x, target)
    return out.setType(x.type().with_sizes(_traced_sizes(g)))


def _traced_sizes(g) -> list[int | None] | None:
    """The sizes TorchScript recorded for the converted node's output (a trace's example
    sizes, as every other value of a trace has; unknown when computed from tensor
    values), if its rank is known."""
    node = g.original_node
    out_type = node.output().type() if node is not None else None
    if out_type is None or out_type.kind() != "TensorType" or out_type.dim() is None:
        return None
    if g.sizes_from_data(node.output()):
        return [None] * out_type.dim()
    return out_type.varyingSizes()


def _traced_rank(g) -> int | None:
    """The rank TorchScript recorded for the converted node's output, if known."""
    node = g.original_node
    out_type = node.output().type() if node is not None else None
    return out_type.dim() if out_type is not None and out_type.kind() == "TensorType" else None


@pack.symbolic("aten::unsqueeze", since=7, accepts_complex=True)
def unsqueeze(g, self: Value, dim: Value) -> Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)

    Unsqueeze (a negative dim of a complex tensor counts before its real pairs' axis); from
    opset 13, where the axes are an input, a ``dim`` computed at run time too."""
    rank = rank_of("aten::unsqueeze", self) - is_complex(g, 0, "aten::unsqueeze")
    if g.opset >= 13 and not sh._is_constant(dim) and not is_complex(g, 0, "aten::unsqueeze"):
        axes = sh._reshape_helper(g, sh.cast_to(g, dim, torch.int64), [1])
        return g.op("Unsqueeze", self, axes).setType(
            self.type().with_sizes([None] * (rank + 1)))
    axis = sh._get_const(dim, "i", "dim")
    return sh._unsqueeze_helper(g, self, [axis if axis >= 0 else axis + rank + 1])


# -- expand, repeat ---------------------------------------------------------------
@pack.symbolic("aten::expand", since=8)
def expand(g, self: Value, size: Value, implicit: Value | None = None) -> Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)

    Expand; -1 keeps the input's size (it becomes 1, which Expand broadcasts), in sizes
    computed at run time too (from opset 9)."""
    items = int_list(size)
    if items is None:
        target = sh._reshape_helper(g, sh.cast_to(g, size, torch.int64), [-1])
    else:
        target = ints(g, [1 if isinstance(i, int) and i == -1 else i for i in items])
    if g.opset >= 9 and (items is None or _may_be_minus_one(g)):
        target = _ones_for_minus_ones(g, target)  # (Where is from opset 9)
    return g.op("Expand", self, target)


def _may_be_minus_one(g) -> bool:
    """Whether an item of the size list being expanded to is a number read from a tensor
    or passed in at run time (a size read, ``x.size(0)``, is never -1)."""
    node = g.original_node
    sizes = node.inputsAt(1).node() if node is not None and node.inputsSize() > 1 else None
    if sizes is None or sizes.kind() != "prim::ListConstruct":
        return False
    return any(_origin(item).kind() not in _SIZE_READS for item in sizes.inputs())


def _origin(value):
    """The TorchScript node a number comes from, through the conversions a trace records
    (a size turned into a 0-d tensor and back)."""
    node = value.node()
    while node.kind() in _NUMBER_CONVERSIONS and node.inputsSize() == 1:
        node = node.inputsAt(0).node()
    return node


#: TorchScript nodes whose number is a size (or a constant): never -1 in an expand.
_SIZE_READS = ("prim::Constant", "aten::size", "aten::sym_size")
_NUMBER_CONVERSIONS = ("aten::Int", "prim::NumToTensor", "aten::ScalarImplicit",
                       "aten::IntImplicit")


def _ones_for_minus_ones(g, sizes: Value) -> Value:
    """A 1-D int64 size tensor with its -1s (keep the input's size) made 1s at run time."""
    keep = g.op("Equal", sizes, g.constant(torch.tensor(-1)))
    return g.op("Where", keep, g.constant(torch.tensor(1)), sizes)


@pack.symbolic("aten::expand_as", since=8)
def expand_as(g, self: Value, other: Value) -> Value:
    """expand_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    return g.op("Expand", self, shape_of(g, other))


@pack.symbolic("aten::broadcast_tensors", since=7)
def broadcast_tensors(g, tensors: Value) -> Value:
    """broadcast_tensors(Tensor[] tensors) -> Tensor[]

    Each tensor Expanded to the common shape: known when every shape is static, else the
    shape of one tensor Expanded by all the others' (Expand broadcasts both ways). Tensors
    of one static shape (a loss's input and target) need no Expand, so no opset 8."""
    if not sh._is_packed_list(tensors):
        sh._unimplemented("aten::broadcast_tensors", "a list of tensors built at run time")
    items = sh._unpack_list(tensors)
    shapes = [t.type().varyingSizes() for t in items]
    static = all(s is not None and None not in s for s in shapes)
    if static and all(shape == shapes[0] for shape in shapes):
        return tensor_list(g, items)
    if g.opset < 8:
        sh._onnx_opset_unsupported_detailed("aten::broadcast_tensors", g.opset, 8,
                                            "tensors of different or dynamic shapes need Expand")
    if static:
        target = list(torch.broadcast_shapes(*shapes))
        return tensor_list(g, [t if shape == target else g.op("Expand", t, ints(g, target))
                               for t, shape in zip(items, shapes)])
    common = items[0]
    for t in items[1:]:
        common = g.op("Expand", common, shape_of(g, t))
    target_shape = shape_of(g, common)
    return tensor_list(g, [g.op("Expand", t, target_shape) for t in items])


def _tile(g, self: Value, repeats: list[int | Value]) -> Value:
    rank = rank_of("aten::repeat", self)
    if len(repeats) > rank:
        self = sh._unsqueeze_helper(g, self, list(range(len(repeats) - rank)))
    if all(isinstance(r, int) and r == 1 for r in repeats) and len(repeats) <= rank:
        return self
    return g.op("Tile", self, ints(g, repeats))


@pack.symbolic("aten::repeat", since=7)
def repeat(g, self: Value, repeats: Value) -> Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor

    Tile; extra leading repeats add leading dims."""
    items = int_list(repeats)
    if items is None:
        sh._unimplemented("aten::repeat", "repeats whose length is unknown")
    return _tile(g, self, items)


@pack.symbolic("aten::tile", since=7)
def tile(g, self: Value, dims: Value) -> Value:
    """tile(Tensor self, SymInt[] dims) -> Tensor

    ``torch.tile``: like repeat, but fewer dims than the rank repeat the trailing ones."""
    items = int_list(dims)
    if items is None:
        sh._unimplemented("aten::tile", "dims whose length is unknown")
    rank = rank_of("aten::tile", self)
    return _tile(g, self, [1] * (rank - len(items)) + items)


@pack.symbolic("aten::repeat_interleave", since=8)
def repeat_interleave(g, self: Value, repeats: Value | None = None, dim: Value | None = None,
                      output_size: Value | None = None) -> Value:
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor
    repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor
    repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor

    Repeat each element: Unsqueeze/Expand/Reshape for one repeat count; for a tensor of
    counts (opset 11; one count of a dynamic axis broadcasts), gather the source index of
    every output position."""
    if g.original_node.inputsSize() == 2:  # repeat_interleave(repeats): indices 0..n-1
        return _source_indices(g, self)
    axis = sh._maybe_get_const(dim, "i") if dim is not None else None
    if axis is None or sh._is_none(dim):
        self, axis = sh._reshape_helper(g, self, [-1]), 0
        self.setType(Type.tensor(self.type().dtype(), [None]))
    rank = rank_of("aten::repeat_interleave", self)
    axis %= rank
    counts = repeats.type().varyingSizes() if sh._is_tensor(repeats) else []
    if counts is None or any(c != 1 for c in counts):
        # One count (known only at run time) repeats every element: counts broadcast.
        every = g.op("Expand", sh._reshape_helper(g, repeats, [-1]),
                     shape_slice(g, self, axis, axis + 1))
        return g.op("Gather", self, _source_indices(g, every), axis_i=axis)
    count = repeats if not sh._is_tensor(repeats) else sh._reshape_helper(g, repeats, [])
    spread = g.op("Expand", sh._unsqueeze_helper(g, self, [axis + 1]),
                  ints(g, [1] * (axis + 1) + [count] + [1] * (rank - axis - 1)))
    return g.op("Reshape", spread, shape_with(g, self, axis, ints(g, [-1])))


def _source_indices(g, repeats: Value) -> Value:
    """For counts ``r``, the index ``i`` repeated ``r[i]`` times (needs opset 11)."""
    if g.opset < 11:
        sh._onnx_opset_unsupported_detailed("aten::repeat_interleave", g.opset, 11,
                                            "a tensor of repeat counts")
    counts = sh._reshape_helper(g, sh.cast_to(g, repeats, torch.int64), [-1])
    ends = g.op("CumSum", counts, g.constant(torch.tensor(0)))
    total = g.op("ReduceSum", counts, keepdims_i=0)
    positions = g.op("Range", g.constant(torch.tensor(1)), g.op("Add", total, g.constant(
        torch.tensor(1))), g.constant(torch.tensor(1)))
    passed = g.op("Less", sh._unsqueeze_helper(g, ends, [0]),
                  sh._unsqueeze_helper(g, positions, [1]))
    return sh._reducesum_helper(g, sh.cast_to(g, passed.setType(Type.tensor(torch.bool)),
                                              torch.int64), [1], keepdims_i=0)


# -- flip, roll -------------------------------------------------------------------
@pack.symbolic("aten::flip", since=10)
@scalar_as_vector
@sh.parse_args("v", "is")
def flip(g, self: Value, dims: list[int]) -> Value:
    """flip(Tensor self, int[] dims) -> Tensor

    Slice every flipped dim with step -1."""
    rank = rank_of("aten::flip", self)
    axes = [d % rank for d in dims]
    if not axes:
        return self
    n = len(axes)
    return g.op("Slice", self, ints(g, [-1] * n), ints(g, [INT64_MIN] * n), ints(g, axes),
                ints(g, [-1] * n))


@pack.symbolic("aten::roll", since=7)
@sh.parse_args("v", "is", "is")
def roll(g, self: Value, shifts: list[int], dims: list[int]) -> Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor

    Each roll is the Concat of two slices at ``shift % size``, the size read at run time
    (a dynamic axis may be shorter than the shift; an empty one stays empty); no dims rolls
    the flattened tensor."""
    if not dims:
        sizes = self.type().varyingSizes()
        numel = None if sizes is None or None in sizes else int(torch.tensor(sizes).prod())
        # From opset 14 by exact shapes (allowzero): an empty tensor reshapes too.
        zeros = {"allowzero_i": 1} if g.opset >= 14 else {}
        count = g.op("ReduceProd", shape_of(g, self), keepdims_i=1) if zeros else \
            g.constant(torch.tensor([-1]))
        flat = g.op("Reshape", self, count, **zeros).setType(
            Type.tensor(self.type().dtype(), [numel]))
        return g.op("Reshape", roll(g, flat, shifts, [0]), shape_of(g, self), **zeros)
    rank = rank_of("aten::roll", self)
    sizes = self.type().varyingSizes() or [None] * rank
    out = self
    for shift, dim in zip(shifts, dims):
        axis = dim % rank
        if g.opset < 10:  # Slice bounds are attributes: the traced size decides
            shift = shift % sizes[axis] if sizes[axis] else shift
            split: int | Value = -shift
        else:
            size = dim_size(g, out, axis)
            divisor = g.op("Max", size, g.constant(torch.tensor(1))).setType(size.type())
            split = g.op("Sub", size, g.op("Mod", g.constant(torch.tensor(shift)), divisor)
                         .setType(size.type())).setType(size.type())
        if shift == 0:
            continue
        head = sh._slice_helper(g, out, [axis], [split], [INT64_MAX])
        tail = sh._slice_helper(g, out, [axis], [0], [split])
        out = g.op("Concat", head, tail, axis_i=axis)
    return out


# -- dtype conversions ----------------------------------------------------------------
#: Which argument of each ``aten::to`` overload holds the dtype.
_TO_DTYPE_ARG = {"dtype": 0, "prim_dtype": 0, "dtype_layout": 0, "device": 1, "prim_Device": 1}


def _target_dtype(g, args: Sequence[Value], dtype_arg: int | None) -> torch.dtype | None:
    """The traced output's dtype, else the dtype argument's (None: no dtype change)."""
    out_type = g.original_node.output().type()
    if out_type.kind() == "TensorType" and out_type.dtype() is not None:
        return out_type.dtype()
    if dtype_arg is None or dtype_arg >= len(args):
        return None
    code = sh._maybe_get_const(args[dtype_arg], "i")
    return None if code is None or isinstance(code, Value) else JitScalarType(code).dtype()


@pack.symbolic("aten::to", since=7, accepts_complex=True)
def to(g, self: Value, *args: Value) -> Value:
    """to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)
    to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)
    to.other(Tensor(a) self, Tensor other, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)
    and the overloads to.prim_Device, to.prim_dtype, to.prim_other

    A Cast for every overload that names a dtype (or another tensor); device moves are
    identities."""
    overload = g.original_node.schema().partition("(")[0].partition(".")[2]
    if overload == "other":  # scripted code: only a complex tensor's source type has a dtype
        dtype = g.original_node.inputsAt(1).type().dtype() or args[0].type().dtype()
    else:
        dtype = _target_dtype(g, args, _TO_DTYPE_ARG.get(overload))
    if is_complex(g, 0, "aten::to"):
        return complex_cast(g, self, dtype)
    if dtype is None or dtype == self.type().dtype():
        return self
    return sh.cast_to(g, self, dtype)


@pack.symbolic("aten::_to_copy", since=7)
def _to_copy(g, self: Value, *args: Value) -> Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor"""
    dtype = _target_dtype(g, args, 0)
    if dtype is None or dtype == self.type().dtype():
        return self
    return sh.cast_to(g, self, dtype)


@pack.symbolic("aten::type_as", since=7)
def type_as(g, self: Value, other: Value) -> Value:
    """type_as(Tensor self, Tensor other) -> Tensor"""
    dtype = other.type().dtype()
    if dtype is None:
        sh._unimplemented("aten::type_as", "the other tensor's dtype is unknown")
    return sh.cast_to(g, self, dtype)


# -- triu, tril, diagonal ---------------------------------------------------------------
def _trilu_mask(g, self: Value, diagonal: Value, upper: bool) -> Value:
    """Opsets 11-13: keep ``col - row >= k`` (triu) or ``<= k`` (tril) via Range and Where."""
    rank = rank_of("aten::triu" if upper else "aten::tril", self)
    zero, one = g.constant(torch.tensor(0)), g.constant(torch.tensor(1))
    rows = g.op("Range", zero, dim_size(g, self, rank - 2), one)
    cols = g.op("Range", zero, dim_size(g, self, rank - 1), one)
    offset = g.op("Sub", sh._unsqueeze_helper(g, cols, [0]), sh._unsqueeze_helper(g, rows, [1]))
    k = scalar_int(g, diagonal)
    outside = g.op("Less", offset, k) if upper else g.op("Greater", offset, k)
    dtype = self.type().dtype() or torch.float32
    if dtype == torch.bool:  # ONNX Runtime's Where has no bool kernel before opset 16
        return g.op("And", self, g.op("Not", outside))
    return g.op("Where", outside, g.constant(torch.zeros((), dtype=dtype)), self)


@pack.symbolic("aten::triu", since=11)
def triu(g, self: Value, diagonal: Value | None = None) -> Value:
    """triu(Tensor self, SymInt diagonal=0) -> Tensor"""
    return _trilu_mask(g, self, diagonal if diagonal is not None else g.python_constant(0), True)


@pack.symbolic("aten::tril", since=11)
def tril(g, self: Value, diagonal: Value | None = None) -> Value:
    """tril(Tensor self, SymInt diagonal=0) -> Tensor"""
    return _trilu_mask(g, self, diagonal if diagonal is not None else g.python_constant(0), False)


@pack.symbolic("aten::triu", since=14)
def triu_14(g, self: Value, diagonal: Value | None = None) -> Value:
    """triu(Tensor self, SymInt diagonal=0) -> Tensor"""
    k = scalar_int(g, diagonal if diagonal is not None else g.python_constant(0))
    return g.op("Trilu", self, k, upper_i=1)


@pack.symbolic("aten::tril", since=14)
def tril_14(g, self: Value, diagonal: Value | None = None) -> Value:
    """tril(Tensor self, SymInt diagonal=0) -> Tensor"""
    k = scalar_int(g, diagonal if diagonal is not None else g.python_constant(0))
    return g.op("Trilu", self, k, upper_i=0)


def _minimum(g, a: Value, b: Value) -> Value:
    return g.op("Where", g.op("Less", a, b), a, b)


@pack.symbolic("aten::diagonal", since=11)
@sh.parse_args("v", "i", "i", "i")
def diagonal(g, self: Value, offset: int, dim1: int, dim2: int) -> Value:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)

    Move dim1/dim2 last, flatten them, and gather ``(i + a) * W + (i + b)``."""
    rank = rank_of("aten::diagonal", self)
    d1, d2 = dim1 % rank, dim2 % rank
    x = permuted(g, self, [d for d in range(rank) if d not in (d1, d2)] + [d1, d2])
    x.setType(Type.tensor(self.type().dtype(), [None] * rank))
    height, width = dim_size(g, x, rank - 2), dim_size(g, x, rank - 1)
    row0, col0 = g.constant(torch.tensor(max(0, -offset))), g.constant(torch.tensor(max(0, offset)))
    zero = g.constant(torch.tensor(0))
    length = _minimum(g, g.op("Sub", height, row0), g.op("Sub", width, col0))
    length = g.op("Where", g.op("Less", length, zero), zero, length)
    steps = g.op("Range", zero, length, g.constant(torch.tensor(1)))
    linear = g.op("Add", g.op("Mul", g.op("Add", steps, row0), width), g.op("Add", steps, col0))
    flat_shape = ints(g, [-1]) if rank == 2 else g.op(
        "Concat", shape_slice(g, x, 0, rank - 2), ints(g, [-1]), axis_i=0)
    flat = g.op("Reshape", x, flat_shape)
    return g.op("Gather", flat, linear, axis_i=rank - 2)


# -- concatenation and splitting -------------------------------------------------------
def _tensor_items(op: str, g, tensors: Value) -> list[Value] | None:
    """The tensors of a list built in the graph (None for an ONNX Sequence, from opset 11)."""
    if sh._is_packed_list(tensors):
        return sh._unpack_list(tensors)
    if g.opset < 11:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 11, "a list of tensors built at run time")
    return None


def _concat(g, items: list[Value], axis: int, dtype: torch.dtype | None = None) -> Value:
    """Concat of ``items`` cast to ``dtype`` (default: their promoted dtype)."""
    dtype = dtype or sh.result_dtype(*items)
    items = [sh.cast_to(g, t, dtype) for t in items] if dtype is not None else items
    return items[0] if len(items) == 1 else g.op("Concat", *items, axis_i=axis)


@pack.symbolic("aten::cat", since=7)
def cat(g, tensors: Value, dim: Value) -> Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor

    Concat (dtypes promoted over every tensor, the legacy empty 1-D tensors it drops
    included); ConcatFromSequence for a run-time list."""
    axis = sh._get_const(dim, "i", "dim")
    items = _tensor_items("aten::cat", g, tensors)
    if items is None:
        return g.op("ConcatFromSequence", tensors, axis_i=axis)
    kept = [t for t in items if t.type().varyingSizes() != [0]] or items[:1]
    rank = next((t.type().dim() for t in kept if t.type().dim() is not None), None)
    if axis < 0:
        if rank is None:
            sh._unimplemented("aten::cat", "a negative dim over tensors of unknown rank")
        axis += rank
    return _concat(g, kept, axis, sh.result_dtype(*items))


@pack.symbolic("aten::stack", since=7)
def stack(g, tensors: Value, dim: Value) -> Value:
    """stack(Tensor[] tensors, int dim=0) -> Tensor

    Unsqueeze each tensor and Concat; ConcatFromSequence(new_axis=1) for a run-time list."""
    axis = sh._get_const(dim, "i", "dim")
    items = _tensor_items("aten::stack", g, tensors)
    if items is None:
        return g.op("ConcatFromSequence", tensors, axis_i=axis, new_axis_i=1)
    if axis < 0:
        axis += rank_of("aten::stack", items[0]) + 1
    return _concat(g, [sh._unsqueeze_helper(g, t, [axis]) for t in sh.promote(g, *items)], axis)


def _at_least(g, op: str, x: Value, rank: int) -> Value:
    have = rank_of(op, x)
    if have >= rank:
        return x
    return sh._reshape_helper(g, x, [1, 1] if have == 0 and rank == 2 else [1]) if have == 0 \
        else sh._unsqueeze_helper(g, x, [0])


@pack.symbolic("aten::hstack", since=7)
def hstack(g, tensors: Value) -> Value:
    """hstack(Tensor[] tensors) -> Tensor

    Concat along dim 1 (dim 0 for 1-D tensors); 0-D tensors count as 1-D."""
    items = [_at_least(g, "aten::hstack", t, 1) for t in sh._unpack_list(tensors)]
    return _concat(g, items, 0 if rank_of("aten::hstack", sh._unpack_list(tensors)[0]) <= 1
                   else 1)


@pack.symbolic("aten::vstack", since=7)
def vstack(g, tensors: Value) -> Value:
    """vstack(Tensor[] tensors) -> Tensor

    Concat along dim 0 after making every tensor at least 2-D."""
    return _concat(g, [_at_least(g, "aten::vstack", t, 2) for t in sh._unpack_list(tensors)], 0)


def tensor_list(g, items: Sequence[Value]) -> Value:
    """A list of tensors known item by item: ``prim::ListUnpack`` and list consumers take
    the items; used as a whole it becomes a SequenceConstruct (opset 11)."""
    return lists.packed_list(g, list(items), Type.of(g.original_node.output().type()))


def _split(g, x: Value, axis: int, sizes: list[int | Value],
           equal: int | None = None, traced: list[int] | None = None) -> list[Value]:
    """Split ``x`` into pieces of ``sizes`` (ints, or 0-d Values computed at run time; by
    count from opset 18 when ``equal`` is given); ``traced`` sizes type the pieces."""
    if len(sizes) == 1:
        return [x]
    if equal is not None and g.opset >= 18:
        outs = g.op("Split", x, axis_i=axis, num_outputs_i=equal, outputs=equal)
    elif g.opset >= 13:
        outs = g.op("Split", x, ints(g, sizes), axis_i=axis, outputs=len(sizes))
    elif all(isinstance(size, int) for size in sizes):
        outs = g.op("Split", x, axis_i=axis, split_i=sizes, outputs=len(sizes))
    else:
        outs = _split_by_slices(g, x, axis, sizes)
    shape = list(x.type().symbolic_sizes() or [])
    for out, piece in zip(outs, traced or sizes):
        if shape:
            shape[axis] = piece if isinstance(piece, int) else None
        out.setType(Type.tensor(x.type().dtype(), list(shape) if shape else None))
    return list(outs)


def _split_by_slices(g, x: Value, axis: int, sizes: list[int | Value]) -> list[Value]:
    """Pieces of run-time sizes as Slices (opsets 10-12 take Split's sizes as an attribute)."""
    pieces: list[Value] = []
    start: int | Value = 0
    for size in sizes:
        if isinstance(start, int) and isinstance(size, int):
            end: int | Value = start + size
        else:
            end = g.op("Add", *(g.constant(torch.tensor(v)) if isinstance(v, int)
                                else sh.cast_to(g, v, torch.int64) for v in (start, size)))
            end.setType(Type.tensor(torch.int64, []))
        pieces.append(sh._slice_helper(g, x, [axis], [start], [end]))
        start = end
    return pieces


def _split_dim(g, op: str, x: Value, dim: Value, traced: bool = True) -> tuple[int, int]:
    """(axis, its traced size): split counts are fixed when the graph is traced. With
    ``traced``, a size the converted graph does not know (after a mask or nonzero) is the
    one TorchScript traced (the pieces' sizes are read at run time)."""
    rank = rank_of(op, x)
    axis = sh._get_const(dim, "i", "dim") % rank
    size = (x.type().varyingSizes() or [None] * rank)[axis]
    if size is None and traced and g.original_node is not None:
        sizes = sh.traced_sizes(g.original_node.inputsAt(0))
        size = sizes[axis] if sizes is not None and len(sizes) == rank else None
    if size is None:
        sh._unimplemented(op, f"dimension {axis} of unknown size")
    return axis, size


_INT_ARITHMETIC = {"Add": int.__add__, "Sub": int.__sub__, "Mul": int.__mul__,
                   "Div": int.__floordiv__, "Max": max, "Min": min}


def _int_op(g, op: str, a: int | Value, b: int | Value) -> int | Value:
    """``a op b`` on sizes (non-negative): a Python int when both are, else a 0-d node."""
    if isinstance(a, int) and isinstance(b, int):
        return _INT_ARITHMETIC[op](a, b)
    return g.op(op, scalar_int(g, a), scalar_int(g, b)).setType(Type.tensor(torch.int64, []))


def _run_time_size(g, x: Value, axis: int, traced: int) -> int | Value:
    """The size of ``axis`` read at run time (a dynamic axis keeps the traced number of
    pieces but not their sizes); the traced size below opset 10, where Slice bounds are
    attributes. Static sizes fold back into constants."""
    return traced if g.opset < 10 else dim_size(g, x, axis)


def _pieces(g, size: int | Value, step: int | Value, count: int) -> list[int | Value]:
    """``count`` piece sizes: ``step`` each, the last one what remains of ``size``."""
    if count <= 1:
        return [size]
    return [step] * (count - 1) + [_int_op(g, "Sub", size, _int_op(g, "Mul", step, count - 1))]


@pack.symbolic("aten::split", since=7)
def split(g, self: Value, split_size: Value, dim: Value | None = None) -> Value:
    """split(Tensor(a -> *) self, int[] split_sizes, int dim=0) -> Tensor(a)[]
    split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]
    split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]
    unsafe_split.Tensor(Tensor self, SymInt split_size, int dim=0) -> Tensor[]

    ``split(n)`` (pieces of n, the last what remains) or ``split([sizes])``."""
    dim = dim if dim is not None else g.python_constant(0)
    items = int_list(split_size)
    if items is not None and len(items) == 1 and not sh._is_list(split_size):
        items = None
    if items is not None:  # the sizes say where to cut: any axis size will do
        axis = sh._get_const(dim, "i", "dim") % rank_of("aten::split", self)
        return tensor_list(g, _split(g, self, axis, items))
    step = sh._maybe_get_const(split_size, "i")
    if _size_known_only_at_run_time(g, self, dim) and g.opset >= 11:
        # A scripted model's dynamic axis: as many pieces as the run gives, a Sequence.
        return g.op("SplitToSequence", self, scalar_int(g, step),
                    axis_i=sh._get_const(dim, "i", "dim") % rank_of("aten::split", self)
                    ).setType(Type("ListType", elem=Type.tensor(self.type().dtype(),
                                                                [None] * self.type().dim())))
    if isinstance(step, Value):
        return _split_by_run_time_step(g, self, step, dim)
    axis, size = _split_dim(g, "aten::split", self, dim)
    count = max(-(-size // step), 1)
    g.uses_traced_size(self, axis, f"aten::split's number of pieces ({count})")
    if count == 1 and (g.sizes_may_vary
                       or (self.type().varyingSizes() or [None] * (axis + 1))[axis] is None):
        return tensor_list(g, [_first_piece(g, self, axis, step)])
    return tensor_list(g, _split(g, self, axis, _pieces(
        g, _run_time_size(g, self, axis, size), step, count), traced=_pieces(
        g, size, step, count)))


pack.alias(split, "aten::unsafe_split", since=7)


def _first_piece(g, x: Value, axis: int, step: int) -> Value:
    """``x``'s first ``step`` along ``axis`` (the only piece at the traced size): eager's
    first piece at any size."""
    if g.opset >= 10:
        out = g.op("Slice", x, ints(g, [0]), ints(g, [step]), ints(g, [axis]))
    else:
        out = g.op("Slice", x, starts_i=[0], ends_i=[step], axes_i=[axis])
    sizes = list(x.type().symbolic_sizes() or [])
    if sizes:
        sizes[axis] = None
    return out.setType(Type.tensor(x.type().dtype(), sizes or None))


def _split_by_run_time_step(g, x: Value, step: Value, dim: Value) -> Value:
    """``split(step)`` for a ``step`` computed at run time (torch.export's ``ceil(n / k)``
    of a chunk along a dynamic axis): as many pieces as the graph unpacks, of ``step``
    each and the last what remains, read at run time (opset 10: Slices)."""
    count = _unpacked_piece_count(g)
    if count is None:
        sh._unimplemented("aten::split", "a split size computed at run time whose pieces "
                          "the graph does not unpack")
    if g.opset < 10:
        sh._onnx_opset_unsupported_detailed("aten::split", g.opset, 10,
                                            "a split size computed at run time")
    axis = sh._get_const(dim, "i", "dim") % rank_of("aten::split", x)
    g.uses_traced_size(x, axis, f"aten::split's number of pieces ({count})")
    step = sh.cast_to(g, step, torch.int64)
    return tensor_list(g, _split(g, x, axis, _pieces(g, dim_size(g, x, axis), step, count)))


@pack.symbolic("aten::split_with_sizes", since=7)
def split_with_sizes(g, self: Value, split_sizes: Value, dim: Value | None = None) -> Value:
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]
    unsafe_split_with_sizes(Tensor self, SymInt[] split_sizes, int dim=0) -> Tensor[]

    Split; sizes computed at run time (``w.split([E, 2 * E])`` in nn.MultiheadAttention)
    need Split's sizes input (13) or Slices (10)."""
    axis = (0 if dim is None else sh._get_const(dim, "i", "dim")) % rank_of(
        "aten::split_with_sizes", self)  # the sizes say where to cut: any axis size will do
    sizes = int_list(split_sizes)
    if sizes is None:
        sh._unimplemented("aten::split_with_sizes", "split sizes that are not a list of ints")
    return tensor_list(g, _split(g, self, axis, sizes))


pack.alias(split_with_sizes, "aten::unsafe_split_with_sizes", since=7)


@pack.symbolic("aten::chunk", since=7)
def chunk(g, self: Value, chunks: Value, dim: Value | None = None) -> Value:
    """chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]
    unsafe_chunk(Tensor self, int chunks, int dim=0) -> Tensor[]

    ``chunks`` pieces of ``min(step, max(size - i * step, 0))`` with ``step = ceil(size /
    chunks)``, the size read at run time (from opset 10): each is eager's piece ``i`` at any
    size, empty where eager has fewer pieces; the traced number of them are used. Along an
    axis whose size neither the graph nor a trace knows (a scripted model's dynamic axis),
    or for a ``chunks`` computed at run time (a scripted model's int argument), the number
    of pieces varies too: a Sequence of them."""
    dim = dim if dim is not None else g.python_constant(0)
    if not chunks.is_const or _size_known_only_at_run_time(g, self, dim):
        return _chunk_sequence(g, self, chunks if not chunks.is_const else chunks.const,
                               sh._get_const(dim, "i", "dim") % rank_of("aten::chunk", self))
    axis, size = _split_dim(g, "aten::chunk", self, dim)
    chunks = sh._get_const(chunks, "i", "chunks")
    step = -(-size // chunks)
    count = -(-size // step) if size else chunks  # an empty axis gives `chunks` empty pieces
    if count != chunks:  # as many pieces as asked for holds at (nearly) any size: no warning
        g.uses_traced_size(self, axis, f"aten::chunk's number of pieces ({count})")
    traced = _clamped_pieces(g, size, step, chunks)
    run_size = _run_time_size(g, self, axis, size)
    run_step = _int_op(g, "Div", _int_op(g, "Add", run_size, chunks - 1), chunks)
    pieces = _split(g, self, axis, _clamped_pieces(g, run_size, run_step, chunks),
                    traced=traced)
    return tensor_list(g, pieces[:count])


def _clamped_pieces(g, size: int | Value, step: int | Value,
                    count: int) -> list[int | Value]:
    """``count`` piece sizes ``min(step, max(size - i * step, 0))``: they add up to ``size``
    whenever ``count * step >= size``."""
    return [_int_op(g, "Min", step, _int_op(g, "Max", _int_op(
        g, "Sub", size, _int_op(g, "Mul", step, i)), 0)) for i in range(count)]


def _size_known_only_at_run_time(g, x: Value, dim: Value) -> bool:
    """Whether ``x``'s ``dim`` has no size in its type nor in the traced graph's (a scripted
    graph's dynamic axis), where an op returns a list (so the count of pieces may vary)."""
    rank = x.type().dim()
    if rank is None or g.original_node is None \
            or g.original_node.output().type().kind() != "ListType":
        return False
    axis = sh._get_const(dim, "i", "dim") % rank
    sizes = sh.traced_sizes(g.original_node.inputsAt(0))
    return x.type().varyingSizes()[axis] is None and (
        sizes is None or len(sizes) != rank or sizes[axis] is None)


def _chunk_sequence(g, x: Value, chunks: int | Value, axis: int) -> Value:
    """``x.chunk(chunks, axis)`` as a Sequence of pieces of ceil(size / chunks) (opset 11)."""
    if g.opset < 11:
        sh._onnx_opset_unsupported_detailed(
            "aten::chunk", g.opset, 11, "chunks of an axis whose size only the run knows, or "
            "a number of chunks only the run knows (a list of as many pieces as they give), "
            "need SplitToSequence")
    rounded_up = _int_op(g, "Add", dim_size(g, x, axis), _int_op(g, "Sub", chunks, 1))
    step = _int_op(g, "Div", rounded_up, chunks)
    return g.op("SplitToSequence", x, step, axis_i=axis).setType(
        Type("ListType", elem=Type.tensor(x.type().dtype(), [None] * x.type().dim())))


pack.alias(chunk, "aten::unsafe_chunk", since=7)


@pack.symbolic("aten::tensor_split", since=7)
def tensor_split(g, self: Value, sections: Value, dim: Value | None = None) -> Value:
    """tensor_split.sections(Tensor(a -> *) self, SymInt sections, int dim=0) -> Tensor(a)[]
    tensor_split.indices(Tensor(a -> *) self, SymInt[] indices, int dim=0) -> Tensor(a)[]
    tensor_split.tensor_indices_or_sections(Tensor(a -> *) self, Tensor tensor_indices_or_sections, int dim=0) -> Tensor(a)[]

    ``tensor_split(n)`` (the first size % n pieces one larger, sizes read at run time) or
    at given indices. A count computed at run time gives as many pieces as the model
    unpacks, else (a scripted model's list) a Sequence of them."""
    dim = dim if dim is not None else g.python_constant(0)
    if sh._is_tensor(sections) and not sections.is_const and sections.type().dim() == 1:
        axis = sh._get_const(dim, "i", "dim") % rank_of("aten::tensor_split", self)
        return tensor_list(g, _split_at_run_time_indices(g, self, axis, sections))
    listed = sh._is_list(sections) or sh._is_packed_list(sections)
    count = None if listed else sh._maybe_get_const(sections, "i")
    if isinstance(count, Value):
        unpacked = _unpacked_piece_count(g)
        if unpacked is None:
            axis = sh._get_const(dim, "i", "dim") % rank_of("aten::tensor_split", self)
            return _tensor_split_sequence(g, self, count, axis)
        count = unpacked
    axis, size = _split_dim(g, "aten::tensor_split", self, dim)
    if listed:
        bounds = [0] + [min(max(i if i >= 0 else i + size, 0), size)
                        for i in sh._get_const(sections, "is", "indices")] + [size]
        sizes = [max(b - a, 0) for a, b in zip(bounds, bounds[1:])]
    else:
        # Piece i holds ceil((size - i) / count) elements.
        traced = [(size + count - 1 - i) // count for i in range(count)]
        run_size = _run_time_size(g, self, axis, size)
        return tensor_list(g, _split(g, self, axis, [
            _int_op(g, "Div", _int_op(g, "Add", run_size, count - 1 - i), count)
            for i in range(count)], traced=traced))
    return tensor_list(g, _split(g, self, axis, sizes))


def _split_at_run_time_indices(g, x: Value, axis: int, indices: Value) -> list[Value]:
    """``x[:i0], x[i0:i1], ..., x[ik:]`` along ``axis`` for a 1-D tensor of indices of a
    static length: Slices clamp and count from the end as Python does (opset 10)."""
    length = indices.type().varyingSizes()
    if length is None or length[0] is None:
        sh._unimplemented("aten::tensor_split", "a tensor of indices of unknown length")
    if g.opset < 10:
        sh._onnx_opset_unsupported_detailed("aten::tensor_split", g.opset, 10,
                                            "indices given as a tensor")
    bounds = g.op("Concat", ints(g, [0]), sh.cast_to(g, indices, torch.int64),
                  ints(g, [INT64_MAX]), axis_i=0)
    ends = [g.op("Slice", bounds, ints(g, [i]), ints(g, [i + 1]), ints(g, [0]))
            for i in range(length[0] + 2)]
    return [g.op("Slice", x, start, end, ints(g, [axis]))
            for start, end in zip(ends, ends[1:])]


def _unpacked_piece_count(g) -> int | None:
    """How many pieces the graph unpacks from this node's list (a trace always does)."""
    for use in g.original_node.output().uses():
        if use.user.kind() == "prim::ListUnpack":
            return use.user.outputsSize()
    return None


def _tensor_split_sequence(g, x: Value, count: Value, axis: int) -> Value:
    """``tensor_split(x, n)`` for an ``n`` only the run knows: a Sequence of ``n`` pieces,
    piece ``i`` of ``(size + n - 1 - i) // n`` elements (opset 11, SplitToSequence)."""
    if g.opset < 11:
        sh._onnx_opset_unsupported_detailed(
            "aten::tensor_split", g.opset, 11, "a number of pieces computed at run time (a "
            "list of that many pieces) needs SplitToSequence")
    count = sh.cast_to(g, count, torch.int64)
    zero, one = g.constant(torch.tensor(0)), g.constant(torch.tensor(1))
    last = g.op("Add", dim_size(g, x, axis), g.op("Sub", count, one))
    sizes = g.op("Div", g.op("Sub", last, g.op("Range", zero, count, one)), count)
    return g.op("SplitToSequence", x, sizes, axis_i=axis).setType(
        Type("ListType", elem=Type.tensor(x.type().dtype(), [None] * x.type().dim())))


@pack.symbolic("aten::unbind", since=7)
def unbind(g, self: Value, dim: Value | None = None) -> Value:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]

    Split into size-1 pieces and squeeze each; along an axis whose size only the run knows
    (a scripted model's dynamic axis), a Sequence of them (SplitToSequence, opset 11)."""
    dim = dim if dim is not None else g.python_constant(0)
    rank = rank_of("aten::unbind", self)
    axis = sh._get_const(dim, "i", "dim") % rank
    traced = sh.traced_sizes(g.original_node.inputsAt(0)) or []
    traced = traced if len(traced) == rank else [None] * rank
    if (self.type().varyingSizes() or [None] * rank)[axis] is None and traced[axis] is None:
        lists.require_sequences(g, "aten::unbind")
        return g.op("SplitToSequence", self, axis_i=axis, keepdims_i=0).setType(Type(
            "ListType", elem=Type.tensor(self.type().dtype(), [None] * (rank - 1))))
    axis, size = _split_dim(g, "aten::unbind", self, dim)
    g.uses_traced_size(self, axis, f"aten::unbind's number of pieces ({size})")
    pieces = _split(g, self, axis, [1] * size, size)
    return tensor_list(g, [sh._squeeze_helper(g, p, [axis]) for p in pieces])


# -- no-ops on real tensors, shapes as tensors --------------------------------------
for _name in ("alias", "lift"):
    pack.symbolic(f"aten::{_name}", since=7, accepts_complex=True)(_identity(_name))


def _real_identity(name: str):
    def symbolic(g, self: Value) -> Value:
        if self.type().dtype() is not None and self.type().dtype().is_complex:
            sh._unimplemented(f"aten::{name}", "a complex input: ONNX has no complex tensors")
        return self
    symbolic.__name__ = name
    signature = ("(Tensor self) -> Tensor" if name == "conj_physical"
                 else "(Tensor(a) self) -> Tensor(a)")
    symbolic.__doc__ = f"{name}{signature}\n\nThe tensor itself for real dtypes."
    return symbolic


pack.symbolic("aten::conj_physical", since=7)(_real_identity("conj_physical"))
# A graph value never carries a lazy conjugate or negative bit (no symbolic makes one):
# resolving them changes nothing, complex pairs included.
for _name in ("resolve_conj", "resolve_neg"):
    pack.symbolic(f"aten::{_name}", since=7, accepts_complex=True)(_identity(_name))


@pack.symbolic("aten::_shape_as_tensor", since=7)
def _shape_as_tensor(g, self: Value) -> Value:
    """_shape_as_tensor(Tensor self) -> Tensor"""
    return shape_of(g, self)


@pack.symbolic("aten::_reshape_from_tensor", since=7)
def _reshape_from_tensor(g, self: Value, shape: Value) -> Value:
    """_reshape_from_tensor(Tensor self, Tensor shape) -> Tensor"""
    return g.op("Reshape", self, _shape_input(g, shape))


@pack.symbolic("aten::broadcast_to", since=8)
def broadcast_to(g, self: Value, size: Value) -> Value:
    """broadcast_to(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    return expand(g, self, size)


def _atleast(rank: int):
    def symbolic(g, self: Value) -> Value:
        if not sh._is_tensor(self):
            return tensor_list(g, [symbolic(g, t) for t in sh._unpack_list(self)])
        have = rank_of(f"aten::atleast_{rank}d", self)
        if have >= rank:
            return self
        # 0-d -> [1, ...]; 1-d (n) -> (1, n) and (1, n, 1); 2-d (m, n) -> (m, n, 1)
        axes = {(0, 1): [0], (0, 2): [0, 1], (0, 3): [0, 1, 2], (1, 2): [0], (1, 3): [0, 2],
                (2, 3): [2]}[have, rank]
        return sh._unsqueeze_helper(g, self, axes)
    symbolic.__name__ = f"atleast_{rank}d"
    symbolic.__doc__ = (f"atleast_{rank}d(Tensor self) -> Tensor\n"
                        f"atleast_{rank}d.Sequence(Tensor[] tensors) -> Tensor[]\n\n"
                        f"Unsqueeze to at least {rank} dims where torch adds them (a list: each).")
    return symbolic


for _rank in (1, 2, 3):
    pack.symbolic(f"aten::atleast_{_rank}d", since=7)(_atleast(_rank))


@pack.symbolic("aten::meshgrid", since=8)
def meshgrid(g, tensors: Value, indexing: Value | None = None) -> Value:
    """meshgrid(Tensor[] tensors) -> Tensor[]
    meshgrid.indexing(Tensor[] tensors, *, str indexing) -> Tensor[]

    Each 1-D tensor reshaped onto its own axis and Expanded to the grid (``'xy'``: the
    first two axes swapped)."""
    mode = "ij" if indexing is None or sh._is_none(indexing) else \
        sh._get_const(indexing, "s", "indexing")
    items = [sh._reshape_helper(g, t, [-1]) for t in sh._unpack_list(tensors)]
    axes = list(range(len(items)))
    if mode == "xy" and len(items) > 1:
        axes[0], axes[1] = 1, 0
    order = sorted(range(len(items)), key=lambda i: axes[i])
    grid = g.op("Concat", *[shape_of(g, items[i]) for i in order], axis_i=0)
    outputs = []
    for item, axis in zip(items, axes):
        spread = [1] * len(items)
        spread[axis] = -1
        outputs.append(g.op("Expand", sh._reshape_helper(g, item, spread), grid))
    return tensor_list(g, outputs)


@pack.symbolic("aten::as_strided", since=7)
def as_strided(g, self: Value, size: Value, stride: Value,
               storage_offset: Value | None = None) -> Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    Static sizes and strides over the contiguous input: a Gather of the flattened input at
    the element offsets, computed at export time."""
    sizes, strides = int_list(size), int_list(stride)
    offset = 0 if storage_offset is None or sh._is_none(storage_offset) else \
        sh._maybe_get_const(storage_offset, "i")
    if sizes is None or strides is None or any(isinstance(v, Value)
                                               for v in [*sizes, *strides, offset]):
        sh._unimplemented("aten::as_strided", "sizes, strides or offset computed at run time")
    positions = torch.full(sizes, offset, dtype=torch.int64)
    for axis, (length, step) in enumerate(zip(sizes, strides)):
        spread = [1] * len(sizes)
        spread[axis] = length
        positions = positions + (torch.arange(length) * step).reshape(spread)
    return g.op("Gather", sh._reshape_helper(g, self, [-1]), g.constant(positions), axis_i=0)
