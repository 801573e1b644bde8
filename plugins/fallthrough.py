"""The fallthrough mode (``OperatorExportTypes.ONNX_FALLTHROUGH``): an op that no symbolic
converts is emitted as it is, as a custom op of its own namespace.

``foo_namespace::bar`` becomes node ``bar`` of domain ``foo_namespace`` (its version from
``custom_opsets``, default 1); an aten op becomes a node of ``org.pytorch.aten`` named
after it; an autograd Function stays one ``prim::PythonOp`` node. The runtime that
consumes the model must implement these ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from oxport.context import GraphContext
from oxport.hookspecs import hookimpl
from oxport.ir import Value
from oxport.plugins._emit import emit_as_is
from oxport.registry import Registrar

if TYPE_CHECKING:
    from oxport.frontends.view import SourceNode


class Fallthrough:
    """Any op without a symbolic (and without blocks), kept as it is."""

    preempt = False
    keeps_autograd_functions = True

    def claims(self, node: SourceNode) -> bool:
        return not list(node.blocks())

    def convert(self, g: GraphContext, node: SourceNode,
                inputs: Sequence[Value | None]) -> Any:
        return emit_as_is(g, node, inputs)


class _FallthroughPlugin:
    @hookimpl
    def oxport_register_fallbacks(self, registry: Registrar) -> None:
        registry.register_fallback("fallthrough", Fallthrough())


#: The entry point ``oxport.fallback.fallthrough``.
plugin = _FallthroughPlugin()
