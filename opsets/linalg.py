"""Linear algebra: mm/bmm/mv/dot, the add*mm family, outer, einsum, tensordot, kron, cross,
det/logdet/slogdet, inverse, norms and cdist. (matmul, linear and addmm live in nn.)"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value
from oxport.opsets.common import scalar_as_vector
from oxport.types import JitScalarType

pack = OpPack("oxport.linalg", cases="oxport.opsets.cases.linalg")

#: Largest matrix :func:`inverse` expands by cofactors (n^2 minors of size (n-1)^2).
INVERSE_MAX_SIZE = 16


def _static(value: Value, desc: str, op: str, what: str):
    const = sh._maybe_get_const(value, desc)
    if isinstance(const, Value):
        sh._unimplemented(op, f"{what} computed at run time")
    return const


def _rank(x: Value, op: str) -> int:
    rank = x.type().dim()
    if rank is None:
        sh._unimplemented(op, "an input of unknown rank")
    return rank


# -- products -------------------------------------------------------------------------
def _matmul(g, a: Value, b: Value, op: str) -> Value:
    """MatMul; integer MatMul needs opset 9."""
    dtype = a.type().dtype()
    if g.opset < 9 and dtype is not None and not dtype.is_floating_point:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 9, "MatMul of integer tensors")
    return g.op("MatMul", a, b).setType(Type.tensor(dtype))


def _product(name: str):
    def symbolic(g, self: Value, other: Value) -> Value:
        return _matmul(g, self, other, f"aten::{name}")
    symbolic.__name__ = name
    other = {"mm": "mat2", "bmm": "mat2", "mv": "vec", "dot": "tensor"}[name]
    symbolic.__doc__ = f"{name}(Tensor self, Tensor {other}) -> Tensor\n\nAs MatMul."
    return symbolic


for _name in ("mm", "bmm", "mv", "dot"):
    pack.symbolic(f"aten::{_name}", since=7)(_product(_name))


def _add_scaled(g, self: Value, product: Value, beta: Value | None,
                alpha: Value | None) -> Value:
    """``beta * self + alpha * product`` (numbers, or 0-d tensors computed at run time; 1
    when omitted); ``self`` is ignored when beta is a constant 0, as in PyTorch."""
    dtype = product.type().dtype() or self.type().dtype() or torch.float32
    alpha, beta = (1.0 if v is None else sh._maybe_get_const(v, "f") for v in (alpha, beta))
    if isinstance(alpha, Value) or alpha != 1:
        product = g.op("Mul", product, _coefficient(g, alpha, dtype))
    if not isinstance(beta, Value) and beta == 0:
        return product
    if isinstance(beta, Value) or beta != 1:
        self = g.op("Mul", self, _coefficient(g, beta, dtype))
    return g.op("Add", self, product)


def _coefficient(g, value: float | Value, dtype: torch.dtype) -> Value:
    """A scaling number as a ``dtype`` tensor."""
    if isinstance(value, Value):
        return sh.cast_to(g, value, dtype)
    return g.constant(torch.tensor(value, dtype=dtype))


@pack.symbolic("aten::baddbmm", since=7)
def baddbmm(g, self: Value, batch1: Value, batch2: Value, beta: Value | None = None,
            alpha: Value | None = None) -> Value:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor
    baddbmm.dtype(Tensor self, Tensor batch1, Tensor batch2, ScalarType out_dtype, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    ``beta`` and ``alpha`` may be computed at run time."""
    return _add_scaled(g, self, _matmul(g, batch1, batch2, "aten::baddbmm"), beta, alpha)


