"""The public API: ``export`` and its companions, with torch.onnx's semantics."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import gc
import io
import logging
import os
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import IO, Any

import onnx
import torch

from oxport import plugin_manager as plugin_loader
from oxport import progress, serialize
from oxport.errors import InvalidExportArgumentError, OnnxExporterError, how_to_set
from oxport.frontends import arguments, quantized_io
from oxport.frontends.base import FrontEnd
from oxport.frontends.torchscript import baked_sizes, trace
from oxport.ir import Graph
from oxport.passes import dtype_legalization, functions, optimize
from oxport.passes import folding as passes
from oxport.process_hooks import SharedHook
from oxport.registry import Layer, Provenance, RegistryView, SymbolicEntry
from oxport.types import (
    DEFAULT_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    OperatorExportTypes,
    TrainingMode,
)
from oxport.walk import Conversion, FallbackUse, Unconvertible, user_stacklevel

log = logging.getLogger("oxport")

#: Fallback plugin names enabled by each operator_export_type.
EXPORT_TYPE_FALLBACKS = {
    OperatorExportTypes.ONNX: (),
    OperatorExportTypes.ONNX_ATEN: ("aten",),
    OperatorExportTypes.ONNX_ATEN_FALLBACK: ("aten-fallback",),
    OperatorExportTypes.ONNX_FALLTHROUGH: ("fallthrough",),
}
#: Whether the current thread (or asyncio task) runs inside an export: per context, so
#: another thread's eager forward never sees an export, and nesting restores the outer value.
_in_export: contextvars.ContextVar[bool] = contextvars.ContextVar("oxport_in_export",
                                                                  default=False)


#: Whether the caller of the export running in this context had the cyclic collector on
#: (None: no export is running; an export called by another keeps the outer caller's).
_caller_gc: contextvars.ContextVar[bool | None] = contextvars.ContextVar("oxport_caller_gc",
                                                                         default=None)


def _gc_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with Python's cyclic garbage collector paused: an export allocates enough
    objects to set off full collections, each a scan of every object of the process (a
    quarter of a second with a transformers model loaded), and oxport's own phases free
    nothing cyclic that matters before it ends (torch.export's capture does:
    :func:`_capture_garbage_collected`)."""
    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        outer = _caller_gc.get()
        token = _caller_gc.set(enabled if outer is None else outer)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            _caller_gc.reset(token)
            if enabled:
                gc.enable()
    return paused


@contextlib.contextmanager
def _capture_garbage_collected() -> Iterator[None]:
    """Run the block with the collector on over the objects created inside it, and collect
    them at its end, if the export's caller had the collector on: torch.export's capture
    leaves ~22,000 cyclic objects on ResNet-50 (2 MB) that a paused collector would keep
    until the export ends. Every older object is frozen meanwhile (``gc.freeze``), so the
    collections scan only the capture's (scanning the whole process made the capture
    10-25% slower). Where the caller froze objects itself, the block runs paused and its
    garbage (all in the youngest generation) is collected after it."""
    if not _caller_gc.get():
        yield
        return
    if gc.get_freeze_count():  # unfreezing ours would unfreeze the caller's too
        yield
        gc.collect(0)
        return
    gc.freeze()
    gc.enable()
    try:
        yield
        gc.collect()  # every generation holds only the block's objects (the rest is frozen)
    finally:
        gc.disable()
        gc.unfreeze()


@dataclasses.dataclass(frozen=True)
class ExportWarning:
    """A warning raised while tracing the model (a ``TracerWarning`` from its code, ...):
    ``str()`` gives ``file:line: Category: message``."""

    category: type[Warning]
    message: str
    filename: str
    lineno: int

    @classmethod
    def of(cls, caught: warnings.WarningMessage) -> ExportWarning:
        return cls(caught.category, str(caught.message), caught.filename, caught.lineno)

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}: {self.category.__name__}: {self.message}"


