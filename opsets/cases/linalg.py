"""Test cases of the ``oxport.linalg`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.cases import scalar
from oxport.opsets.linalg import pack


def _ints(*shape: int, dtype: torch.dtype = torch.int64):
    return lambda: torch.randint(-4, 5, shape, dtype=dtype)


def _well_conditioned(*shape: int):
    return lambda: torch.randn(*shape) + 3 * torch.eye(shape[-1])


def _cross_script(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.cross(x, y, 1)


pack.case("aten::mm", torch.mm, (3, 4), (4, 5))
pack.case("aten::mm", torch.mm, _ints(3, 4), _ints(4, 2), name="int64", min_opset=9)
pack.case("aten::bmm", torch.bmm, (2, 3, 4), (2, 4, 5))
pack.case("aten::bmm", torch.bmm, lambda: torch.randn(2, 3, 4).double(),
          lambda: torch.randn(2, 4, 2).double(), name="float64")
pack.case("aten::mv", torch.mv, (3, 4), (4,))
pack.case("aten::dot", torch.dot, (5,), (5,))
pack.case("aten::baddbmm", lambda a, b, c: torch.baddbmm(a, b, c, beta=0.5, alpha=2), (2, 3, 5),
          (2, 3, 4), (2, 4, 5))
pack.case("aten::baddbmm", lambda a, b, c: torch.baddbmm(a, b, c, beta=0), (3, 5), (2, 3, 4),
          (2, 4, 5), name="beta0")
pack.case("aten::baddbmm", lambda a, b, c, al, be: torch.baddbmm(a, b, c, alpha=al, beta=be),
          (2, 3, 5), (2, 3, 4), (2, 4, 5), lambda: torch.tensor(5), lambda: torch.tensor(0.5),
          name="coefficients_at_run_time", input_names=["a", "b", "c", "al", "be"])
pack.case("aten::addbmm", lambda a, b, c: torch.addbmm(a, b, c, alpha=0.5), (3, 5), (2, 3, 4),
          (2, 4, 5))
pack.case("aten::addmv", lambda a, b, c: torch.addmv(a, b, c, beta=2), (3,), (3, 4), (4,))
pack.case("aten::outer", torch.outer, (3,), (4,))
pack.case("aten::outer", torch.outer, _ints(3), (2,), name="promote")
pack.case("aten::einsum", lambda a, b: torch.einsum("bij,bjk->bik", a, b), (2, 3, 4), (2, 4, 5),
          name="bmm")
pack.case("aten::einsum", lambda a: torch.einsum("...ii->...i", a), (2, 3, 3), name="diagonal")
pack.case("aten::einsum", lambda a, b: torch.einsum("Ij,j->I", a, b), _ints(3, 4), _ints(4),
          name="upper_int")
pack.case("aten::tensordot", lambda a, b: torch.tensordot(a, b, dims=([1, 2], [0, 1])),
          (2, 3, 4), (3, 4, 5))
pack.case("aten::tensordot", lambda a, b: torch.tensordot(a, b, dims=1), (2, 3), (3, 4),
          name="int_dims")
pack.case("aten::kron", torch.kron, (2, 3), (3, 2))
pack.case("aten::kron", torch.kron, _ints(2), _ints(2, 3), name="ranks")
pack.case("aten::linalg_cross", torch.linalg.cross, (4, 3), (4, 3))
pack.case("aten::cross", _cross_script, (2, 3, 4), (2, 3, 4), script=True)
pack.case("aten::linalg_det", torch.linalg.det, _well_conditioned(2, 3, 3))
pack.case("aten::linalg_det", torch.linalg.det, lambda: torch.randn(4, 4).double(),
          name="float64")
pack.case("aten::logdet", torch.logdet, _well_conditioned(2, 3, 3))
pack.case("aten::linalg_slogdet", torch.linalg.slogdet, (2, 4, 4))
pack.case("aten::slogdet", torch.slogdet, (3, 3))
pack.case("aten::linalg_inv", torch.linalg.inv, _well_conditioned(2, 4, 4), rtol=1e-3, atol=1e-4)
pack.case("aten::linalg_inv", torch.linalg.inv, lambda: torch.rand(1, 1) + 1, name="1x1")
pack.case("aten::linalg_inv", torch.inverse, _well_conditioned(3, 3), name="inverse", atol=1e-4)
pack.case("aten::linalg_vector_norm", lambda x: torch.linalg.vector_norm(x), (2, 3, 4),
          name="all")
pack.case("aten::linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, 1, dim=1), (2, 3, 4),
          name="l1")
pack.case("aten::linalg_vector_norm",
          lambda x: torch.linalg.vector_norm(x, float("inf"), (0, 2), keepdim=True), (2, 3, 4),
          name="inf")
pack.case("aten::linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, -float("inf"), -1),
          (3, 4), name="neg_inf")
pack.case("aten::linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, 0, 1), (3, 4),
          name="zero")
pack.case("aten::linalg_vector_norm",
          lambda x: torch.linalg.vector_norm(x, 3, 1, dtype=torch.float64), (3, 4), name="p3")
# torch.norm now calls linalg_vector_norm; aten::norm and frobenius_norm come from older code.
pack.case("aten::norm", lambda x: torch._VF.norm(x, 3.0), (3, 4), name="p")
pack.case("aten::norm", lambda x: torch._VF.norm(x, 1.0, [1], True), (3, 4), name="dim")
pack.case("aten::norm", lambda x: torch._VF.norm(x, 2.0, dtype=torch.float64), (3, 4),
          name="dtype")
pack.case("aten::frobenius_norm", lambda x: torch.frobenius_norm(x, [1, 2]), (2, 3, 4))
pack.case("aten::linalg_norm", lambda x: torch.linalg.norm(x), (2, 3, 4), name="default")
pack.case("aten::linalg_norm", lambda x: torch.linalg.norm(x, 1, dim=1), (2, 3), name="vector")
pack.case("aten::linalg_norm", lambda x: torch.linalg.norm(x, float("inf")), (3, 4),
          name="matrix_inf")
pack.case("aten::linalg_norm", lambda x: torch.linalg.norm(x, "fro", (0, 2)), (2, 3, 4),
          name="fro")
pack.case("aten::linalg_matrix_norm", lambda x: torch.linalg.matrix_norm(x), (2, 3, 4),
          name="fro")
pack.case("aten::linalg_matrix_norm", lambda x: torch.linalg.matrix_norm(x, -1, keepdim=True),
          (2, 3, 4), name="neg_one")
pack.case("aten::cdist", torch.cdist, (2, 3, 4), (2, 5, 4), name="p2")
pack.case("aten::cdist", lambda a, b: torch.cdist(a, b, p=1), (3, 4), (5, 4), name="p1")


def _offsets() -> torch.Tensor:
    """Group ends of 7 rows over 3 experts, the middle one empty."""
    return torch.tensor([3, 3, 7], dtype=torch.int32)


#: torch.export runs _grouped_mm's meta kernel, which takes bfloat16 only (eager takes
#: float32 on CPU); transformers calls its grouped_mm_fallback op instead under torch.export.
_BF16_META = "torch.export's meta kernel for _grouped_mm takes bfloat16 only"
pack.case("aten::_grouped_mm", lambda x, w, offs: torch._grouped_mm(x, w, offs=offs), (7, 8),
          (3, 8, 4), _offsets, name="offsets", not_exportable=_BF16_META)
pack.case("aten::_grouped_mm", lambda x, w: torch._grouped_mm(x, w), (3, 5, 8), (3, 8, 4),
          name="batched", not_exportable=_BF16_META)


def _grouped_mm_fallback(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    from transformers.integrations import moe  # noqa: F401 - registers the custom op

    return torch.ops.transformers.grouped_mm_fallback(x, w, offs)


pack.case("transformers::grouped_mm_fallback", _grouped_mm_fallback, (7, 8), (3, 8, 4),
          _offsets)
pack.case("transformers::grouped_mm_fallback", _grouped_mm_fallback, (7, 8), (3, 8, 4),
          lambda: torch.tensor([2, 5, 5]), name="rows_past_the_last_group")

pack.case("aten::linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, 2, 0), scalar,
          name="0d")


def _triangular(*shape: int):
    """A triangular system with a dominant diagonal (both triangles filled: the solver
    must ignore the other one)."""
    return lambda: torch.randn(*shape) * 0.3 + 2 * torch.eye(shape[-1])


for _upper in (False, True):
    for _left in (True, False):
        pack.case("aten::linalg_solve_triangular",
                  lambda a, b, u=_upper, l=_left: torch.linalg.solve_triangular(
                      a, b, upper=u, left=l), _triangular(2, 5, 5),
                  (2, 5, 3) if _left else (2, 3, 5), name=f"upper{_upper}_left{_left}",
                  rtol=1e-4, atol=1e-5)
pack.case("aten::linalg_solve_triangular",
          lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
          _triangular(3, 8, 8), (3, 8, 4), name="unitriangular_broadcast", rtol=1e-4,
          atol=1e-5)
pack.case("aten::linalg_solve_triangular",
          lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), _triangular(1, 1),
          (1, 2), name="1x1")