@pack.symbolic("aten::addbmm", since=7)
def addbmm(g, self: Value, batch1: Value, batch2: Value, beta: Value | None = None,
           alpha: Value | None = None) -> Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    The batch of products summed over the batch, scaled and added to ``self``."""
    products = _matmul(g, batch1, batch2, "aten::addbmm")
    summed = sh._reducesum_helper(g, products, [0], keepdims_i=0).setType(products.type())
    return _add_scaled(g, self, summed, beta, alpha)


@pack.symbolic("aten::addmv", since=7)
def addmv(g, self: Value, mat: Value, vec: Value, beta: Value | None = None,
          alpha: Value | None = None) -> Value:
    """addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return _add_scaled(g, self, _matmul(g, mat, vec, "aten::addmv"), beta, alpha)


@pack.symbolic("aten::outer", since=7)
def outer(g, self: Value, vec2: Value) -> Value:
    """outer(Tensor self, Tensor vec2) -> Tensor

    ``self[:, None] * vec2`` with PyTorch's type promotion."""
    a, b = sh.promote(g, self, vec2)
    return g.op("Mul", sh._unsqueeze_helper(g, a, [1]), b)



def _einsum_equation(equation: str) -> str:
    """ONNX Einsum takes lower-case labels only: map upper-case ones onto unused letters."""
    equation = equation.replace(" ", "")
    upper = sorted({c for c in equation if c.isupper()})
    spare = [c for c in string.ascii_lowercase if c not in equation]
    if len(upper) > len(spare):
        sh._unimplemented("aten::einsum", "more than 26 distinct subscript letters")
    return equation.translate(str.maketrans(dict(zip(upper, spare))))


@pack.symbolic("aten::einsum", since=12)
def einsum(g, equation: Value, tensors: Value, path: Value | None = None) -> Value:
    """einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor
    einsum.sublist(Tensor a, ...) -> Tensor

    ONNX Einsum (``path`` is only a contraction-order hint)."""
    text = _static(equation, "s", "aten::einsum", "the equation")
    operands = sh.promote(g, *sh._unpack_list(tensors))
    return g.op("Einsum", *operands, equation_s=_einsum_equation(text))


@pack.symbolic("aten::tensordot", since=12)
@sh.parse_args("v", "v", "is", "is")
def tensordot(g, self: Value, other: Value, dims_a: list[int], dims_b: list[int]) -> Value:
    """tensordot(Tensor self, Tensor other, int[] dims_self, int[] dims_other) -> Tensor

    An Einsum contracting ``dims_a`` of self with ``dims_b`` of other."""
    rank_a, rank_b = _rank(self, "aten::tensordot"), _rank(other, "aten::tensordot")
    if rank_a + rank_b - len(dims_a) > 26:
        sh._unimplemented("aten::tensordot", "more than 26 dimensions in all")
    letters = iter(string.ascii_lowercase)
    labels_a = [next(letters) for _ in range(rank_a)]
    labels_b = [next(letters) for _ in range(rank_b)]
    for da, db in zip(dims_a, dims_b):
        labels_b[db % rank_b] = labels_a[da % rank_a]
    contracted = {labels_a[d % rank_a] for d in dims_a}
    out = [c for c in labels_a + labels_b if c not in contracted]
    equation = f"{''.join(labels_a)},{''.join(labels_b)}->{''.join(out)}"
    return g.op("Einsum", *sh.promote(g, self, other), equation_s=equation)


@pack.symbolic("aten::kron", since=7)
def kron(g, self: Value, other: Value) -> Value:
    """kron(Tensor self, Tensor other) -> Tensor

    Interleave the two inputs' axes, multiply, and merge each pair of axes."""
    a, b = sh.promote(g, self, other)
    rank = max(_rank(a, "aten::kron"), _rank(b, "aten::kron"))
    if a.type().dim() < rank:
        a = sh._unsqueeze_helper(g, a, list(range(rank - a.type().dim())))
    if b.type().dim() < rank:
        b = sh._unsqueeze_helper(g, b, list(range(rank - b.type().dim())))
    spread_a = sh._unsqueeze_helper(g, a, [2 * k + 1 for k in range(rank)])
    spread_b = sh._unsqueeze_helper(g, b, [2 * k for k in range(rank)])
    shape = g.op("Mul", g.op("Shape", a), g.op("Shape", b))
    return g.op("Reshape", g.op("Mul", spread_a, spread_b), shape)