@dataclasses.dataclass
class ExportResult:
    """What a conversion produced, before or after it was written."""

    graph: Graph
    serialized: serialize.Serialized
    opset: int
    used: dict[SymbolicEntry, int]
    fallback_uses: list[FallbackUse]
    warnings: list[ExportWarning]
    output_notes: list[str]
    timings: dict[str, float]

    def __repr__(self) -> str:
        graph = self.serialized.model.graph
        return (f"<ExportResult opset {self.opset}: {_count(len(graph.node), 'node')}, inputs "
                f"{', '.join(v.name for v in graph.input) or 'none'}, outputs "
                f"{', '.join(v.name for v in graph.output)}, "
                f"{_count(len(self.serialized.weights), 'weight')} "
                f"({progress.size(self.serialized.weight_bytes)}), "
                f"{_count(len(self.warnings), 'warning')}>")

    def model_proto(self) -> onnx.ModelProto:
        """The complete ModelProto, weights included (copies them)."""
        return self.serialized.to_model_proto()

    def save(self, f: str | os.PathLike[str] | IO[bytes],
             external_data: bool | str | None = None) -> None:
        """Write the model atomically to a path, or to a binary file object
        (``external_data`` as for :func:`export`)."""
        with progress.phase("write", self.timings) as advance:
            serialize.write(self.serialized, f, external_data=external_data, progress=advance)

    def to_bytes(self) -> bytes:
        return serialize.to_bytes(self.serialized)

    def report(self, model: Any = None) -> Any:
        """An :class:`oxport.diagnose.report.ExportReport` of this export (pass ``model`` to also scan
        its ``forward`` code for tracing pitfalls)."""
        from oxport.diagnose.report import build_report
        return build_report(self, model)

    def provenance(self, node_name: str | None = None) -> Any:
        """Where ONNX node ``node_name`` came from (TorchScript op, source line, plugin), or
        the table of every node: see :func:`oxport.diagnose.report.node_origins`."""
        from oxport.diagnose.report import node_origins
        table = node_origins(self)
        return table if node_name is None else table[node_name]

    def input_leaves(self) -> list[int] | None:
        """For each ONNX graph input (user inputs, in order), the index of the leaf of
        the flattened ``args`` it comes from (``pytree.tree_leaves`` of the (positional,
        named) arguments, as :func:`oxport.frontends.torchscript.arguments.normalize_args` splits them); None when
        the front end did not say (then the inputs are the args' tensors, in order)."""
        return _input_leaves(self.graph)

    def feeds(self, args: Any) -> dict[str, Any]:
        """ONNX Runtime feeds (name -> numpy array) for ``args`` given in export's form."""
        from torch.utils import _pytree as pytree

        leaves = pytree.tree_leaves(arguments.normalize_args(args))
        slots = self.input_leaves()
        if slots is None:  # the args' tensors in order, a list of tensors one (Sequence) feed
            leaves = pytree.tree_leaves(arguments.normalize_args(args), is_leaf=arguments.is_tensor_list)
            slots = [i for i, leaf in enumerate(leaves)
                     if isinstance(leaf, torch.Tensor) or arguments.is_tensor_list(leaf)]
        inputs = self.serialized.model.graph.input
        parts = [(value.meta or {}).get("arg_part") for value in self.graph.inputs]
        return {i.name: _as_input_dtype(arguments.feed_array(leaves[leaf], part), i, leaves[leaf])
                for i, leaf, part in zip(inputs, slots, parts)}

    def plugins_used(self) -> dict[str, int]:
        """How many TorchScript nodes each plugin converted."""
        counts: dict[str, int] = {}
        for entry, count in self.used.items():
            key = str(entry.provenance)
            counts[key] = counts.get(key, 0) + count
        for use in self.fallback_uses:
            key = f"fallback:{use.fallback}"
            counts[key] = counts.get(key, 0) + 1
        return counts


@_gc_paused
def export(model: torch.nn.Module | torch.jit.ScriptModule | torch.jit.ScriptFunction,
           args: Any = (), f: str | os.PathLike[str] | IO[bytes] | None = None,
           export_params: bool = True, verbose: bool | None = False,
           training: TrainingMode = TrainingMode.EVAL,
           input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
           operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
           opset_version: int | None = None, do_constant_folding: bool = True,
           dynamic_axes: Mapping[str, Any] | None = None,
           keep_initializers_as_inputs: bool | None = None,
           custom_opsets: Mapping[str, int] | None = None,
           export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = False,
           autograd_inlining: bool = True, *, kwargs: Mapping[str, Any] | None = None,
           dynamo: bool = False, dynamic_shapes: Any = None,
           external_data: bool | str | None = None,
           report: bool | str | os.PathLike[str] | None = None, verify: bool = False,
           optimize: bool = True, profile: bool = False, dump_exported_program: bool = False,
           artifacts_dir: str | os.PathLike[str] = ".",
           custom_translation_table: Mapping[Callable[..., Any], Any] | None = None,
           fallbacks: Sequence[str] | None = None, plugins: Sequence[str] | None = None,
           disable_plugins: Sequence[str] | None = None, autoload_plugins: bool | None = None,
           ) -> ExportResult:
    """Export ``model`` to ONNX, written to ``f`` (a path or a binary file object).

    The parameters are those of torch.onnx's ``export`` with ``dynamo=False`` (the
    TorchScript path), positionally as in torch 2.1 or by keyword as in torch 2.13;
    torch.onnx's ``TrainingMode`` and ``OperatorExportTypes`` members are accepted. ``args``
    is a tuple of inputs, a single tensor, or a tuple ending in a dict of named arguments
    (end with an empty dict to pass a dict positionally); ``kwargs`` adds named arguments.
    Nested tuples, lists and dicts of tensors are flattened into graph inputs in order.
    See docs/export.md for every parameter.

    ``dynamo=True`` captures the model with ``torch.export.export`` (non-strict) and converts
    its graph with the same op packs; ``dynamic_shapes`` then gives its dynamic dims
    (``torch.export.Dim``s name the ONNX dims; ``dynamic_axes`` is translated when it is
    not given). An ``ExportedProgram`` as ``model`` is converted as it is. ``optimize``,
    ``profile``, ``dump_exported_program``, ``artifacts_dir`` and
    ``custom_translation_table`` do nothing here, as in torch.onnx with ``dynamo=False``.
    ``verify=True`` checks the model with ONNX Runtime against eager PyTorch before it is
    written (:func:`oxport.diagnose.verification.verify`'s checks; a failure raises
    :class:`oxport.diagnose.verification.VerificationError` and writes nothing).

    oxport adds: ``external_data`` (force it on or off; by default it is used past 2 GB,
    as one file beside the model; ``"per_tensor"`` writes one file per weight), ``report``
    (True prints an :class:`oxport.diagnose.report.ExportReport`; a path writes it there, as JSON
    when the path ends in ``.json``, else as text), ``fallbacks`` (fallback plugins by
    name, in order), ``plugins`` / ``disable_plugins`` / ``autoload_plugins`` (which
    plugins load). ``f=None`` converts without writing anything.

    Nothing is left at ``f`` when the export fails, except after a :class:`CheckerError`:
    then the invalid model is still written, for inspection.

    Returns an :class:`ExportResult` (torch.onnx returns None).
    """
    _check_front_end_options(model, dynamo, dynamic_shapes)
    args = _with_kwargs(args, kwargs)
    if f is not None:
        _check_target(f)
    result = convert(
        model, args, export_params=export_params, verbose=bool(verbose), training=training,
        input_names=input_names, output_names=output_names,
        operator_export_type=operator_export_type, opset_version=opset_version,
        do_constant_folding=do_constant_folding, dynamic_axes=dynamic_axes,
        keep_initializers_as_inputs=keep_initializers_as_inputs, custom_opsets=custom_opsets,
        export_modules_as_functions=export_modules_as_functions,
        autograd_inlining=autograd_inlining, fallbacks=fallbacks, plugins=plugins,
        disable_plugins=disable_plugins, autoload_plugins=autoload_plugins,
        check=False, dynamo=dynamo, dynamic_shapes=dynamic_shapes,
    )
    if verify:
        from oxport.diagnose.verification import verify_result
        verify_result(model, args, result, dynamic_axes=dynamic_axes, training=training)
    if f is not None:
        result.save(f, external_data=external_data)
    with progress.phase("check", result.timings):
        serialize.check(result.serialized)
    if report:
        result.report(model).emit(None if report is True else report)
    return result


