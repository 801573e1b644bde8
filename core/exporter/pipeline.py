"""One export's data path, a function per phase: load the plugins, read the model through a
front end, walk its source graph into oxport IR, run the graph passes, settle the graph's
inputs and outputs, serialize. :func:`convert` runs them in order."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from oxport import plugin_manager as plugin_loader
from oxport import serialize, targets
from oxport.errors import (
    InvalidExportArgumentError,
    UnsupportedOperatorError,
    how_to_set,
    user_stacklevel,
    warn_at_source,
)
from oxport.exporter import dim_names, progress
from oxport.exporter.options import (
    ExportOptions,
    check_front_end_options,
    check_model,
    check_opset,
    check_training,
)
from oxport.exporter.pretty import pretty
from oxport.exporter.result import ExportResult, ExportWarning, input_leaves
from oxport.exporter.state import (
    capture_garbage_collected,
    exporting,
    select_model_mode_for_export,
    verbose_log,
)
from oxport.frontends import arguments, io_types, quantized_io, weightless
from oxport.frontends.arguments import dynamic_axis_pairs
from oxport.frontends.base import FrontEnd
from oxport.frontends.torchscript import baked_sizes, trace
from oxport.ir import Graph
from oxport.passes import dtype_legalization, functions, optimize
from oxport.passes import folding as passes
from oxport.registry import RegistryView
from oxport.types import OperatorExportTypes, TrainingMode
from oxport.walk import Conversion, Unconvertible

log = logging.getLogger("oxport")

#: Fallback plugin names enabled by each operator_export_type.
EXPORT_TYPE_FALLBACKS = {
    OperatorExportTypes.ONNX: (),
    OperatorExportTypes.ONNX_ATEN: ("aten",),
    OperatorExportTypes.ONNX_ATEN_FALLBACK: ("aten-fallback",),
    OperatorExportTypes.ONNX_FALLTHROUGH: ("fallthrough",),
}


def convert(model: Any, args: Any, options: ExportOptions, *, check: bool = True
            ) -> ExportResult:
    """Convert ``model`` called on ``args`` as ``options`` say, without writing a file
    (``check``: run the ONNX checker on the result)."""
    timings: dict[str, float] = {}
    with progress.phase("plugins", timings):
        manager = plugin_loader.load(autoload=options.autoload_plugins, allow=options.plugins,
                                     block=options.disable_plugins)
        registry = RegistryView(manager.registry, plugin_loader.runtime_registry())
        enabled = resolve_fallbacks(registry, options.export_type, options.fallbacks)
        selection = targets.select(registry.targets, options.target)
        if selection is not None:
            registry = selection.view(registry)
            options = dataclasses.replace(
                options, opset=selection.opset(options.opset, options.opset_given))
            io_types.enable(registry.io_types)
            model, args = selection.prepare(model, args)
    training = is_training(model, options.training)
    grad = tracing_grad(options.exported)  # the caller's, read before no_grad() below

    with verbose_log.held() if options.verbose else contextlib.nullcontext():
        with exporting(), select_model_mode_for_export(model, options.training), \
                torch.no_grad():
            with progress.phase("trace", timings):
                front = read_model(model, args, registry, options, grad)
            with progress.phase("convert", timings) as advance:
                conversion = Conversion(
                    registry, options.opset, fallbacks=enabled,
                    custom_opsets=dict(options.custom_opsets), training=training,
                    unloaded=functools.partial(plugin_loader.unloaded_providers,
                                               manager.selection),
                    autograd_inlining=options.autograd_inlining,
                    params_are_inputs=options.params_are_inputs, progress=advance,
                    sizes_may_vary=bool(options.dynamic_axes) and front.example_sizes)
                try:
                    graph = conversion.run(front)
                except UnsupportedOperatorError as exc:
                    if selection is None:
                        raise
                    raise selection.explain(exc) from exc
        dynamic_inputs = _dynamic_inputs(graph, options.input_names, options.output_names,
                                         options.dynamic_axes)
        _warn_traced_sizes_of_dynamic_axes(graph, conversion, dynamic_inputs, front.graph,
                                           front.baked)

        with progress.phase("passes", timings):
            readers = passes.input_readers(graph)
            _transform(graph, conversion, registry, options, dynamic_inputs,
                       folding=options.do_constant_folding and not training)
            if selection is not None:
                selection.run(graph, conversion, options.opset)
            input_names, dynamic_axes = _settle_boundary(graph, front, manager, registry,
                                                         options, readers)
            if not front.example_sizes:
                dynamic_axes = _static_axes_dropped(graph, input_names, dynamic_axes)
            _finish(graph, conversion, model, options)

        with progress.phase("serialize", timings):
            serialized = _serialize(graph, model, front, input_names, dynamic_axes, options)
            if dynamic_axes and front.example_sizes:
                dim_names.name_open_output_dims(serialized)
        if selection is not None:
            selection.check(serialized.model.ir_version)
        if options.verbose:
            print(pretty(serialized))
        result = ExportResult(graph, serialized, options.opset, dict(conversion.used),
                              conversion.fallback_uses,
                              [ExportWarning.of(w) for w in front.warnings], front.output_notes,
                              timings)
        for note in front.output_notes:
            if getattr(note, "lossy", True):
                warnings.warn(f"oxport: {note}.", UserWarning, stacklevel=user_stacklevel())
        if check:
            with progress.phase("check", timings):
                serialize.check(serialized)
        log.info("exported %d nodes at opset %d in %.3f s", len(graph.nodes), options.opset,
                 sum(timings.values()))
    manager.pm.hook.oxport_model_exported(model=model, result=result)
    return result


# -- plugins --------------------------------------------------------------------------
def resolve_fallbacks(registry: RegistryView, export_type: OperatorExportTypes,
                      extra: Sequence[str]) -> list[tuple[str, Any]]:
    """The fallbacks the export type and ``fallbacks=`` ask for, in order."""
    available = registry.fallbacks
    installed = ", ".join(sorted(available)) or "none"
    enabled = []
    for name in EXPORT_TYPE_FALLBACKS[export_type]:
        if name not in available:
            raise InvalidExportArgumentError(
                f"operator_export_type=OperatorExportTypes.{export_type.name} needs the {name!r} "
                f"fallback plugin, which is not loaded (loaded fallbacks: {installed}). Install "
                "or enable the plugin that provides it (check plugins=/disable_plugins= and "
                "OXPORT_* plugin settings), or export with OperatorExportTypes.ONNX.")
        enabled.append((name, available[name]))
    for name in extra:
        if name not in available:
            raise InvalidExportArgumentError(
                f"{how_to_set('fallbacks', name)}: no loaded plugin provides the {name!r} "
                f"fallback (loaded fallbacks: {installed}). Is its plugin installed and not "
                "blocked?")
        if name not in dict(enabled):
            enabled.append((name, available[name]))
    return enabled


def loaded_registry() -> RegistryView:
    """The symbolics of the plugins loaded by default, with those registered at run time."""
    return RegistryView(plugin_loader.load().registry, plugin_loader.runtime_registry())


# -- front end ------------------------------------------------------------------------
def read_model(model: Any, args: Any, registry: RegistryView, options: ExportOptions,
               grad: bool) -> FrontEnd:
    """The front end ``options`` choose, reading ``model`` called on ``args`` with grad
    mode ``grad`` (:func:`tracing_grad`)."""
    io_types.enable(registry.io_types)
    with torch.set_grad_enabled(grad):
        front = (_exported_front_end(model, args, registry, options.opset,
                                     options.dynamic_shapes, options.dynamic_axes,
                                     options.input_names, runnable=False,
                                     weights=options.weights)
                 if options.exported
                 else _traced_front_end(model, args, options.input_names, options.dynamic_axes,
                                        options.opset))
        trace.release_free_memory()
    return front


def source_front_end(model: Any, args: Any, registry: RegistryView, opset: int,
                     dynamo: bool, dynamic_shapes: Any) -> FrontEnd:
    """The front end ``export(..., dynamo=dynamo)`` reads ``model`` with (torch.export for
    ``dynamo=True`` or an ExportedProgram, else the TorchScript tracer), its options
    checked as ``export`` checks them. Call it in ``exporting()`` and ``no_grad()`` (with
    grad set back as :func:`tracing_grad` says, to trace as export does)."""
    check_front_end_options(model, dynamo, dynamic_shapes)
    io_types.enable(registry.io_types)
    if dynamo or isinstance(model, torch.export.ExportedProgram):
        return _exported_front_end(model, args, registry, opset, dynamic_shapes, None, None)
    return _traced_front_end(model, args, opset=opset)


def _exported_front_end(model: Any, args: Any, registry: RegistryView, opset: int,
                        dynamic_shapes: Any, dynamic_axes: Mapping[str, Any] | None,
                        input_names: Sequence[str] | None, runnable: bool = True,
                        weights: Any = None) -> FrontEnd:
    """The torch.export front end: ``model`` captured (non-strict) unless it is an
    ``ExportedProgram`` already, decomposed except where a pack serves the op. Unless
    ``runnable`` (the front end keeps the program to run it), what the capture made is
    collected once the program is read. With ``weights``, a model on the meta device is
    captured on fake tensors and its weights are streamed from ``weights``."""
    front = _exported_source(model, args, registry, opset, dynamic_shapes, dynamic_axes,
                             input_names, runnable, weights)
    if weights is not None:
        front.params = serialize.streamed.bind(front.params, weights)
    return front


def _exported_source(model: Any, args: Any, registry: RegistryView, opset: int,
                     dynamic_shapes: Any, dynamic_axes: Mapping[str, Any] | None,
                     input_names: Sequence[str] | None, runnable: bool, weights: Any
                     ) -> FrontEnd:
    """:func:`_exported_front_end`'s capture and reading."""
    from oxport.frontends import capture, exported

    served = exported.ServedOps(registry, opset)
    with capture_garbage_collected(), capture.capture_state_released():
        if isinstance(model, torch.export.ExportedProgram):
            return exported.read(exported.decompose(model, served), runnable=runnable)
        positional, kwargs = arguments.normalize_args(args)
        arguments.check_inputs(positional, kwargs, model.forward)
        # Grad on: torch.export records grad mode changes otherwise.
        with torch.enable_grad(), weightless.weightless_capture(model, weights):
            captured = capture.capture(
                model, positional, kwargs, dynamic_shapes=dynamic_shapes,
                dynamic_axes=dynamic_axes, input_names=input_names,
                kernels=registry.capture_kernels, served=served)
        program = exported.decompose(captured.program, served)
        names = [*(input_names or ()), *captured.input_names[len(input_names or ()):]]
        front = exported.read(program, captured.axis_names, input_names=names,
                              notes=captured.notes, output_names=captured.output_names,
                              prefix="model.", runnable=runnable)
        del program, captured  # collected with the rest of the capture as the block ends
        return front