def _cross(g, self: Value, other: Value, axis: int) -> Value:
    a, b = sh.promote(g, self, other)
    rolls = [g.constant(torch.tensor(order, dtype=torch.int64)) for order in ([1, 2, 0], [2, 0, 1])]
    a1, a2 = (g.op("Gather", a, r, axis_i=axis) for r in rolls)
    b1, b2 = (g.op("Gather", b, r, axis_i=axis) for r in rolls)
    return g.op("Sub", g.op("Mul", a1, b2), g.op("Mul", a2, b1))


@pack.symbolic("aten::linalg_cross", since=7)
@sh.parse_args("v", "v", "i")
def linalg_cross(g, self: Value, other: Value, dim: int = -1) -> Value:
    """linalg_cross(Tensor self, Tensor other, *, int dim=-1) -> Tensor

    The cross product of 3-vectors along ``dim``."""
    return _cross(g, self, other, dim % _rank(self, "aten::linalg_cross"))


@pack.symbolic("aten::cross", since=7)
def cross(g, self: Value, other: Value, dim: Value | None = None) -> Value:
    """cross(Tensor self, Tensor other, int? dim=None) -> Tensor

    :func:`linalg_cross`; without ``dim``, along the first dimension of size 3."""
    rank = _rank(self, "aten::cross")
    if dim is None or sh._is_none(dim):
        sizes = self.type().varyingSizes()
        axis = next((i for i, s in enumerate(sizes) if s == 3), None)
        if axis is None:
            sh._unimplemented("aten::cross", "no dim given and no dimension of size 3")
    else:
        axis = _static(dim, "i", "aten::cross", "dim") % rank
    return _cross(g, self, other, axis)


# -- determinants and inverse ----------------------------------------------------------
def _det(g, x: Value) -> Value:
    """Det; ONNX Runtime's kernel is float32/float16 only, so float64 goes through float32."""
    if x.type().dtype() == torch.float64:
        return sh.cast_to(g, g.op("Det", sh.cast_to(g, x, torch.float32)).setType(
            Type.tensor(torch.float32)), torch.float64)
    return g.op("Det", x).setType(Type.tensor(x.type().dtype()))


@pack.symbolic("aten::linalg_det", since=11)
def linalg_det(g, self: Value) -> Value:
    """linalg_det(Tensor A) -> Tensor"""
    return _det(g, self)



@pack.symbolic("aten::logdet", since=11)
def logdet(g, self: Value) -> Value:
    """logdet(Tensor self) -> Tensor

    Log of Det (NaN for a negative determinant, as in PyTorch)."""
    return g.op("Log", _det(g, self))


@pack.symbolic("aten::linalg_slogdet", since=11)
def linalg_slogdet(g, self: Value) -> tuple[Value, Value]:
    """linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)
    slogdet(Tensor self) -> (Tensor sign, Tensor logabsdet)

    (sign, log|det|) of Det."""
    det = _det(g, self)
    return g.op("Sign", det), g.op("Log", g.op("Abs", det))


pack.alias(linalg_slogdet, "aten::slogdet", since=11)