@_gc_paused
def convert(model: Any, args: Any, *, export_params: bool = True, verbose: bool = False,
            training: TrainingMode = TrainingMode.EVAL,
            input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
            operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
            opset_version: int | None = None, do_constant_folding: bool = True,
            dynamic_axes: Mapping[str, Any] | None = None,
            keep_initializers_as_inputs: bool | None = None,
            custom_opsets: Mapping[str, int] | None = None,
            export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = False,
            autograd_inlining: bool = True, fallbacks: Sequence[str] | None = None,
            plugins: Sequence[str] | None = None, disable_plugins: Sequence[str] | None = None,
            autoload_plugins: bool | None = None, check: bool = True,
            add_node_names: bool = True, dynamo: bool = False,
            dynamic_shapes: Any = None) -> ExportResult:
    """Convert without writing a file; same parameters as :func:`export`."""
    opset = _check_opset(opset_version)
    _check_model(model)
    _check_front_end_options(model, dynamo, dynamic_shapes)
    exported = dynamo or isinstance(model, torch.export.ExportedProgram)
    if isinstance(model, torch.export.ExportedProgram) and export_modules_as_functions:
        raise InvalidExportArgumentError(
            "export_modules_as_functions needs the model's modules, which an ExportedProgram "
            "does not hold: pass the nn.Module with dynamo=True instead.")
    export_type = _check_export_type(operator_export_type)
    training = _check_training(training)
    custom_opsets = _check_custom_opsets(custom_opsets)
    as_functions = functions.check_option(export_modules_as_functions, opset, model)
    if keep_initializers_as_inputs is None:
        keep_initializers_as_inputs = export_type != OperatorExportTypes.ONNX
    if opset < 9:  # IR 3: every initializer must also be a graph input
        keep_initializers_as_inputs = True

    timings: dict[str, float] = {}
    with progress.phase("plugins", timings):
        manager = plugin_loader.load(autoload=autoload_plugins, allow=plugins,
                                     block=disable_plugins)
        registry = RegistryView(manager.registry, plugin_loader.runtime_registry())
        enabled = _resolve_fallbacks(registry, export_type, fallbacks or ())
    training_graph = _is_training(model, training)
    tracing_grad = _tracing_grad(exported)

    with _verbose_log.held() if verbose else contextlib.nullcontext():
        with _exporting(), select_model_mode_for_export(model, training), torch.no_grad():
            with progress.phase("trace", timings), torch.set_grad_enabled(tracing_grad):
                front = (_exported_front_end(model, args, registry, opset, dynamic_shapes,
                                             dynamic_axes, input_names, runnable=False)
                         if exported
                         else _front_end(model, args, input_names, dynamic_axes))
                trace.release_free_memory()
            with progress.phase("convert", timings) as advance:
                conversion = Conversion(
                    registry, opset, fallbacks=enabled, custom_opsets=custom_opsets,
                    training=training_graph, unloaded=functools.partial(
                        plugin_loader.unloaded_providers, manager.selection))
                conversion.autograd_inlining = autograd_inlining
                conversion.params_are_inputs = keep_initializers_as_inputs or not export_params
                conversion.progress = advance
                graph = conversion.run(front)
        dynamic_inputs = _dynamic_inputs(graph, input_names, output_names, dynamic_axes)
        _warn_traced_sizes_of_dynamic_axes(graph, conversion, dynamic_inputs, front.graph,
                                           front.baked)

        with progress.phase("passes", timings):
            for _name, graph_pass, _provenance in registry.passes:
                graph_pass(graph, conversion)
            dtype_legalization.legalize_dtypes(graph, opset)
            if do_constant_folding and not training_graph:
                # Parameters the user feeds at run time must not be folded into constants.
                frozen = ({id(v) for v in graph.initializers.values() if v.is_parameter}
                          if keep_initializers_as_inputs or not export_params else set())
                optimize.optimize(graph, opset, frozen=frozen, dynamic_axes=dynamic_inputs,
                    across_modules=not as_functions,
                    constants_as_initializers=not keep_initializers_as_inputs)
            input_names = quantized_io.split_inputs(graph, front.example_inputs, input_names,
                                                    opset)
            quantized_io.split_outputs(graph, quantized_io.quantized_outputs(front.graph))
            passes.eliminate_dead_code(graph)
            input_names, dynamic_axes = _drop_unused_inputs(graph, input_names, dynamic_axes)
            for domain in list(graph.opset_imports):
                if domain:
                    graph.opset_imports[domain] = conversion.domain_version(domain)
            if as_functions:
                functions.extract_functions(graph, model, as_functions)

        with progress.phase("serialize", timings):
            serialized = serialize.serialize(
                graph, input_names=input_names,
                output_names=_output_names(output_names, front, graph, input_names),
                dynamic_axes=dynamic_axes, example_sizes=front.example_sizes,
                export_params=export_params,
                keep_initializers_as_inputs=keep_initializers_as_inputs,
                param_names=_state_dict_order(model), verbose=verbose,
                add_node_names=add_node_names, doc_string=_doc_string(model) if verbose else "",
                module_types=_module_types(model) if verbose else None)
        if verbose:
            print(pretty(serialized))
        result = ExportResult(graph, serialized, opset, dict(conversion.used),
                              conversion.fallback_uses,
                              [ExportWarning.of(w) for w in front.warnings], front.output_notes,
                              timings)
        for note in front.output_notes:
            if getattr(note, "lossy", True):
                warnings.warn(f"oxport: {note}.", UserWarning, stacklevel=3)
        if check:
            with progress.phase("check", timings):
                serialize.check(serialized)
        log.info("exported %d nodes at opset %d in %.3f s", len(graph.nodes), opset,
                 sum(timings.values()))
    manager.pm.hook.oxport_model_exported(model=model, result=result)
    return result


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@contextlib.contextmanager
def _exporting() -> Iterator[None]:
    """``is_in_onnx_export()`` is True inside, in this thread only (forward and symbolics
    run here)."""
    token = _in_export.set(True)
    try:
        yield
    finally:
        _in_export.reset(token)


