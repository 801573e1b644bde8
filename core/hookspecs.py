"""The hooks an oxport plugin may implement.

A plugin is any module or object exposed under the ``oxport`` entry-point group
whose functions are marked with :data:`oxport.hookimpl`. Registration hooks
receive a :class:`~oxport.registry.Registrar` bound to the plugin, so every
registration knows the plugin and distribution it came from.

The registration hooks run once per plugin, when the plugin loads: the first time a
selection of plugins is used in a process (again after ``oxport.plugin_manager.reset()``),
or, for a plugin whose distribution declares its ops (entry-point group ``oxport.ops``),
when an export first meets one of them. A registration hook that raises
:class:`~oxport.errors.RegistryError` (a malformed registration, a conflict) stops the load
with that error, naming the plugin. Any other exception marks the plugin broken: what it
registered is rolled back, a warning names it and the exception, and the other plugins
still load, unless strict mode (``OXPORT_STRICT_PLUGINS=1``) raises
:class:`~oxport.errors.PluginError` instead. A misspelled or unmarked ``oxport_*`` function
marks its plugin broken the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import torch

    from oxport import ExportResult
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

    Runs when the plugin loads; an :class:`~oxport.OpPack` implements it for you.
    A plugin loaded on demand registers here only the ops it declares.

    :param registry: the registrar bound to this plugin; ``registry.register(name, fn,
        since=...)`` adds a symbolic, ``registry.add_case(...)`` a test case.

    Example::

        @oxport.hookimpl
        def oxport_register_symbolics(registry):
            registry.register("custom_ops::foo_forward", foo_forward, since=9)
    """


@hookspec
def oxport_register_domains(registry: Registrar) -> None:
    """Declare the default opset versions of the custom domains a plugin emits.

    Runs when the plugin loads; an export's ``custom_opsets`` overrides the version.

    :param registry: the registrar bound to this plugin;
        ``registry.register_domain(domain, version)`` declares one domain.

    Example::

        @oxport.hookimpl
        def oxport_register_domains(registry):
            registry.register_domain("com.microsoft", version=1)
    """


@hookspec
def oxport_register_fallbacks(registry: Registrar) -> None:
    """Register fallback modes, enabled by name or by ``operator_export_type``.

    Runs when the plugin loads; only a plugin loaded with every export (one that declares
    no ops) may register fallbacks.

    :param registry: the registrar bound to this plugin;
        ``registry.register_fallback(name, fallback)`` registers one
        :class:`oxport.walk.Fallback`.

    Example::

        @oxport.hookimpl
        def oxport_register_fallbacks(registry):
            registry.register_fallback("fallthrough", Fallthrough())
    """


@hookspec
def oxport_register_passes(registry: Registrar) -> None:
    """Register graph passes ``fn(graph, context)`` run on the converted graph.

    Runs when the plugin loads. The passes then run in every export that loaded the plugin,
    after conversion and before serialization; a pass that raises fails that export.

    :param registry: the registrar bound to this plugin;
        ``registry.register_pass(name, fn)`` registers one pass.

    Example::

        @oxport.hookimpl
        def oxport_register_passes(registry):
            registry.register_pass("fuse-gelu", fuse_gelu)
    """


@hookspec
def oxport_register_io_types(registry: Registrar) -> None:
    """Declare how a Python type crosses the model boundary: flattened into named tensors
    where the model takes or returns it, rebuilt from those tensors where it takes it.

    Runs when the plugin loads; only a plugin loaded with every export (one that declares no
    ops) may register I/O types, since arguments are flattened before any op is met. The
    type is named by its import path, so the plugin need not import its library: the type
    takes part once that module is imported (the model comes from it).

    :param registry: the registrar bound to this plugin;
        ``registry.register_io_type(type_path, flatten, unflatten)`` declares one type.
        ``flatten(value)`` returns ``(children, context)``: ``children`` a list of
        ``(name, child)`` pairs, each child a tensor, a number or another flattenable value;
        ``unflatten(children, context)`` rebuilds the value from the children's values, in
        order. Inputs and outputs are named ``<argument or field>.<child name>``.

    Example::

        @oxport.hookimpl
        def oxport_register_io_types(registry):
            registry.register_io_type(
                "mylib.Pair", lambda p: ([("first", p.a), ("second", p.b)], None),
                lambda children, _: mylib.Pair(*children))
    """


@hookspec
def oxport_register_tasks(registry: Registrar) -> None:
    """Register export tasks: each turns a source (a checkpoint folder, a model object) into
    a folder of ONNX files laid out for one use (see :mod:`oxport.tasks`).

    Runs when the plugin loads; only a plugin loaded with every export (one that declares no
    ops) may register tasks. ``oxport.export_task`` and ``oxport export SOURCE --task NAME``
    run them; ``oxport tasks`` lists them.

    :param registry: the registrar bound to this plugin; ``registry.register_task(task)``
        registers one :class:`oxport.tasks.Task` under its ``name``.

    Example::

        @oxport.hookimpl
        def oxport_register_tasks(registry):
            registry.register_task(MyTextGeneration())
    """


@hookspec
def oxport_register_targets(registry: Registrar) -> None:
    """Register runtime targets: profiles that ``export(target=name)`` (``--target name``)
    selects, each bringing graph passes (fusions into a runtime's fused ops, weight
    quantization), symbolic overrides that apply only while it is selected, and the opset
    and IR version each runtime version loads.

    Runs when the plugin loads; only a plugin loaded with every export (one that declares no
    ops) may register targets.

    :param registry: the registrar bound to this plugin;
        ``registry.register_target(name, oxport.targets.Target(name, ...))`` registers one.

    Example::

        @oxport.hookimpl
        def oxport_register_targets(registry):
            registry.register_target("myrt", Target("myrt", passes=[("fuse-x", fuse_x)],
                                                    versions={"2.0": (21, 10)}))
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
def oxport_model_exported(
    model: torch.nn.Module | torch.jit.ScriptModule | torch.jit.ScriptFunction,
    result: ExportResult,
) -> None:
    """Called after each successful conversion with the model and its ExportResult.

    Runs at the end of each conversion (``oxport.export``, ``oxport.convert``,
    ``oxport.export_to_pretty_string``), once the model is serialized (and checked, if
    asked) and before ``export`` writes it, in every plugin of the export's selection that
    implements it. An exception it raises propagates to the caller and fails the export.
    A plugin loaded on demand may not implement it.

    :param model: the model as the caller passed it.
    :param result: what the conversion produced: the graph, the serialized model, the
        opset, the symbolics used and the fallbacks that served nodes.

    Example::

        @oxport.hookimpl
        def oxport_model_exported(model, result):
            print(len(result.graph.nodes), "nodes")
    """