@pack.symbolic("aten::linalg_inv", since=11)
def linalg_inv(g, self: Value) -> Value:
    """linalg_inv(Tensor A) -> Tensor

    ONNX has no inverse: the adjugate over Det, from the Det of every minor (static n <= 16)."""
    rank = _rank(self, "aten::linalg_inv")
    n = sh._get_tensor_dim_size(self, -1)
    if n is None or n > INVERSE_MAX_SIZE:
        sh._unimplemented("aten::linalg_inv", f"ONNX has no inverse operator; oxport expands "
                          f"matrices of a static size up to {INVERSE_MAX_SIZE} by cofactors")
    if n == 1:
        return g.op("Reciprocal", self)
    det = sh._unsqueeze_helper(g, _det(g, self), [rank - 2, rank - 1])
    keep = torch.tensor([[k for k in range(n) if k != i] for i in range(n)], dtype=torch.int64)
    rows = g.op("Gather", self, g.constant(keep), axis_i=rank - 2)  # [..., i, n-1, n]
    minors = g.op("Gather", rows, g.constant(keep), axis_i=rank)  # [..., i, n-1, j, n-1]
    batch = list(range(rank - 2))
    b = rank - 2
    minors = g.op("Transpose", minors, perm_i=[*batch, b, b + 2, b + 1, b + 3])
    dtype = self.type().dtype() or torch.float32
    minors.setType(Type.tensor(dtype))
    signs = torch.tensor([[(-1.0) ** (i + j) for j in range(n)] for i in range(n)], dtype=dtype)
    cofactors = g.op("Mul", _det(g, minors), g.constant(signs))  # [..., i, j]
    adjugate = g.op("Transpose", cofactors, perm_i=[*batch, b + 1, b])
    return g.op("Div", adjugate, det)



# -- norms -------------------------------------------------------------------------------
def _reduce(g, op_type: str, x: Value, axes: list[int] | None, keepdim: bool) -> Value:
    return sh.reduce_helper(g, op_type, x, axes, keepdims_i=int(keepdim))


def _dtype(value: Value | None) -> torch.dtype | None:
    if value is None or sh._is_none(value):
        return None
    return JitScalarType(_static(value, "i", "norm", "dtype")).dtype()


def _axes(value: Value | None, op: str) -> list[int] | None:
    if value is None or sh._is_none(value):
        return None
    return _static(value, "is", op, "dim") or None


def _vector_norm(g, x: Value, p: float, axes: list[int] | None, keepdim: bool) -> Value:
    """The p-norm over ``axes`` (every axis for None)."""
    if p == 2:
        return _reduce(g, "ReduceL2", x, axes, keepdim)
    if p == 1:
        return _reduce(g, "ReduceL1", x, axes, keepdim)
    if math.isinf(p):
        return _reduce(g, "ReduceMax" if p > 0 else "ReduceMin", g.op("Abs", x), axes, keepdim)
    dtype = x.type().dtype() or torch.float32
    if p == 0:
        nonzero = sh.cast_to(g, sh.cast_to(g, x, torch.bool), dtype)
        return _reduce(g, "ReduceSum", nonzero, axes, keepdim)
    powered = g.op("Pow", g.op("Abs", x), g.constant(torch.tensor(p, dtype=dtype)))
    total = _reduce(g, "ReduceSum", powered, axes, keepdim)
    return g.op("Pow", total, g.constant(torch.tensor(1.0 / p, dtype=dtype)))


def _cast_opt(g, x: Value, dtype: torch.dtype | None) -> Value:
    return x if dtype is None else sh.cast_to(g, x, dtype)


def _order(value: Value | None, default: float | str | None = 2.0) -> float | str | None:
    """A norm order: a number, a string ('fro', 'nuc'), or ``default`` for None."""
    if value is None or sh._is_none(value):
        return default
    if not value.is_const:
        sh._unimplemented("norm", "an order computed at run time")
    const = value.const.item() if isinstance(value.const, torch.Tensor) else value.const
    return const if isinstance(const, str) else float(const)


@pack.symbolic("aten::linalg_vector_norm", since=7)
@scalar_as_vector
def linalg_vector_norm(g, self: Value, ord: Value, dim: Value, keepdim: Value,
                       dtype: Value | None = None) -> Value:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    keep = _static(keepdim, "b", "aten::linalg_vector_norm", "keepdim")
    x = _cast_opt(g, self, _dtype(dtype))
    return _vector_norm(g, x, _order(ord), _axes(dim, "aten::linalg_vector_norm"), keep)