def export_to_pretty_string(model: Any, args: Any, export_params: bool = True,
                            verbose: bool = False, training: TrainingMode = TrainingMode.EVAL,
                            input_names: Sequence[str] | None = None,
                            output_names: Sequence[str] | None = None,
                            operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
                            export_type: Any = None, google_printer: bool = False,
                            opset_version: int | None = None,
                            keep_initializers_as_inputs: bool | None = None,
                            custom_opsets: Mapping[str, int] | None = None,
                            add_node_names: bool = True, do_constant_folding: bool = True,
                            dynamic_axes: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    """Like :func:`export`, but returns a readable text form of the model."""
    result = convert(
        model, args, export_params=export_params, verbose=False, training=training,
        input_names=input_names, output_names=output_names,
        operator_export_type=operator_export_type, opset_version=opset_version,
        keep_initializers_as_inputs=keep_initializers_as_inputs, custom_opsets=custom_opsets,
        do_constant_folding=do_constant_folding, dynamic_axes=dynamic_axes,
        add_node_names=add_node_names, check=False, **kwargs)
    if google_printer:
        return str(result.model_proto())
    return pretty(result.serialized)


def pretty(serialized: serialize.Serialized) -> str:
    """The seed's readable graph form: ``%y : Float(2, 3) = onnx::Relu(%x), scope: ...``."""
    return _Printer(serialized).text()


class _Printer:
    def __init__(self, serialized: serialize.Serialized) -> None:
        model = serialized.model
        self.model = model
        self.types = {name: str(type_) for name, type_ in serialized.types.items()}
        for weight in serialized.weights:
            header = serialize.tensor_header(weight.name, weight.tensor)
            self.types[weight.name] = _tensor_text(header.data_type, list(header.dims))
        self.types.update({vi.name: _type_text(vi.type) for vi in
                           [*model.graph.input, *model.graph.output, *model.graph.value_info]})
        self.weights = [w.name for w in serialized.weights]

    def text(self) -> str:
        g = self.model.graph
        declared = [i.name for i in g.input]
        params = declared + [w for w in self.weights if w not in declared]
        lines = ["graph(" + ",\n      ".join(
            f"%{name} : {self.types.get(name, 'Tensor')}" for name in params) + ") {"]
        lines += self.nodes(g, "  ")
        lines.append("  return (" + ", ".join(f"%{o.name}" for o in g.output) + ")")
        lines.append("}")
        return "\n".join(lines)

    def nodes(self, graph: onnx.GraphProto, indent: str) -> list[str]:
        lines = []
        for node in graph.node:
            attrs = []
            subgraphs = []
            for attr in node.attribute:
                value = onnx.helper.get_attribute_value(attr)
                if isinstance(value, onnx.GraphProto):
                    subgraphs.append((attr.name, value))
                    continue
                if isinstance(value, onnx.TensorProto):
                    value = _tensor_value_text(value)
                elif isinstance(value, bytes):
                    value = repr(value.decode())
                attrs.append(f"{attr.name}={value}")
            outputs = ", ".join(f"%{o} : {self.types.get(o, 'Tensor')}" for o in node.output)
            domain = node.domain or "onnx"
            attr_text = f"[{', '.join(attrs)}]" if attrs else ""
            inputs = ", ".join(f"%{i}" if i else "None" for i in node.input)
            doc = f", {node.doc_string}" if node.doc_string else ""
            lines.append(f"{indent}{outputs} = {domain}::{node.op_type}{attr_text}({inputs}){doc}")
            for name, sub in subgraphs:
                lines.append(f"{indent}  block {name}({', '.join('%' + i.name for i in sub.input)}):")
                lines += self.nodes(sub, indent + "    ")
                lines.append(f"{indent}    -> ({', '.join('%' + o.name for o in sub.output)})")
        return lines


def _type_text(type_proto: onnx.TypeProto) -> str:
    if type_proto.HasField("tensor_type"):
        tensor = type_proto.tensor_type
        dims = [d.dim_param if d.dim_param else (d.dim_value if d.HasField("dim_value") else "?")
                for d in tensor.shape.dim] if tensor.HasField("shape") else None
        return _tensor_text(tensor.elem_type, dims)
    if type_proto.HasField("sequence_type"):
        return _type_text(type_proto.sequence_type.elem_type) + "[]"
    return "Dynamic"


def _tensor_text(elem_type: int, dims: list[Any] | None) -> str:
    from oxport.types import JitScalarType
    try:
        name = JitScalarType.from_onnx_type(elem_type).scalar_name()
    except OnnxExporterError:
        name = "Tensor"
    if dims is None:
        return name
    return f"{name}({', '.join(str(d) for d in dims)})"


def _tensor_value_text(proto: onnx.TensorProto) -> str:
    array = onnx.numpy_helper.to_array(proto)
    if array.size <= 8:
        return "{" + ", ".join(str(x) for x in array.reshape(-1).tolist()) + "}"
    return f"<Tensor {list(array.shape)}>"


# -- the other public functions --------------------------------------------------------
def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable[..., Any],
                                opset_version: int) -> None:
    """Register ``symbolic_fn`` for ``symbolic_name`` at every opset >= ``opset_version``.

    Runtime registrations shadow every plugin at the opsets they cover.
    """
    from oxport.registry import Registrar

    registrar = Registrar(plugin_loader.runtime_registry(),
                          Provenance("register_custom_op_symbolic", None, None, Layer.RUNTIME))
    registrar.register(symbolic_name, symbolic_fn, _runtime_since(opset_version), override=True)


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    """Remove a registration made by :func:`register_custom_op_symbolic`."""
    if not plugin_loader.runtime_registry().remove(symbolic_name, _runtime_since(opset_version)):
        raise InvalidExportArgumentError(
            f"No custom symbolic is registered for {symbolic_name!r} at opset {opset_version}.")


