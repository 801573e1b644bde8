"""Reductions: sum, mean, prod, max/min, arg*, statistics, cumulative ops, sorting, unique."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value
from oxport.opsets.common import scalar_as_vector
from oxport.types import JitScalarType

pack = OpPack("oxport.reduction", cases="oxport.opsets.cases.reduction")

#: dtypes the Max/Min/ArgMax/Unique kernels of ONNX Runtime may reject: reduce them as int32.
_NARROW = (torch.bool, torch.uint8, torch.int8, torch.int16)


# -- argument helpers ---------------------------------------------------------------
def _static(value: Value, desc: str, op: str, what: str):
    """A constant argument converted by ``desc``; declines when it is computed at run time."""
    const = sh._maybe_get_const(value, desc)
    if isinstance(const, Value):
        sh._unimplemented(op, f"{what} computed at run time")
    return const


def _axes(value: Value | None, op: str) -> list[int] | None:
    """A ``dim`` argument (int, list or None) as axes; None (or []) means every axis."""
    if value is None or sh._is_none(value):
        return None
    return _static(value, "is", op, "dim") or None


def _dtype(value: Value | None) -> torch.dtype | None:
    """A ``dtype=`` argument as a torch.dtype (None when absent)."""
    if value is None or sh._is_none(value):
        return None
    return JitScalarType(_static(value, "i", "dtype", "dtype")).dtype()


def _out_dtype(g, index: int = 0) -> torch.dtype | None:
    """The dtype TorchScript recorded for the node's output ``index``."""
    node = g.original_node
    if node is None or node.outputsSize() <= index:
        return None
    out_type = node.outputsAt(index).type()
    return out_type.dtype() if out_type.kind() == "TensorType" else None


def _is_integral(value: Value) -> bool:
    dtype = value.type().dtype()
    return dtype is not None and not dtype.is_floating_point and not dtype.is_complex


def _positive(axes: Sequence[int], rank: int | None, op: str) -> list[int]:
    if any(a < 0 for a in axes) and rank is None:
        sh._unimplemented(op, "a negative dim on an input of unknown rank")
    return [a % rank if a < 0 else a for a in axes] if rank else list(axes)


def _dim_keepdim_dtype(args: Sequence[Value]) -> tuple[Value | None, Value | bool, Value | None]:
    """``(dtype)`` or ``(dim, keepdim, dtype)`` -- the two overloads of sum/mean/prod."""
    if len(args) <= 1:
        return None, False, args[0] if args else None
    return args[0], args[1], args[2] if len(args) > 2 else None


def _reduce(g, op_type: str, x: Value, axes: list[int] | None, keepdim: bool) -> Value:
    return sh.reduce_helper(g, op_type, x, axes, keepdims_i=int(keepdim))


def _narrow_safe(g, x: Value) -> tuple[Value, torch.dtype | None]:
    """``x`` as int32 if ORT's Max/Min kernels reject its dtype, and the dtype to restore."""
    dtype = x.type().dtype()
    if dtype in _NARROW:
        return sh.cast_to(g, x, torch.int32), dtype
    return x, None


def _restore(g, value: Value, dtype: torch.dtype | None) -> Value:
    return value if dtype is None else sh.cast_to(g, value, dtype)


def _count(g, x: Value, axes: list[int] | None, dtype: torch.dtype) -> Value:
    """How many elements the reduction over ``axes`` combines, as a 0-d ``dtype`` tensor."""
    shape = g.op("Shape", x)
    if axes is not None:
        index = torch.tensor(_positive(axes, x.type().dim(), "reduction"), dtype=torch.int64)
        shape = g.op("Gather", shape, g.constant(index), axis_i=0)
    count = g.op("ReduceProd", shape, keepdims_i=0).setType(Type.tensor(torch.int64, ()))
    return sh.cast_to(g, count, dtype)


# -- sum / mean / prod ----------------------------------------------------------------
def _accumulate_dtype(x: Value, dtype: torch.dtype | None) -> torch.dtype | None:
    """sum/prod/cumsum: an explicit dtype, else int64 for integers and bools, else x's own."""
    if dtype is not None:
        return dtype
    return torch.int64 if _is_integral(x) else x.type().dtype()


def _cast_opt(g, x: Value, dtype: torch.dtype | None) -> Value:
    return x if dtype is None else sh.cast_to(g, x, dtype)


