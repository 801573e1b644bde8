"""The ``com.microsoft`` symbolics and their test cases."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.context import GraphContext
from oxport.ir import Value

DOMAIN = "com.microsoft"
pack = OpPack("ortcontrib", domains={DOMAIN: 1})

_GELU_TYPES = (torch.float32, torch.float16)
_INVERSE_TYPES = (torch.float32, torch.float64, torch.float16)
_TRILU_TYPES = (torch.float32, torch.float64, torch.float16, torch.int64)
_GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _require_dtype(op: str, value: Value, allowed: tuple[torch.dtype, ...]) -> None:
    dtype = value.type().dtype()
    if dtype not in allowed:
        sh._unimplemented(op, f"ONNX Runtime's {DOMAIN} kernel does not take {dtype}")


@pack.symbolic("aten::gelu", since=7, override=True)
@sh.parse_args("v", "s")
def gelu(g: GraphContext, self: Value, approximate: str = "none") -> Value:
    """Exact gelu as ``com.microsoft::Gelu``; the tanh approximation is left to the standard
    symbolic."""
    if approximate != "none":
        sh._unimplemented("aten::gelu", f"{DOMAIN}::Gelu is the exact form, not "
                                        f"approximate={approximate!r}")
    _require_dtype("aten::gelu", self, _GELU_TYPES)
    return g.op(f"{DOMAIN}::Gelu", self)


@pack.symbolic("aten::linalg_inv", since=7, override=True)
def linalg_inv(g: GraphContext, self: Value) -> Value:
    """``com.microsoft::Inverse`` over the last two dimensions (batched)."""
    _require_dtype("aten::linalg_inv", self, _INVERSE_TYPES)
    return g.op(f"{DOMAIN}::Inverse", self)


pack.symbolic("aten::inverse", since=7, override=True)(linalg_inv)


@pack.symbolic("aten::grid_sampler", since=7, override=True)
@sh.parse_args("v", "v", "i", "i", "b")
def grid_sampler(g: GraphContext, input: Value, grid: Value, interpolation_mode: int,
                 padding_mode: int, align_corners: bool) -> Value:
    """``com.microsoft::GridSample`` (4-D input only)."""
    if input.type().dim() != 4:
        sh._unimplemented("aten::grid_sampler", f"{DOMAIN}::GridSample samples 4-D inputs only")
    _require_dtype("aten::grid_sampler", input, (torch.float32,))
    return g.op(f"{DOMAIN}::GridSample", input, grid, mode_s=_GRID_MODES[interpolation_mode],
                padding_mode_s=_GRID_PADDING[padding_mode], align_corners_i=int(align_corners))


def _trilu(upper: bool):
    def trilu(g: GraphContext, self: Value, diagonal: Value | None = None) -> Value:
        _require_dtype(f"aten::{'triu' if upper else 'tril'}", self, _TRILU_TYPES)
        k = sh._maybe_get_const(diagonal, "i") if diagonal is not None else 0
        if isinstance(k, int):
            inputs = [self] if k == 0 else [self, g.constant(torch.tensor(k))]
        else:
            inputs = [self, sh.cast_to(g, diagonal, torch.int64)]
        return g.op(f"{DOMAIN}::Trilu", *inputs, upper_i=int(upper))
    trilu.__name__ = "triu" if upper else "tril"
    trilu.__doc__ = f"``com.microsoft::Trilu`` with ``upper={int(upper)}``."
    return trilu


pack.symbolic("aten::triu", since=7, override=True)(_trilu(True))
pack.symbolic("aten::tril", since=7, override=True)(_trilu(False))


# -- cases ------------------------------------------------------------------------------
def _invertible() -> torch.Tensor:
    return torch.randn(2, 3, 3) + 3 * torch.eye(3)


def _inverse_graph_function() -> torch.jit.ScriptFunction:
    """A TorchScript function calling ``aten::inverse`` (tracing records ``linalg_inv``)."""
    graph = torch._C.parse_ir("""
        graph(%x : Tensor):
          %y : Tensor = aten::inverse(%x)
          return (%y)""")
    return torch._C._create_function_from_graph("inverse", graph)


def _grid() -> torch.Tensor:
    return torch.rand(1, 4, 5, 2) * 2.4 - 1.2


pack.case("aten::gelu", F.gelu, (2, 3, 4))
pack.case("aten::gelu", lambda x: F.gelu(x.half()).float(), (2, 3), name="float16",
          min_opset=9, rtol=1e-2, atol=1e-3)
pack.case("aten::linalg_inv", torch.linalg.inv, _invertible, rtol=1e-4, atol=1e-5)
pack.case("aten::inverse", _inverse_graph_function(), _invertible, script=True,
          rtol=1e-4, atol=1e-5)
pack.case("aten::grid_sampler", lambda x, grid: F.grid_sample(x, grid, align_corners=False),
          (1, 2, 5, 6), _grid, name="bilinear_zeros")
pack.case("aten::grid_sampler",
          lambda x, grid: F.grid_sample(x, grid, mode="nearest", padding_mode="border",
                                        align_corners=True),
          (1, 2, 5, 6), _grid, name="nearest_border")
pack.case("aten::grid_sampler",
          lambda x, grid: F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection",
                                        align_corners=False),
          (1, 2, 5, 6), _grid, name="bicubic_reflection")
pack.case("aten::triu", lambda x: x.triu(1), (2, 3, 4))
pack.case("aten::triu", lambda x: x.triu(), lambda: torch.randint(-9, 9, (4, 3)), name="int64")
pack.case("aten::tril", lambda x: x.tril(-1), (2, 4, 3))
pack.case("aten::tril", lambda x: torch.tril(x), (3, 3), name="k0")