def _traced_front_end(model: Any, args: Any, input_names: Sequence[str] | None = None,
                      dynamic_axes: Mapping[str, Any] | None = None, opset: int | None = None
                      ) -> FrontEnd:
    """The TorchScript front end: ``model`` traced, or its scripted graph (for ``opset``)."""
    if isinstance(model, FrontEnd):  # already traced (find_mismatch's partitions)
        return model
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return trace.script_front_end(model, args, input_names, dynamic_axes, opset)
    return trace.trace_module(model, args, input_names, dynamic_axes)


def tracing_grad(exported: bool = False) -> bool:
    """Whether to trace with grad: in the caller's grad mode, as torch.onnx does, since layers
    choose their path by it (MultiheadAttention's and the Transformer layers' inference fast
    path needs it off); the torch.export front end captures without grad."""
    return torch.is_grad_enabled() and not exported


def is_training(model: Any, mode: TrainingMode) -> bool:
    """Whether ``mode`` exports ``model`` in training mode."""
    if mode == TrainingMode.TRAINING:
        return True
    if mode == TrainingMode.PRESERVE:
        return bool(getattr(model, "training", False))
    return False


# -- walk -----------------------------------------------------------------------------
def collect_unconvertible(model: Any, args: Any, training: TrainingMode,
                          opset_version: int | None, dynamo: bool = False,
                          dynamic_shapes: Any = None) -> tuple[Any, list[Unconvertible]]:
    """The source graph and every op in it that would not convert (the walker's
    collect-only mode), through the front end ``dynamo`` selects (arguments checked)."""
    opset = check_opset(opset_version)
    check_model(model)
    training = check_training(training)
    registry = loaded_registry()
    grad = tracing_grad(dynamo or isinstance(model, torch.export.ExportedProgram))
    with exporting(), select_model_mode_for_export(model, training), torch.no_grad():
        with torch.set_grad_enabled(grad):
            front = source_front_end(model, args, registry, opset, dynamo, dynamic_shapes)
        conversion = Conversion(registry, opset, collect_only=True,
                                training=is_training(model, training))
        conversion.walk(front)
    return front.graph, list(conversion.unconvertible.values())