def _runtime_since(opset_version: Any) -> Any:
    """torch.onnx takes any opset from 1 (the seeds register prim::PythonOp at 1): below
    the oldest opset oxport exports, it means every opset."""
    if isinstance(opset_version, int) and not isinstance(opset_version, bool) \
            and 1 <= opset_version < MIN_OPSET:
        return MIN_OPSET
    return opset_version


@contextlib.contextmanager
def select_model_mode_for_export(model: Any, mode: TrainingMode) -> Iterator[None]:
    """Temporarily set ``model``'s training flag per ``mode``; restore it afterwards."""
    mode = _check_training(mode)
    if not hasattr(model, "train") or not hasattr(model, "training"):
        yield
        return
    original = model.training
    if mode == TrainingMode.TRAINING:
        model.train(True)
    elif mode == TrainingMode.EVAL:
        model.train(False)
    try:
        yield
    finally:
        model.train(original)


def is_in_onnx_export() -> bool:
    """Whether an oxport export is running in this thread (its model's forward or a
    symbolic is being called); other threads' eager code sees False."""
    return _in_export.get()


def unconvertible_ops(model: Any, args: Any, training: TrainingMode = TrainingMode.EVAL,
                      opset_version: int | None = None, *, dynamo: bool = False
                      ) -> tuple[Any, list[str]]:
    """The source graph (TorchScript's; with ``dynamo=True`` the torch.export front end's
    view) and every op kind that would fail to convert (one entry per failing node, so
    ``set(...)`` gives the kinds). See :func:`unconvertible_op_details` for counts, source
    lines and minimum opsets."""
    graph, details = _collect_unconvertible(model, args, training, opset_version, dynamo)
    return graph, [info.kind for info in details for _ in range(info.count)]