@pack.symbolic("aten::sum", since=7)
@scalar_as_vector
def aten_sum(g, self: Value, *args: Value) -> Value:
    """sum(Tensor self, *, ScalarType? dtype=None) -> Tensor
    sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor

    ``sum(self, dtype)`` / ``sum(self, dim, keepdim, dtype)``: ReduceSum, integers in int64."""
    if not sh._is_tensor(self):
        sh._unimplemented("aten::sum", "a sum over a Python list")
    dim, keepdim, dtype = _dim_keepdim_dtype(args)
    x = _cast_opt(g, self, _accumulate_dtype(self, _dtype(dtype)))
    return _reduce(g, "ReduceSum", x, _axes(dim, "aten::sum"),
                   _static(keepdim, "b", "sum", "keepdim"))


@pack.symbolic("aten::mean", since=7)
@scalar_as_vector
def mean(g, self: Value, *args: Value) -> Value:
    """mean(Tensor self, *, ScalarType? dtype=None) -> Tensor
    mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor

    ``mean(self, dtype)`` / ``mean(self, dim, keepdim, dtype)``: ReduceMean."""
    dim, keepdim, dtype = _dim_keepdim_dtype(args)
    x = _cast_opt(g, self, _dtype(dtype))
    return _reduce(g, "ReduceMean", x, _axes(dim, "aten::mean"),
                   _static(keepdim, "b", "mean", "keepdim"))


@pack.symbolic("aten::prod", since=7)
@scalar_as_vector
def prod(g, self: Value, *args: Value) -> Value:
    """prod(Tensor self, *, ScalarType? dtype=None) -> Tensor
    prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor

    ``prod(self, dtype)`` / ``prod(self, dim, keepdim, dtype)`` (one dim): ReduceProd."""
    dim, keepdim, dtype = _dim_keepdim_dtype(args)
    x = _cast_opt(g, self, _accumulate_dtype(self, _dtype(dtype)))
    return _reduce(g, "ReduceProd", x, _axes(dim, "aten::prod"),
                   _static(keepdim, "b", "prod", "keepdim"))


# -- max / min family ---------------------------------------------------------------------
def _extreme(g, op_type: str, x: Value, axes: list[int] | None, keepdim: bool) -> Value:
    safe, dtype = _narrow_safe(g, x)
    return _restore(g, _reduce(g, op_type, safe, axes, keepdim), dtype)


def _amax_amin(op_type: str, name: str):
    def symbolic(g, self: Value, dim: Value | None = None, keepdim: Value | None = None) -> Value:
        keep = False if keepdim is None else _static(keepdim, "b", f"aten::{name}", "keepdim")
        return _extreme(g, op_type, self, _axes(dim, f"aten::{name}"), keep)
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor\n\n"
                        f"{op_type} (all dims for []).")
    return symbolic


pack.symbolic("aten::amax", since=7)(scalar_as_vector(_amax_amin("ReduceMax", "amax")))
pack.symbolic("aten::amin", since=7)(scalar_as_vector(_amax_amin("ReduceMin", "amin")))


@pack.symbolic("aten::aminmax", since=7)
def aminmax(g, self: Value, dim: Value | None = None,
            keepdim: Value | None = None) -> tuple[Value, Value]:
    """aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)

    ``(amin, amax)`` over one dim, or over all of them."""
    axes = _axes(dim, "aten::aminmax")
    keep = False if keepdim is None else _static(keepdim, "b", "aten::aminmax", "keepdim")
    return (_extreme(g, "ReduceMin", self, axes, keep),
            _extreme(g, "ReduceMax", self, axes, keep))


def _max_min(reduce_op: str, arg_op: str, name: str):
    def symbolic(g, self: Value, *args: Value) -> Value | tuple[Value, Value]:
        if not args:
            return _extreme(g, reduce_op, self, None, False)
        if len(args) == 1:
            sh._unimplemented(f"aten::{name}", f"the elementwise overload of two tensors is "
                              f"aten::{name}.other, converted by its own symbolic")
        dim = _static(args[0], "i", f"aten::{name}", "dim")
        keepdim = _static(args[1], "b", f"aten::{name}", "keepdim")
        values = _extreme(g, reduce_op, self, [dim], keepdim)
        safe, _ = _narrow_safe(g, self)
        return values, g.op(arg_op, safe, axis_i=dim, keepdims_i=int(keepdim))
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self) -> Tensor\n"
                        f"{name}.dim(Tensor self, int dim, bool keepdim=False) "
                        "-> (Tensor values, Tensor indices)\n\n"
                        f"{reduce_op} over all elements, or along a dim returning (values, "
                        f"indices); ``{name}.other`` is elementwise, served elsewhere.")
    return symbolic


