"""The ATen modes: ``OperatorExportTypes.ONNX_ATEN`` and ``ONNX_ATEN_FALLBACK``.

* ``"aten"`` (ONNX_ATEN) exports every ``aten::`` op as an ``ATen`` node of the
  ``org.pytorch.aten`` domain, with its ``operator`` and ``overload_name``
  attributes, before any symbolic sees it;
* ``"aten-fallback"`` (ONNX_ATEN_FALLBACK) does so only for the aten ops that no
  symbolic converts at the target opset (or whose symbolic declines); it also keeps
  an autograd Function without a symbolic as one ``prim::PythonOp`` node.

ATen nodes run only where a runtime implements them (PyTorch-backed runtimes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from oxport.context import GraphContext
from oxport.hookspecs import hookimpl
from oxport.ir import Value
from oxport.plugins._emit import emit_as_is, emit_aten
from oxport.registry import Registrar

if TYPE_CHECKING:
    from oxport.frontends.view import SourceNode


class AtenExport:
    """Every aten op as ``ATen``, whatever symbolics exist."""

    preempt = True
    keeps_autograd_functions = False

    def claims(self, node: SourceNode) -> bool:
        return node.kind().startswith("aten::")

    def convert(self, g: GraphContext, node: SourceNode,
                inputs: Sequence[Value | None]) -> Any:
        return emit_aten(g, node, inputs)


class AtenFallback:
    """Only the aten ops no symbolic converts become ``ATen``."""

    preempt = False
    keeps_autograd_functions = True

    def claims(self, node: SourceNode) -> bool:
        return node.kind().startswith("aten::") or node.kind() == "prim::PythonOp"

    def convert(self, g: GraphContext, node: SourceNode,
                inputs: Sequence[Value | None]) -> Any:
        if node.kind() == "prim::PythonOp":
            return emit_as_is(g, node, inputs)
        return emit_aten(g, node, inputs)


class _AtenPlugin:
    @hookimpl
    def oxport_register_fallbacks(self, registry: Registrar) -> None:
        registry.register_fallback("aten", AtenExport())
        registry.register_fallback("aten-fallback", AtenFallback())


#: The entry point ``oxport.fallback.aten``.
plugin = _AtenPlugin()