def unconvertible_op_details(model: Any, args: Any, training: TrainingMode = TrainingMode.EVAL,
                             opset_version: int | None = None, *, dynamo: bool = False
                             ) -> list[Unconvertible]:
    """Every op kind that would fail to convert: its count, source lines, the reason, and
    ``min_opset``, the lowest opset at which some symbolic serves it (None if none does).
    ``dynamo=True`` reads the model through the torch.export front end."""
    return _collect_unconvertible(model, args, training, opset_version, dynamo)[1]


def _collect_unconvertible(model: Any, args: Any, training: TrainingMode,
                           opset_version: int | None, dynamo: bool = False,
                           dynamic_shapes: Any = None
                           ) -> tuple[Any, list[Unconvertible]]:
    """The source graph and every op in it that would not convert (the walker's
    collect-only mode), through the front end ``dynamo`` selects."""
    opset = _check_opset(opset_version)
    _check_model(model)
    training = _check_training(training)
    registry = _loaded_registry()
    training_graph = _is_training(model, training)
    tracing_grad = _tracing_grad(dynamo or isinstance(model, torch.export.ExportedProgram))
    with _exporting(), select_model_mode_for_export(model, training), torch.no_grad():
        with torch.set_grad_enabled(tracing_grad):
            front = _source_front_end(model, args, registry, opset, dynamo, dynamic_shapes)
        conversion = Conversion(registry, opset, collect_only=True, training=training_graph)
        conversion.walk(front)
    return front.graph, list(conversion.unconvertible.values())


def _loaded_registry() -> RegistryView:
    """The symbolics of the plugins loaded by default, with those registered at run time."""
    return RegistryView(plugin_loader.load().registry, plugin_loader.runtime_registry())


def _source_front_end(model: Any, args: Any, registry: RegistryView, opset: int,
                      dynamo: bool, dynamic_shapes: Any) -> FrontEnd:
    """The front end ``export(..., dynamo=dynamo)`` reads ``model`` with (torch.export for
    ``dynamo=True`` or an ExportedProgram, else the TorchScript tracer), its options
    checked as ``export`` checks them. Call it in ``_exporting()`` and ``no_grad()`` (with
    grad set back as :func:`_tracing_grad` says, to trace as export does)."""
    _check_front_end_options(model, dynamo, dynamic_shapes)
    if dynamo or isinstance(model, torch.export.ExportedProgram):
        return _exported_front_end(model, args, registry, opset, dynamic_shapes, None, None)
    return _front_end(model, args)