pack.symbolic("aten::max", since=7)(scalar_as_vector(_max_min("ReduceMax", "ArgMax", "max")))
pack.symbolic("aten::min", since=7)(scalar_as_vector(_max_min("ReduceMin", "ArgMin", "min")))


def _arg_extreme(op_type: str, name: str):
    @sh.parse_args("v", "v", "b")
    def symbolic(g, self: Value, dim: Value, keepdim: bool) -> Value:
        x, _ = _narrow_safe(g, self)
        if sh._is_none(dim):
            flat = g.op(op_type, sh._reshape_helper(g, x, [-1]), axis_i=0, keepdims_i=0)
            rank = self.type().dim()
            if not keepdim:
                return flat
            if rank is None:
                sh._unimplemented(f"aten::{name}", "keepdim=True without dim on an unknown rank")
            return sh._reshape_helper(g, flat, [1] * rank)
        axis = _static(dim, "i", f"aten::{name}", "dim")
        return g.op(op_type, x, axis_i=axis, keepdims_i=int(keepdim))
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, int? dim=None, bool keepdim=False) -> Tensor\n\n"
                        f"{op_type} (first occurrence).")
    return symbolic


pack.symbolic("aten::argmax", since=7)(scalar_as_vector(_arg_extreme("ArgMax", "argmax")))
pack.symbolic("aten::argmin", since=7)(scalar_as_vector(_arg_extreme("ArgMin", "argmin")))


# -- statistics ---------------------------------------------------------------------
def _variance_args(args: Sequence[Value], op: str) -> tuple[list[int] | None, float, bool]:
    """(axes, correction, keepdim) from ``(unbiased)``, ``(dim, unbiased, keepdim)`` or
    ``(dim, correction, keepdim)``."""
    if len(args) == 1:
        return None, float(_static(args[0], "b", op, "unbiased")), False
    dim, middle, keepdim = args[:3]
    if sh._is_none(middle):
        correction = 1.0
    else:
        const = middle.const if middle.is_const else None
        if const is None:
            sh._unimplemented(op, "a correction computed at run time")
        correction = float(const)
    return _axes(dim, op), correction, _static(keepdim, "b", op, "keepdim")


def _variance(g, x: Value, axes: list[int] | None, correction: float, keepdim: bool) -> Value:
    mean_kept = _reduce(g, "ReduceMean", x, axes, True)
    diff = g.op("Sub", x, mean_kept)
    var = _reduce(g, "ReduceMean", g.op("Mul", diff, diff), axes, keepdim)
    if correction == 0:
        return var
    dtype = x.type().dtype() or torch.float32
    count = _count(g, x, axes, dtype)
    fewer = g.op("Sub", count, g.constant(torch.tensor(correction, dtype=dtype)))
    return g.op("Mul", var, g.op("Div", count, fewer))


@pack.symbolic("aten::var", since=7)
@scalar_as_vector
def var(g, self: Value, *args: Value) -> Value:
    """var(Tensor self, bool unbiased=True) -> Tensor
    var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor
    var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor

    Variance with Bessel's (or any) correction over some or all dims."""
    axes, correction, keepdim = _variance_args(args, "aten::var")
    return _variance(g, self, axes, correction, keepdim)


@pack.symbolic("aten::std", since=7)
@scalar_as_vector
def std(g, self: Value, *args: Value) -> Value:
    """std(Tensor self, bool unbiased=True) -> Tensor
    std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor
    std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor

    Standard deviation: Sqrt of :func:`var`."""
    axes, correction, keepdim = _variance_args(args, "aten::std")
    return g.op("Sqrt", _variance(g, self, axes, correction, keepdim))


@pack.symbolic("aten::var_mean", since=7)
@scalar_as_vector
def var_mean(g, self: Value, *args: Value) -> tuple[Value, Value]:
    """var_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)
    var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)
    var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)
    """
    axes, correction, keepdim = _variance_args(args, "aten::var_mean")
    return (_variance(g, self, axes, correction, keepdim),
            _reduce(g, "ReduceMean", self, axes, keepdim))