def _warn_traced_sizes_of_dynamic_axes(graph: Graph, conversion: Conversion,
                                       dynamic_inputs: dict[int, dict[int, str]] | None,
                                       front_graph: torch._C.Graph,
                                       baked: Sequence[baked_sizes.BakedSize]) -> None:
    """Warn for each op whose output the trace fixed from a size that ``dynamic_axes`` lets
    vary (the pieces of a split, the dims ``squeeze()`` removes), and for each size of such
    an axis the model's Python code turned into a number or a decision: the file is then
    only right at sizes that keep it. One shape inference, and only when both exist."""
    if not (conversion.traced_size_uses or baked) or not dynamic_inputs:
        return
    dims = optimize.inferred_dims(graph, dynamic_inputs)
    traced = _traced_dynamic_sizes(graph, dynamic_inputs)
    second = functools.cache(lambda: optimize.inferred_dims(graph, {
        index: {axis: 2 * size + 1 for axis, size in axes.items()}
        for index, axes in traced.items()}))
    baked_sizes.warn(baked, front_graph, conversion.env.get, dims, second=second,
                     dynamic_sizes={size: dynamic_inputs[index][axis]
                                    for index, axes in traced.items()
                                    for axis, size in axes.items()})
    for value, axis, what, source in conversion.traced_size_uses:
        dim = dims.get(id(value), ())[axis:axis + 1]
        if dim and not isinstance(dim[0], int):
            warn_at_source(
                f"oxport: {what} comes from the traced size of a dimension that dynamic_axes "
                f"makes dynamic ({dim[0] or 'unnamed'}){f' at {source}' if source else ''}: "
                "the exported model is only right at sizes that give the same value. Compute "
                "it from tensor sizes in the model, or keep that axis static.",
                UserWarning, source)