def enable_log() -> None:
    """Send oxport's log to stderr at INFO level."""
    logger = logging.getLogger("oxport")
    logger.setLevel(logging.INFO)
    if not any(getattr(h, "_oxport", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("oxport: %(message)s"))
        handler._oxport = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.disabled = False


def disable_log() -> None:
    """Silence oxport's log."""
    logging.getLogger("oxport").disabled = True


# -- checks ---------------------------------------------------------------------------
def _check_opset(opset_version: Any) -> int:
    if opset_version is None:
        return DEFAULT_OPSET
    if isinstance(opset_version, bool) or not isinstance(opset_version, int) or \
            not MIN_OPSET <= opset_version <= MAX_OPSET:
        raise InvalidExportArgumentError(
            f"opset_version={opset_version!r} is not supported: use an int from {MIN_OPSET} "
            f"to {MAX_OPSET} (default {DEFAULT_OPSET}).")
    return opset_version


def _check_model(model: Any) -> None:
    if not isinstance(model, (torch.nn.Module, torch.jit.ScriptFunction, FrontEnd,
                              torch.export.ExportedProgram)):
        raise InvalidExportArgumentError(
            f"model must be a torch.nn.Module, a torch.jit.ScriptModule, a "
            f"torch.jit.ScriptFunction or a torch.export.ExportedProgram, not "
            f"{type(model).__name__}. Wrap a plain function in an nn.Module or script it with "
            "torch.jit.script.")


def _check_training(value: Any) -> TrainingMode:
    return _enum_argument("training", TrainingMode, value)


def _check_export_type(value: Any) -> OperatorExportTypes:
    return _enum_argument("operator_export_type", OperatorExportTypes, value)


def _enum_argument(name: str, enum_type: type[Any], value: Any) -> Any:
    """``value`` as a member of ``enum_type`` (oxport's or torch.onnx's member, or its int)."""
    try:
        return enum_type(value)
    except ValueError:
        members = ", ".join(f"{enum_type.__name__}.{m}" for m in enum_type.__members__)
        raise InvalidExportArgumentError(
            f"{name}={value!r} is not valid: pass one of {members} (from oxport or "
            "torch.onnx).") from None


def _check_front_end_options(model: Any, dynamo: Any, dynamic_shapes: Any) -> None:
    """``dynamo=True`` reads torch.export graphs: it needs an ``nn.Module`` (or an
    ``ExportedProgram``), and ``dynamic_shapes`` needs it."""
    if dynamo and isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise InvalidExportArgumentError(
            "dynamo=True captures the model with torch.export, which cannot read a scripted "
            "model: pass the eager nn.Module, or export the ScriptModule with dynamo=False.")
    if dynamic_shapes is not None and not dynamo and \
            not isinstance(model, torch.export.ExportedProgram):
        raise InvalidExportArgumentError(
            "dynamic_shapes= is for dynamo=True (the torch.export front end); with "
            "dynamo=False (the TorchScript path) give dynamic dimensions with "
            "dynamic_axes={input_name: {axis: 'name'}}, as torch.onnx does.")
    if dynamic_shapes is not None and isinstance(model, torch.export.ExportedProgram):
        raise InvalidExportArgumentError(
            "dynamic_shapes= has no effect on an ExportedProgram, whose shapes were fixed when "
            "it was captured: pass dynamic_shapes to torch.export.export instead.")


def _with_kwargs(args: Any, kwargs: Mapping[str, Any] | None) -> Any:
    """torch 2.x's ``kwargs=`` as the seed's trailing dict of named arguments."""
    if kwargs is None:
        return args
    if not isinstance(kwargs, Mapping):
        raise InvalidExportArgumentError(
            f"kwargs must be a dict of named arguments for the model, not "
            f"{type(kwargs).__name__}.")
    positional = args if isinstance(args, (tuple, list)) else (args,)
    return (*positional, dict(kwargs))


def _check_custom_opsets(custom_opsets: Mapping[str, int] | None) -> dict[str, int]:
    result = {}
    for domain, version in (custom_opsets or {}).items():
        if not isinstance(domain, str) or not domain or domain in ("ai.onnx",):
            raise InvalidExportArgumentError(
                f"custom_opsets key {domain!r} must name a custom domain such as 'custom_domain';"
                " set the ai.onnx version with opset_version.")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InvalidExportArgumentError(
                f"custom_opsets[{domain!r}] must be an int >= 1, not {version!r}.")
        result[domain] = version
    return result


def _check_target(f: Any) -> None:
    if isinstance(f, (str, os.PathLike)):
        serialize.check_target(os.fspath(f))
    elif not hasattr(f, "write") or isinstance(f, io.TextIOBase):
        raise InvalidExportArgumentError(
            f"f must be a file path or a binary file object such as io.BytesIO(), not "
            f"{type(f).__name__}" + (" (open the file in 'wb' mode)."
                                     if isinstance(f, io.TextIOBase) else "."))


def _resolve_fallbacks(registry: RegistryView, export_type: OperatorExportTypes,
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


def _turn_log_on() -> Callable[[], None]:
    """``verbose=True`` turns oxport's log on while verbose exports run (as torch.onnx
    does); returns what puts the logger back as it was."""
    logger = logging.getLogger("oxport")
    level, disabled, handlers = logger.level, logger.disabled, list(logger.handlers)
    enable_log()

    def restore() -> None:
        logger.setLevel(level)
        logger.disabled = disabled
        logger.handlers[:] = handlers
    return restore


_verbose_log: SharedHook[None] = SharedHook("oxport_verbose", _turn_log_on)


def _exported_front_end(model: Any, args: Any, registry: RegistryView, opset: int,
                        dynamic_shapes: Any, dynamic_axes: Mapping[str, Any] | None,
                        input_names: Sequence[str] | None, runnable: bool = True
                        ) -> FrontEnd:
    """The torch.export front end: ``model`` captured (non-strict) unless it is an
    ``ExportedProgram`` already, decomposed except where a pack serves the op. Unless
    ``runnable`` (the front end keeps the program to run it), what the capture made is
    collected once the program is read."""
    from oxport.frontends import exported

    served = exported.ServedOps(registry, opset)
    with _capture_garbage_collected(), exported.capture_state_released():
        if isinstance(model, torch.export.ExportedProgram):
            return exported.read(exported.decompose(model, served), runnable=runnable)
        positional, kwargs = arguments.normalize_args(args)
        arguments.check_inputs(positional, kwargs, model.forward)
        with torch.enable_grad():  # torch.export records grad mode changes otherwise
            program, names, axis_names, notes = exported.capture(
                model, positional, kwargs, dynamic_shapes=dynamic_shapes,
                dynamic_axes=dynamic_axes, input_names=input_names,
                kernels=registry.capture_kernels, served=served)
        program = exported.decompose(program, served)
        front = exported.read(program, axis_names, input_names=names, notes=notes,
                              prefix="model.", runnable=runnable)
        del program  # collected with the rest of the capture as the block ends
        return front


def _tracing_grad(exported: bool = False) -> bool:
    """Whether to trace with grad: in the caller's grad mode, as torch.onnx does, since layers
    choose their path by it (MultiheadAttention's and the Transformer layers' inference fast
    path needs it off); the torch.export front end captures without grad."""
    return torch.is_grad_enabled() and not exported


def _front_end(model: Any, args: Any, input_names: Sequence[str] | None = None,
               dynamic_axes: Mapping[str, Any] | None = None) -> FrontEnd:
    if isinstance(model, FrontEnd):  # already traced (find_mismatch's partitions)
        return model
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return trace.script_front_end(model, args, input_names, dynamic_axes)
    return trace.trace_module(model, args, input_names, dynamic_axes)


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
    baked_sizes.warn(baked, front_graph, conversion.env.get, dims, user_stacklevel() + 1)
    for value, axis, what, source in conversion.traced_size_uses:
        dim = dims.get(id(value), ())[axis:axis + 1]
        if dim and not isinstance(dim[0], int):
            warnings.warn(
                f"oxport: {what} comes from the traced size of a dimension that dynamic_axes "
                f"makes dynamic ({dim[0] or 'unnamed'}){f' at {source}' if source else ''}: "
                "the exported model is only right at sizes that give the same value. Compute "
                "it from tensor sizes in the model, or keep that axis static.",
                UserWarning, stacklevel=user_stacklevel())


def _dynamic_inputs(graph: Graph, input_names: Sequence[str] | None,
                    output_names: Sequence[str] | None,
                    dynamic_axes: Mapping[str, Any] | None) -> dict[int, dict[int, str]] | None:
    """Graph input index -> {dynamic axis: its name}, for the clean-up passes; None (any
    axis of any input may vary) when a key names neither an input nor a given output."""
    if not dynamic_axes:
        return {}
    names = list(input_names or [])
    index = {(names[i] if i < len(names) else serialize._clean(v.name)): i
             for i, v in enumerate(graph.inputs)}
    result: dict[int, dict[int, str]] = {}
    for key, spec in dynamic_axes.items() if isinstance(dynamic_axes, Mapping) else ():
        if key in index and isinstance(spec, (Mapping, list, tuple)):
            pairs = spec.items() if isinstance(spec, Mapping) else [
                (axis, f"{key}_dynamic_axes_{i + 1}") for i, axis in enumerate(spec)]
            result.setdefault(index[key], {}).update(
                (a, str(n)) for a, n in pairs if isinstance(a, int) and not isinstance(a, bool))
        elif key not in (output_names or ()):
            return None
    return result


def _as_input_dtype(array: Any, graph_input: Any, leaf: Any) -> Any:
    """A Python number's feed in its input's dtype (a scripted ``float`` parameter given an
    int is a float64 input)."""
    if not isinstance(leaf, (bool, int, float)):
        return array
    return array.astype(onnx.helper.tensor_dtype_to_np_dtype(
        graph_input.type.tensor_type.elem_type))


def _input_leaves(graph: Graph) -> list[int] | None:
    leaves = [(value.meta or {}).get("arg_leaf") for value in graph.inputs]
    return None if None in leaves else leaves  # type: ignore[return-value]


def _drop_unused_inputs(graph: Graph, input_names: Sequence[str] | None,
                        dynamic_axes: Mapping[str, Any] | None
                        ) -> tuple[Sequence[str] | None, Mapping[str, Any] | None]:
    """Drop the user inputs nothing reads, as torch.onnx does; ``input_names`` named them
    before the drop (as in torch.onnx), so their names and dynamic axes go with them."""
    if _input_leaves(graph) is None:
        return input_names, dynamic_axes  # which argument feeds which input is unknown: keep all
    names = list(input_names or [])
    before = [names[i] if i < len(names) else serialize._clean(value.name)
              for i, value in enumerate(graph.inputs)]
    dropped = set(passes.drop_unused_inputs(graph))
    if not dropped:
        return input_names, dynamic_axes
    graph.dropped_inputs = [before[i] for i in sorted(dropped)]
    names = [name for i, name in enumerate(names) if i not in dropped]
    if isinstance(dynamic_axes, Mapping):
        dynamic_axes = {key: axes for key, axes in dynamic_axes.items()
                        if key not in graph.dropped_inputs}
    return names, dynamic_axes


def _output_names(given: Sequence[str] | None, front: FrontEnd, graph: Graph,
                  input_names: Sequence[str] | None) -> Sequence[str] | None:
    """``output_names``, completed with the dict keys and namedtuple fields the model
    returned its outputs under, when each remaining output has one and none is taken."""
    names = list(given or [])
    keyed = front.output_names[len(names):]
    taken = {*names, *(input_names or ()), *graph.initializers,
             *(serialize._clean(v.name) for v in graph.inputs)}
    if len(front.output_names) != len(graph.outputs) or not keyed or not all(keyed) \
            or len(set(keyed)) != len(keyed) or taken & set(keyed):
        return given
    return [*names, *keyed]  # type: ignore[list-item]


def _is_training(model: Any, mode: TrainingMode) -> bool:
    if mode == TrainingMode.TRAINING:
        return True
    if mode == TrainingMode.PRESERVE:
        return bool(getattr(model, "training", False))
    return False


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


__all__ = [
    "ExportResult", "convert", "disable_log", "enable_log", "export", "export_to_pretty_string",
    "is_in_onnx_export", "register_custom_op_symbolic", "select_model_mode_for_export",
    "unconvertible_op_details", "unconvertible_ops", "unregister_custom_op_symbolic",
]