@pack.symbolic("aten::std_mean", since=7)
@scalar_as_vector
def std_mean(g, self: Value, *args: Value) -> tuple[Value, Value]:
    """std_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)
    std_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)
    std_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)
    """
    axes, correction, keepdim = _variance_args(args, "aten::std_mean")
    return (g.op("Sqrt", _variance(g, self, axes, correction, keepdim)),
            _reduce(g, "ReduceMean", self, axes, keepdim))


@pack.symbolic("aten::logsumexp", since=7)
@scalar_as_vector
@sh.parse_args("v", "is", "b")
def logsumexp(g, self: Value, dim: list[int], keepdim: bool) -> Value:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor

    ReduceLogSumExp; integer inputs are computed in the float result dtype."""
    x = self if not _is_integral(self) else sh.cast_to(g, self, _out_dtype(g) or torch.float32)
    return _reduce(g, "ReduceLogSumExp", x, dim or None, keepdim)


# -- logical reductions and counting --------------------------------------------------------
def _all_any(op_type: str, name: str):
    def symbolic(g, self: Value, dim: Value | None = None, keepdim: Value | None = None) -> Value:
        axes = _axes(dim, f"aten::{name}")
        keep = False if keepdim is None else _static(keepdim, "b", f"aten::{name}", "keepdim")
        as_int = sh.cast_to(g, sh.cast_to(g, self, torch.bool), torch.int32)
        out = g.op("Cast", _reduce(g, op_type, as_int, axes, keep),
                   to_i=JitScalarType.BOOL.onnx_type()).setType(Type.tensor(torch.bool))
        return sh.cast_to(g, out, torch.uint8) if _out_dtype(g) == torch.uint8 else out
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self) -> Tensor\n"
                        f"{name}.dim(Tensor self, int dim, bool keepdim=False) -> Tensor\n"
                        f"{name}.dims(Tensor self, int[]? dim=None, bool keepdim=False) "
                        f"-> Tensor\n\n{op_type} over the tensor cast to bool.")
    return symbolic


pack.symbolic("aten::all", since=7)(scalar_as_vector(_all_any("ReduceMin", "all")))
pack.symbolic("aten::any", since=7)(scalar_as_vector(_all_any("ReduceMax", "any")))


@pack.symbolic("aten::count_nonzero", since=7)
def count_nonzero(g, self: Value, dim: Value | None = None) -> Value:
    """count_nonzero(Tensor self, int? dim=None) -> Tensor
    count_nonzero.dim_IntList(Tensor self, int[] dim) -> Tensor

    ReduceSum of the tensor cast to bool, then int64."""
    ones = sh.cast_to(g, sh.cast_to(g, self, torch.bool), torch.int64)
    return _reduce(g, "ReduceSum", ones, _axes(dim, "aten::count_nonzero"), False)


# -- cumulative ops -----------------------------------------------------------------------
def _cumulative_dtype(g, self: Value, dtype: Value | None) -> tuple[Value, torch.dtype | None]:
    """Cast for CumSum-like ops: int64 for integers, float32 for half types (restored after)."""
    target = _accumulate_dtype(self, _dtype(dtype))
    if target in (torch.float16, torch.bfloat16):
        return sh.cast_to(g, self, torch.float32), target
    return _cast_opt(g, self, target), None


@pack.symbolic("aten::cumsum", since=11)
@scalar_as_vector
@sh.parse_args("v", "i", "v")
def cumsum(g, self: Value, dim: int, dtype: Value | None = None) -> Value:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    x, restore = _cumulative_dtype(g, self, dtype)
    out = g.op("CumSum", x, g.constant(torch.tensor(dim, dtype=torch.int64)))
    return _restore(g, out, restore)


@pack.symbolic("aten::cumprod", since=11)
@scalar_as_vector
@sh.parse_args("v", "i", "v")
def cumprod(g, self: Value, dim: int, dtype: Value | None = None) -> Value:
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor

    No ONNX op: ReduceProd over a lower-triangular Where of the input (O(n^2) along dim)."""
    x, restore = _cumulative_dtype(g, self, dtype)
    rank = self.type().dim()
    if rank is None or rank == 0:
        sh._unimplemented("aten::cumprod", "an input of unknown rank or a 0-d input")
    axis = dim % rank
    size = sh._squeeze_helper(g, g.op("Gather", g.op("Shape", x), g.constant(
        torch.tensor([axis], dtype=torch.int64)), axis_i=0), [0])
    steps = g.op("Range", g.constant(torch.tensor(0)), size, g.constant(torch.tensor(1)))
    later = g.op("Greater", sh._unsqueeze_helper(g, steps, [0]),
                 sh._unsqueeze_helper(g, steps, [1]))
    keep = g.op("Not", later)  # keep[i, j] = j <= i
    if rank - 1 - axis:
        keep = sh._unsqueeze_helper(g, keep, list(range(2, rank + 1 - axis)))
    one = g.constant(torch.tensor(1, dtype=x.type().dtype() or torch.float32))
    picked = g.op("Where", keep, sh._unsqueeze_helper(g, x, [axis]), one)
    return _restore(g, _reduce(g, "ReduceProd", picked, [axis + 1], False), restore)


