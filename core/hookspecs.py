"""The hooks an oxport plugin may implement.

A plugin is any module or object exposed under the ``oxport`` entry-point group
whose functions are marked with :data:`oxport.hookimpl`. Registration hooks
receive a :class:`~oxport.registry.Registrar` bound to the plugin, so every
registration knows the plugin and distribution it came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from oxport.frontends.base import FrontEnd
    from oxport.ir import Graph
    from oxport.registry import Registrar

PROJECT = "oxport"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a plugin function as the implementation of an ``oxport_*`` hook.
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def oxport_register_symbolics(registry: Registrar) -> None:
    """Register symbolic functions (and their test cases).

    Example::

        @oxport.hookimpl
        def oxport_register_symbolics(registry):
            registry.register("custom_ops::foo_forward", foo_forward, since=9)
    """


@hookspec
def oxport_register_domains(registry: Registrar) -> None:
    """Declare the default opset versions of the custom domains a plugin emits.

    Example::

        @oxport.hookimpl
        def oxport_register_domains(registry):
            registry.register_domain("com.microsoft", version=1)
    """


@hookspec
def oxport_register_fallbacks(registry: Registrar) -> None:
    """Register fallback modes, enabled by name or by ``operator_export_type``.

    Example::

        @oxport.hookimpl
        def oxport_register_fallbacks(registry):
            registry.register_fallback("fallthrough", Fallthrough())
    """


@hookspec
def oxport_register_passes(registry: Registrar) -> None:
    """Register graph passes ``fn(graph, context)`` run on the converted graph.

    Example::

        @oxport.hookimpl
        def oxport_register_passes(registry):
            registry.register_pass("fuse-gelu", fuse_gelu)
    """


@hookspec
def oxport_graph_boundary(graph: Graph, front: FrontEnd, input_names: list[str],
                          opset: int) -> None:
    """Rewrite the converted graph's inputs and outputs for values the front end hands
    over in a form ONNX has no type for (the quantized pack splits a quantized tensor
    into its integer value, scale and zero point).

    Runs once per conversion, after the walk, the registered graph passes and constant
    folding, before dead code is removed and the graph is serialized; only the plugins
    loaded by then take part (a pack that loads on demand, when the export met one of its
    ops, may implement it). Raising an exception fails the export with it.

    :param graph: The converted graph; its ``inputs`` are the user inputs, in order.
    :param front: The front end's hand-over: the source graph and its example inputs.
    :param input_names: The ``input_names`` the user gave (maybe fewer than the inputs):
        edit the list in place when an input becomes several.
    :param opset: The ``ai.onnx`` opset of the export.

    Example::

        @oxport.hookimpl
        def oxport_graph_boundary(graph, front, input_names, opset):
            split_my_inputs(graph, front.example_inputs, input_names)
    """


@hookspec
def oxport_model_exported(model: Any, result: Any) -> None:
    """Called after each successful conversion with the model and its ExportResult.

    Example::

        @oxport.hookimpl
        def oxport_model_exported(model, result):
            print(len(result.graph.nodes), "nodes")
    """