def _traced_dynamic_sizes(graph: Graph, dynamic_inputs: Mapping[int, Mapping[int, str]]
                          ) -> dict[int, dict[int, int]]:
    """Graph input index -> {dynamic axis: its size when traced}, where the type knows it."""
    sizes: dict[int, dict[int, int]] = {}
    for index, axes in dynamic_inputs.items():
        shape = graph.inputs[index].shape if index < len(graph.inputs) else None
        for axis in axes:
            if shape and -len(shape) <= axis < len(shape) and isinstance(shape[axis], int):
                sizes.setdefault(index, {})[axis] = shape[axis]
    return sizes


def _dynamic_inputs(graph: Graph, input_names: Sequence[str] | None,
                    output_names: Sequence[str] | None,
                    dynamic_axes: Mapping[str, Any] | None) -> dict[int, dict[int, str]] | None:
    """Graph input index -> {dynamic axis: its name}, for the clean-up passes; None (any
    axis of any input may vary) when a key names neither an input nor a given output."""
    if not dynamic_axes:
        return {}
    names = list(input_names or [])
    index = {(names[i] if i < len(names) else serialize.clean_name(v.name)): i
             for i, v in enumerate(graph.inputs)}
    result: dict[int, dict[int, str]] = {}
    for key, spec in dynamic_axes.items() if isinstance(dynamic_axes, Mapping) else ():
        if key in index and isinstance(spec, (Mapping, list, tuple)):
            pairs = dynamic_axis_pairs(key, spec)
            result.setdefault(index[key], {}).update(
                (a, str(n)) for a, n in pairs if isinstance(a, int) and not isinstance(a, bool))
        elif key not in (output_names or ()):
            return None
    return result