@pack.symbolic("aten::diff", since=7)
@sh.parse_args("v", "i", "i", "v", "v")
def diff(g, self: Value, n: int, dim: int, prepend: Value, append: Value) -> Value:
    """diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor

    Concat the prepend/append, then ``n`` times Sub (Xor for bool) of shifted slices."""
    rank = sh._get_tensor_rank(self)
    if rank is None:
        sh._unimplemented("aten::diff", "an input of unknown rank")
    axis = dim % rank
    parts = [v for v in (prepend, self, append) if v is self or not sh._is_none(v)]
    x = g.op("Concat", *parts, axis_i=axis) if len(parts) > 1 else self
    subtract = "Xor" if self.type().dtype() == torch.bool else "Sub"
    for _ in range(n):
        later = sh._slice_helper(g, x, [axis], [1], [sys.maxsize])
        earlier = sh._slice_helper(g, x, [axis], [0], [-1])
        x = g.op(subtract, later, earlier)
    return x


# -- sorting ------------------------------------------------------------------------------
def _long1(value: Value) -> Value:
    """Type an int64 1-D one-element intermediate so later helpers need no Cast."""
    return value.setType(Type.tensor(torch.int64, [1]))


def _k_input(g, k: int | Value) -> Value:
    """TopK's ``k`` input: a 1-D int64 tensor of one element."""
    if isinstance(k, int):
        return g.constant(torch.tensor([k], dtype=torch.int64))
    if k.type().dtype() == torch.int64 and k.type().dim() == 1:
        return k
    return sh._reshape_helper(g, sh.cast_to(g, k, torch.int64), [1])


def _topk(g, x: Value, k: int | Value, axis: int, largest: bool,
          sorted_: bool = True) -> tuple[Value, Value]:
    """TopK as each opset spells it: k an attribute before 10, an input from 10, and
    ``largest``/``sorted`` attributes from 11 (below, smallest-k is TopK of the negation)."""
    op = "TopK"
    if g.opset >= 11:
        return g.op(op, x, _k_input(g, k), axis_i=axis, largest_i=int(largest),
                    sorted_i=int(sorted_), outputs=2)
    if _is_integral(x):
        sh._onnx_opset_unsupported_detailed("TopK", g.opset, 11, "TopK of integer tensors")
    source = x if largest else g.op("Neg", x)
    if g.opset >= 10:
        values, indices = g.op(op, source, _k_input(g, k), axis_i=axis, outputs=2)
    elif isinstance(k, int):
        values, indices = g.op(op, source, k_i=k, axis_i=axis, outputs=2)
    else:
        sh._onnx_opset_unsupported_detailed("TopK", g.opset, 10, "k computed at run time")
    return (values if largest else g.op("Neg", values)), indices


def _dim_size(g, x: Value, axis: int) -> int | Value:
    """The size of ``x`` along ``axis``: a 1-D Shape slice from opset 10, else a static int."""
    if g.opset >= 10:
        index = g.constant(torch.tensor([axis], dtype=torch.int64))
        rank = x.type().dim()
        if axis < 0 and rank is not None:
            index = g.constant(torch.tensor([axis % rank], dtype=torch.int64))
        return _long1(g.op("Gather", g.op("Shape", x), index, axis_i=0))
    size = sh._get_tensor_dim_size(x, axis)
    if size is None:
        sh._onnx_opset_unsupported_detailed("sort", g.opset, 10, "a dimension of unknown size")
    return size