@pack.symbolic("aten::norm", since=7)
@scalar_as_vector
def norm(g, self: Value, p: Value | None = None, *args: Value) -> Value:
    """norm.Scalar(Tensor self, Scalar p=2) -> Tensor
    norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor
    norm.ScalarOpt_dim_dtype(Tensor self, Scalar? p, int[1] dim, bool keepdim, *, ScalarType dtype) -> Tensor
    norm.ScalarOpt_dtype(Tensor self, Scalar? p, *, ScalarType dtype) -> Tensor

    ``norm(self, p)``, ``norm(self, p, dtype)``, ``norm(self, p, dim, keepdim[, dtype])``."""
    order = _order(p)
    if isinstance(order, str):
        sh._unimplemented("aten::norm", f"the string order {order!r}")
    if len(args) >= 2:
        axes, keepdim = _axes(args[0], "aten::norm"), _static(args[1], "b", "aten::norm", "keepdim")
        dtype = args[2] if len(args) > 2 else None
    else:
        axes, keepdim, dtype = None, False, args[0] if args else None
    return _vector_norm(g, _cast_opt(g, self, _dtype(dtype)), order, axes, keepdim)


@pack.symbolic("aten::frobenius_norm", since=7)
@sh.parse_args("v", "is", "b")
def frobenius_norm(g, self: Value, dim: list[int], keepdim: bool = False) -> Value:
    """frobenius_norm.dim(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    return _reduce(g, "ReduceL2", self, dim or None, keepdim)


def _matrix_norm(g, x: Value, order: float | str, dims: Sequence[int], keepdim: bool,
                 op: str) -> Value:
    """'fro', and the 1/-1/inf/-inf induced norms; 2, -2 and 'nuc' need an SVD (declined)."""
    rank = _rank(x, op)
    rows, cols = (d % rank for d in dims)
    if order == "fro":
        return _reduce(g, "ReduceL2", x, [rows, cols], keepdim)
    if order in ("nuc", 2.0, -2.0):
        sh._unimplemented(op, f"the {order!r} matrix norm needs singular values (no ONNX SVD)")
    if not isinstance(order, float) or abs(order) not in (1.0, math.inf):
        sh._unimplemented(op, f"the matrix norm of order {order!r}")
    summed, picked = (rows, cols) if abs(order) == 1 else (cols, rows)
    sums = _reduce(g, "ReduceSum", g.op("Abs", x), [summed], True)
    out = _reduce(g, "ReduceMax" if order > 0 else "ReduceMin", sums, [picked], True)
    return out if keepdim else sh._squeeze_helper(g, out, sorted([rows, cols]))


@pack.symbolic("aten::linalg_matrix_norm", since=7)
def linalg_matrix_norm(g, self: Value, ord: Value, dim: Value, keepdim: Value,
                       dtype: Value | None = None) -> Value:
    """linalg_matrix_norm(Tensor self, Scalar ord, int[] dim=[-2, -1], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
    linalg_matrix_norm.str_ord(Tensor self, str ord="fro", int[] dim=[-2, -1], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
    """
    op = "aten::linalg_matrix_norm"
    x = _cast_opt(g, self, _dtype(dtype))
    dims = _static(dim, "is", op, "dim")
    return _matrix_norm(g, x, _order(ord), dims, _static(keepdim, "b", op, "keepdim"), op)


@pack.symbolic("aten::linalg_norm", since=7)
def linalg_norm(g, self: Value, ord: Value, dim: Value, keepdim: Value,
                dtype: Value | None = None) -> Value:
    """linalg_norm(Tensor self, Scalar? ord=None, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
    linalg_norm.ord_str(Tensor self, str ord, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor

    A vector norm for one dim (or a 1-D input), a matrix norm for two dims (or a 2-D
    input); with no order, the 2-norm of the flattened input or the Frobenius norm."""
    op = "aten::linalg_norm"
    x = _cast_opt(g, self, _dtype(dtype))
    order, axes = _order(ord, None), _axes(dim, op)
    keep = _static(keepdim, "b", op, "keepdim")
    if order is None:
        return _reduce(g, "ReduceL2", x, axes, keep)
    if axes is None:
        axes = list(range(_rank(x, op)))
    if len(axes) == 2:
        return _matrix_norm(g, x, order, axes, keep, op)
    if isinstance(order, str):
        sh._unimplemented(op, f"the order {order!r} on a vector")
    return _vector_norm(g, x, order, axes, keep)


@pack.symbolic("aten::cdist", since=7)
@sh.parse_args("v", "v", "f", "none")
def cdist(g, x1: Value, x2: Value, p: float = 2.0, compute_mode: Value | None = None) -> Value:
    """cdist(Tensor x1, Tensor x2, float p=2., int? compute_mode=None) -> Tensor

    Pairwise p-norm distances between the rows of ``x1`` and ``x2`` (by broadcasting)."""
    rank = _rank(x1, "aten::cdist")
    diff = g.op("Sub", sh._unsqueeze_helper(g, x1, [rank - 1]),
                sh._unsqueeze_helper(g, x2, [rank - 2]))
    diff.setType(Type.tensor(x1.type().dtype()))
    return _vector_norm(g, diff, p, [rank], False)


# -- grouped products (mixture-of-experts layers) -------------------------------------------
def _dim(g, x: Value, axis: int) -> Value:
    """``x.size(axis)`` as a 0-d int64 tensor."""
    return g.op("Gather", g.op("Shape", x), g.constant(torch.tensor(axis)), axis_i=0)


@pack.symbolic("aten::_grouped_mm", since=11)
def _grouped_mm(g, self: Value, mat2: Value, offs: Value | None = None,
                bias: Value | None = None, out_dtype: Value | None = None) -> Value:
    """_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None, ScalarType? out_dtype=None) -> Tensor
    grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor

    (The second is transformers' stand-in, ``transformers::grouped_mm_fallback``.)
    Rows ``offs[e-1]:offs[e]`` of a 2-D ``self`` times expert ``e`` of a 3-D ``mat2``:
    each row's expert (how many inner offsets are <= its index) gathers its matrix for one
    batched MatMul; rows past ``offs[-1]`` (left unwritten by PyTorch) are zeros. 3-D x 3-D
    without offsets is a batched MatMul."""
    op = "aten::_grouped_mm"
    ranks = (_rank(self, op), _rank(mat2, op))
    grouped = offs is not None and not sh._is_none(offs)
    has_bias = bias is not None and not sh._is_none(bias)
    dtype = self.type().dtype() or torch.float32
    if ranks == (3, 3) and not grouped:
        out = _matmul(g, self, mat2, op)
        return _finish_grouped(g, g.op("Add", out, sh._unsqueeze_helper(g, bias, [1]))
                               if has_bias else out, dtype, out_dtype)
    if ranks != (2, 3) or not grouped:
        sh._unimplemented(op, f"a {ranks[0]}-D x {ranks[1]}-D product "
                              f"{'with' if grouped else 'without'} offsets (served: 2-D x 3-D "
                              f"with offsets, 3-D x 3-D without)")
    rows = g.op("Range", g.constant(torch.tensor(0)), _dim(g, self, 0),
                g.constant(torch.tensor(1)))
    ends = sh.cast_to(g, offs, torch.int64)
    inner_ends = sh._slice_helper(g, ends, [0], [0], [-1])  # every row past them: the last
    passed = g.op("Not", g.op("Greater", sh._unsqueeze_helper(g, inner_ends, [0]),
                              sh._unsqueeze_helper(g, rows, [1])))
    expert = sh._reducesum_helper(g, sh.cast_to(g, passed, torch.int64), [1], keepdims_i=0)
    product = _matmul(g, sh._unsqueeze_helper(g, self, [1]),
                      g.op("Gather", mat2, expert, axis_i=0), op)
    out = sh._squeeze_helper(g, product, [1])
    if has_bias:
        out = g.op("Add", out, g.op("Gather", bias, expert, axis_i=0))
    in_group = g.op("Less", rows, g.op("Gather", ends, g.constant(torch.tensor(-1)), axis_i=0))
    out = g.op("Where", sh._unsqueeze_helper(g, in_group, [1]), out,
               g.constant(torch.tensor(0, dtype=dtype)))
    return _finish_grouped(g, out, dtype, out_dtype)


# transformers' stand-in for _grouped_mm where torch.export cannot use it (weights other
# than bfloat16), e.g. Mixtral's experts: a custom op of the same meaning, zeros past offs[-1].
pack.alias(_grouped_mm, "transformers::grouped_mm_fallback", since=11)


def _finish_grouped(g, out: Value, dtype: torch.dtype, out_dtype: Value | None) -> Value:
    target = _dtype(out_dtype) or dtype
    return (sh.cast_to(g, out, target) if target != dtype else out).setType(Type.tensor(target))


# -- triangular solves ----------------------------------------------------------------------
@pack.symbolic("aten::linalg_solve_triangular", since=9)
@sh.parse_args("v", "v", "b", "b", "b")
def linalg_solve_triangular(g, self: Value, other: Value, upper: bool, left: bool = True,
                            unitriangular: bool = False) -> Value:
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor

    ``A X = B`` (``X A = B`` for left=False; A is ``self``, B ``other``) for a triangular
    ``A`` of static size n. With A = D (I - N), N strictly triangular (nilpotent),
    A^-1 = (I - N)^-1 D^-1 and (I - N)^-1 = (I + N)(I + N^2)(I + N^4)... (ceil(log2 n)
    factors): two MatMuls a factor applied to ``other``, no loop. The other triangle (and
    the diagonal when unitriangular) is ignored, as in PyTorch."""
    op = "aten::linalg_solve_triangular"
    n = sh._get_tensor_dim_size(self, -1)
    if n is None:
        sh._unimplemented(op, "a matrix whose size is unknown at export time")
    dtype = self.type().dtype() or torch.float32
    strict = torch.ones(n, n, dtype=torch.bool)
    strict = strict.triu(1) if upper else strict.tril(-1)
    zero = g.constant(torch.tensor(0, dtype=dtype))
    off_diagonal = g.op("Where", g.constant(strict), self, zero)
    if unitriangular:
        nilpotent, inverse_diagonal = g.op("Neg", off_diagonal), None
    else:
        on_diagonal = g.op("Where", g.constant(torch.eye(n, dtype=torch.bool)), self, zero)
        diagonal = sh._reducesum_helper(g, on_diagonal, [-1], keepdims_i=1)  # [..., n, 1]
        inverse_diagonal = g.op("Reciprocal", diagonal)
        # D^-1 scales the rows of the off-diagonal part: N = -D^-1 L
        nilpotent = g.op("Neg", g.op("Mul", off_diagonal, inverse_diagonal))
    x = other
    if left and inverse_diagonal is not None:
        x = g.op("Mul", x, inverse_diagonal)
    power = nilpotent
    for step in range(max(n - 1, 0).bit_length()):
        x = g.op("Add", x, _matmul(g, power, x, op) if left else _matmul(g, x, power, op))
        if step + 1 < max(n - 1, 0).bit_length():
            power = _matmul(g, power, power, op)
    if not left and inverse_diagonal is not None:  # X = Y D^-1 scales the columns
        rank = _rank(self, op)
        x = g.op("Mul", x, g.op("Transpose", inverse_diagonal,
                                perm_i=[*range(rank - 2), rank - 1, rank - 2]))
    return x.setType(Type.tensor(dtype))