def _static_axes_dropped(graph: Graph, input_names: Sequence[str] | None,
                         dynamic_axes: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``dynamic_axes`` without the input axes the graph proved static (torch.export
    fixed them, with a warning, where the model's code makes them so): the file keeps
    those sizes, as they are the only ones the model runs at."""
    if not isinstance(dynamic_axes, Mapping):
        return dynamic_axes
    names = list(input_names or [])
    shapes = {(names[i] if i < len(names) else serialize.clean_name(v.name)): v.type().shape
              for i, v in enumerate(graph.inputs)}
    kept: dict[str, Any] = {}
    for key, spec in dynamic_axes.items():
        shape = shapes.get(key)
        if shape is None or not isinstance(spec, (Mapping, list, tuple)):
            kept[key] = spec
            continue
        kept[key] = {axis: name for axis, name in dynamic_axis_pairs(key, spec)
                     if not (isinstance(axis, int) and -len(shape) <= axis < len(shape)
                             and isinstance(shape[axis], int))}
    return kept


# -- passes ---------------------------------------------------------------------------
def _transform(graph: Graph, conversion: Conversion, registry: RegistryView,
               options: ExportOptions, dynamic_inputs: dict[int, dict[int, str]] | None,
               folding: bool) -> None:
    """The plugins' graph passes, dtype legalization, then (``folding``) the clean-ups."""
    for _name, graph_pass, _provenance in registry.passes:
        graph_pass(graph, conversion)
    dtype_legalization.legalize_dtypes(graph, options.opset)
    if folding:
        # Parameters the user feeds at run time must not be folded into constants.
        frozen = ({id(v) for v in graph.initializers.values() if v.is_parameter}
                  if options.params_are_inputs else set())
        optimize.optimize(graph, options.opset, frozen=frozen, dynamic_axes=dynamic_inputs,
                          across_modules=not options.as_functions,
                          constants_as_initializers=not options.keep_initializers_as_inputs)


def _settle_boundary(graph: Graph, front: FrontEnd, manager: plugin_loader.PluginManager,
                     registry: RegistryView, options: ExportOptions,
                     readers: Mapping[int, set[int]] | None = None
                     ) -> tuple[Sequence[str] | None, Mapping[str, Any] | None]:
    """The graph's inputs and outputs as the file has them: the loaded plugins'
    ``oxport_graph_boundary`` hooks, dead code removed, unused inputs dropped (``readers``:
    :func:`passes.input_readers` before the passes); returns ``input_names`` and
    ``dynamic_axes`` for what remains."""
    for op in quantized_io.boundary_ops(front):
        registry.lookup(op, options.opset)  # loads the pack that serves it, and its hook
    given = list(options.input_names or [])
    names = list(given)
    manager.pm.hook.oxport_graph_boundary(graph=graph, front=front, input_names=names,
                                          opset=options.opset)
    # Unchanged names stay as the user gave them, for serialize to check.
    input_names = names if names != given else options.input_names
    passes.eliminate_dead_code(graph)
    return _drop_unused_inputs(graph, input_names, options.dynamic_axes, readers)


def _drop_unused_inputs(graph: Graph, input_names: Sequence[str] | None,
                        dynamic_axes: Mapping[str, Any] | None,
                        readers: Mapping[int, set[int]] | None = None
                        ) -> tuple[Sequence[str] | None, Mapping[str, Any] | None]:
    """Drop the user inputs nothing reads, as torch.onnx does; ``input_names`` named them
    before the drop (as in torch.onnx), so their names and dynamic axes go with them."""
    if input_leaves(graph) is None:
        return input_names, dynamic_axes  # which argument feeds which input is unknown: keep all
    names = list(input_names or [])
    before = [names[i] if i < len(names) else serialize.clean_name(value.name)
              for i, value in enumerate(graph.inputs)]
    dropped = set(passes.drop_unused_inputs(graph, readers))
    if not dropped:
        return input_names, dynamic_axes
    graph.dropped_inputs = [before[i] for i in sorted(dropped)]
    names = [name for i, name in enumerate(names) if i not in dropped]
    if isinstance(dynamic_axes, Mapping):
        dynamic_axes = {key: axes for key, axes in dynamic_axes.items()
                        if key not in graph.dropped_inputs}
    return names, dynamic_axes


def _finish(graph: Graph, conversion: Conversion, model: Any, options: ExportOptions) -> None:
    """Custom domains at their versions; the selected module calls as local functions."""
    for domain in list(graph.opset_imports):
        if domain:
            graph.opset_imports[domain] = conversion.domain_version(domain)
    if options.as_functions:
        functions.extract_functions(graph, model, options.as_functions)


# -- serialize ------------------------------------------------------------------------
def _serialize(graph: Graph, model: Any, front: FrontEnd, input_names: Sequence[str] | None,
               dynamic_axes: Mapping[str, Any] | None, options: ExportOptions
               ) -> serialize.Serialized:
    """The ModelProto of ``graph``, its values named (weights not copied yet)."""
    verbose = options.verbose
    return serialize.serialize(
        graph, input_names=input_names,
        output_names=_output_names(options.output_names, front, graph, input_names),
        dynamic_axes=dynamic_axes, example_sizes=front.example_sizes,
        export_params=options.export_params,
        keep_initializers_as_inputs=options.keep_initializers_as_inputs,
        param_names=_state_dict_order(model), verbose=verbose,
        add_node_names=options.add_node_names,
        doc_string=_doc_string(model) if verbose else "",
        module_types=_module_types(model) if verbose else None)


def _output_names(given: Sequence[str] | None, front: FrontEnd, graph: Graph,
                  input_names: Sequence[str] | None) -> Sequence[str] | None:
    """``output_names``, completed with the dict keys and namedtuple fields the model
    returned its outputs under, when each remaining output has one and none is taken. An
    output named like an input (a cache the model takes and returns grown) is
    ``present.<name>``."""
    names = list(given or [])
    taken = {*names, *(input_names or ()), *graph.initializers,
             *(serialize.clean_name(v.name) for v in graph.inputs)}
    keyed = [f"present.{k}" if k in taken else k for k in front.output_names[len(names):]]
    if len(front.output_names) != len(graph.outputs) or not keyed or not all(keyed) \
            or len(set(keyed)) != len(keyed) or taken & set(keyed):
        return given
    return [*names, *keyed]  # type: ignore[list-item]


def _state_dict_order(model: Any) -> list[str]:
    if isinstance(model, torch.export.ExportedProgram):
        return list(model.state_dict)
    if isinstance(model, torch.nn.Module):
        return list(model.state_dict(keep_vars=True).keys())
    return []


def _module_types(model: Any) -> dict[str, str]:
    """Module path -> class name, for the ``scope: AlexNet/Sequential[features]/...`` text."""
    if not isinstance(model, torch.nn.Module):
        return {}
    return {path: type(module).__name__ for path, module in model.named_modules()}


def _doc_string(model: Any) -> str:
    forward = getattr(model, "forward", model)
    code = getattr(forward, "__code__", None)
    if code is not None:
        return f"{type(model).__name__} from {code.co_filename}:{code.co_firstlineno}"
    return type(model).__name__