@sh.parse_args("v", "v", "i", "b", "b")
def topk(g, self: Value, k: Value, dim: int, largest: bool, sorted: bool) -> tuple[Value, Value]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)

    TopK; registered at 7, 10 and 11 where ONNX changed how k and largest are given."""
    return _topk(g, self, sh._maybe_get_const(k, "i"), dim, largest, sorted)


def _sort_args(args: Sequence[Value]) -> tuple[int, bool]:
    """``(dim, descending)`` or ``(stable, dim, descending)``."""
    dim, descending = args[-2:]
    return (_static(dim, "i", "aten::sort", "dim"),
            _static(descending, "b", "aten::sort", "descending"))


def sort(g, self: Value, *args: Value) -> tuple[Value, Value]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)
    sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    TopK over the whole dim (k = its size)."""
    dim, descending = _sort_args(args)
    return _topk(g, self, _dim_size(g, self, dim), dim, descending)


def argsort(g, self: Value, *args: Value) -> Value:
    """argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor
    argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False) -> Tensor

    The indices of :func:`sort`."""
    dim, descending = _sort_args(args)
    return _topk(g, self, _dim_size(g, self, dim), dim, descending)[1]


for _since in (7, 10, 11):
    pack.symbolic("aten::topk", since=_since)(scalar_as_vector(topk))
    pack.symbolic("aten::sort", since=_since)(scalar_as_vector(sort))
    pack.symbolic("aten::argsort", since=_since)(scalar_as_vector(argsort))


def _take(g, x: Value, index: Value, axis: int, keepdim: bool) -> Value:
    """``x`` at the 1-element 1-D ``index`` along ``axis``, keeping the axis or not."""
    picked = g.op("Gather", x, index, axis_i=axis)
    return picked if keepdim else sh._squeeze_helper(g, picked, [axis])


@pack.symbolic("aten::kthvalue", since=11)
@sh.parse_args("v", "v", "i", "b")
def kthvalue(g, self: Value, k: Value, dim: int, keepdim: bool) -> tuple[Value, Value]:
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)

    The k-th smallest: the last of the k smallest (TopK largest=0)."""
    axis = _positive([dim], self.type().dim(), "aten::kthvalue")[0]
    k_value = _k_input(g, sh._maybe_get_const(k, "i"))
    values, indices = _topk(g, self, k_value, axis, largest=False)
    last = _long1(g.op("Sub", k_value, g.constant(torch.tensor([1], dtype=torch.int64))))
    return _take(g, values, last, axis, keepdim), _take(g, indices, last, axis, keepdim)


@pack.symbolic("aten::median", since=11)
def median(g, self: Value, *args: Value) -> Value | tuple[Value, Value]:
    """median(Tensor self) -> Tensor
    median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)

    The lower median: element (n + 1) // 2 of the smallest, over all elements or one dim."""
    if args:
        dim = _static(args[0], "i", "aten::median", "dim")
        keepdim = _static(args[1], "b", "aten::median", "keepdim")
        x, axis = self, _positive([dim], self.type().dim(), "aten::median")[0]
    else:
        x, axis, keepdim = sh._reshape_helper(g, self, [-1]), 0, False
    size = _dim_size(g, x, axis)
    one = g.constant(torch.tensor([1], dtype=torch.int64))
    two = g.constant(torch.tensor([2], dtype=torch.int64))
    k = _long1(g.op("Div", g.op("Add", size, one), two))
    values, indices = _topk(g, x, k, axis, largest=False)
    last = _long1(g.op("Sub", k, one))
    value = _take(g, values, last, axis, keepdim)
    return (value, _take(g, indices, last, axis, keepdim)) if args else value


# -- unique -------------------------------------------------------------------------------
def _unique_safe(g, x: Value) -> tuple[Value, torch.dtype | None]:
    """Unique's ORT kernel takes float, double, int8 and int64: widen other integers."""
    dtype = x.type().dtype()
    if dtype is not None and dtype not in (torch.float32, torch.float64, torch.float16,
                                           torch.int8, torch.int64):
        if dtype.is_floating_point:
            return sh.cast_to(g, x, torch.float32), dtype
        return sh.cast_to(g, x, torch.int64), dtype
    return x, None


def _empty_long(g) -> Value:
    return g.constant(torch.zeros(0, dtype=torch.int64))


@pack.symbolic("aten::_unique2", since=11)
@sh.parse_args("v", "b", "b", "b")
def _unique2(g, self: Value, sorted: bool, return_inverse: bool,
             return_counts: bool) -> tuple[Value, Value, Value]:
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    Unique over the flattened tensor (sorted, as PyTorch's CPU kernel returns it)."""
    x, restore = _unique_safe(g, self)
    values, _, inverse, counts = g.op("Unique", x, sorted_i=1, outputs=4)
    inverse = (sh._reshape_helper(g, inverse, g.op("Shape", self)) if return_inverse
               else _empty_long(g))
    return _restore(g, values, restore), inverse, counts if return_counts else _empty_long(g)


@pack.symbolic("aten::_unique", since=11)
@sh.parse_args("v", "b", "b")
def _unique(g, self: Value, sorted: bool, return_inverse: bool) -> tuple[Value, Value]:
    """_unique(Tensor self, bool sorted=True, bool return_inverse=False) -> (Tensor, Tensor)

    ``_unique2`` without counts."""
    values, inverse, _ = _unique2(g, self, sorted, return_inverse, False)
    return values, inverse


@pack.symbolic("aten::unique_dim", since=11)
@sh.parse_args("v", "i", "b", "b", "b")
def unique_dim(g, self: Value, dim: int, sorted: bool, return_inverse: bool,
               return_counts: bool) -> tuple[Value, Value, Value]:
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    Unique slices along ``dim``, sorted."""
    x, restore = _unique_safe(g, self)
    values, _, inverse, counts = g.op("Unique", x, axis_i=dim, sorted_i=1, outputs=4)
    return _restore(g, values, restore), inverse, counts


# -- histograms -----------------------------------------------------------------------------
@pack.symbolic("aten::histc", since=11)
@sh.parse_args("v", "i", "v", "v")
def histc(g, self: Value, bins: int, min_value: Value, max_value: Value) -> Value:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor

    Counts in ``bins`` equal bins over [min, max] (the data's range when min == max), the
    maximum in the last bin: each element's bin ``floor((x - min) / (max - min) * bins)``
    compared with every bin index, summed over the elements (memory: elements x bins)."""
    op = "aten::histc"
    dtype = self.type().dtype() or torch.float32
    if not dtype.is_floating_point:
        sh._unimplemented(op, f"a {dtype} input (PyTorch's histc takes floating point)")
    x = sh._reshape_helper(g, self, [-1])
    low = _static(min_value, "f", op, "min")
    high = _static(max_value, "f", op, "max")
    if low > high:
        sh._unimplemented(op, f"min={low} > max={high}")

    def edge(v: float) -> Value:
        return g.constant(torch.tensor(v, dtype=dtype))

    if low == high:  # the data's own range, widened by one on each side when it is empty
        low_v, high_v = (_reduce(g, name, x, [0], False) for name in ("ReduceMin", "ReduceMax"))
        empty = g.op("Equal", low_v, high_v)
        low_v = g.op("Where", empty, g.op("Sub", low_v, edge(1.0)), low_v)
        high_v = g.op("Where", empty, g.op("Add", high_v, edge(1.0)), high_v)
    else:
        low_v, high_v = edge(low), edge(high)
    position = g.op("Mul", g.op("Div", g.op("Sub", x, low_v), g.op("Sub", high_v, low_v)),
                    edge(float(bins)))
    index = sh.cast_to(g, g.op("Min", g.op("Floor", position), edge(float(bins - 1))),
                       torch.int64)
    inside = g.op("And", g.op("Not", g.op("Less", x, low_v)),
                  g.op("Not", g.op("Greater", x, high_v)))
    bin_ids = g.op("Range", g.constant(torch.tensor(0)), g.constant(torch.tensor(bins)),
                   g.constant(torch.tensor(1)))
    hits = g.op("And", g.op("Equal", sh._unsqueeze_helper(g, index, [1]), bin_ids),
                sh._unsqueeze_helper(g, inside, [1]))
    return _reduce(g, "ReduceSum", sh.cast_to(g, hits, dtype), [0], False)
