"""The front end: a model and its example args become a flat TorchScript graph.

Tracing goes through the TorchScript tracer (``torch.jit``'s, the one
``torch.jit.trace`` uses), with the model's state passed in as graph inputs;
ScriptModules and ScriptFunctions are used as given. Only general TorchScript
passes run here (inlining, lowering the module to a graph of inputs and
parameters, lowering tuples, removing mutation, dead code), never anything
from ``torch.onnx``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from oxport.advice import listed
from oxport.errors import (
    InvalidExportArgumentError,
    OnnxExporterError,
    UnsupportedOperatorError,
)
from oxport.exporter.process_hooks import SharedHook
from oxport.frontends.arguments import (
    Flattened,
    as_input,
    check_inputs,
    check_signature,
    dynamic_axis_pairs,
    flatten_outputs,
    is_int_list,
    is_tensor_list,
    leaf_paths,
    normalize_args,
    signature,
)
from oxport.frontends.base import FrontEnd
from oxport.frontends.torchscript import baked_sizes, script_passes

_DEPRECATION_MESSAGES = r".*torch\.jit\.(trace|trace_method|script|script_method).*deprecated.*"


def _no_saved_tensors() -> Any:
    """Autograd keeps nothing for a backward pass while tracing with grad enabled (there is
    none): the trace's memory stays its live working set."""
    return torch.autograd.graph.saved_tensors_hooks(lambda tensor: None, lambda packed: None)


def trace_module(model: torch.nn.Module, args: Any, input_names: Sequence[str] | None = None,
                 dynamic_axes: Mapping[str, Any] | None = None) -> FrontEnd:
    """Trace an ``nn.Module`` into a flat graph of user inputs and parameters.

    The tracer records one run of ``model`` on ``args``; the model's ``state_dict``
    tensors are passed in as extra graph inputs, so every use of a parameter or buffer
    becomes a use of that input (no ScriptModule is built, which keeps tracing linear and
    cheap in the number of submodules). Node scopes name the submodule path. Sizes of
    inputs fold to constants except at the axes ``dynamic_axes`` names.
    """
    positional, kwargs = normalize_args(args)
    check_signature(model.forward, positional, kwargs)
    leaves, spec = pytree.tree_flatten((positional, kwargs))
    leaves = [as_input(leaf) for leaf in leaves]
    names = leaf_paths(positional, kwargs, model.forward)
    tensor_slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = tuple(leaves[i] for i in tensor_slots)
    notes: list[str] = []
    wrapper = Flattened(model, spec, leaves, tensor_slots, notes)
    params = state_tensors(model)
    check_inputs(positional, kwargs, model.forward)
    _check_state(params)
    holder = _object_holder(model)

    def run(*flat: torch.Tensor) -> Any:
        outputs = wrapper(*flat[:len(tensors)])
        return outputs[0] if len(outputs) == 1 else outputs

    caught: list[warnings.WarningMessage] = []
    recorder = baked_sizes.Recorder() if dynamic_axes else None
    with _trace_warnings.held(caught), _module_scopes(model), baked_sizes.watching(recorder), \
            _no_saved_tensors():
        try:
            graph, _ = torch._C._create_graph_by_tracing(
                run, [*tensors, *(t for _, t in params)], lambda value: "", False, False,
                holder)
        except OnnxExporterError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's forward failed: say so, chained
            raise OnnxExporterError(
                f"Running the model on args failed while tracing: {type(exc).__name__}: "
                f"{_without_tensor_dump(str(exc))}. "
                f"Check that args match {type(model).__name__}.forward"
                f"{signature(model.forward)} and that the model runs eagerly on them."
            ) from exc
    _reemit(caught)
    torch._C._jit_pass_inline(graph)  # calls into scripted submodules
    if holder is not None:
        _objects_as_constants(graph, holder)
    graph_names = [input_names[i] if input_names and i < len(input_names) else names[slot]
                   for i, slot in enumerate(tensor_slots)]
    dynamic = {i: _axes(_axes_entry(dynamic_axes, name)) for i, name in enumerate(graph_names)}
    script_passes.fold_static_sizes(graph, dynamic, traced=True)
    _general_passes(graph)
    return FrontEnd(graph, list(tensors), [names[i] for i in tensor_slots], params,
                    list(caught), notes, input_leaves=tensor_slots,
                    output_names=wrapper.output_names,
                    baked=recorder.baked if recorder is not None else [])


def _check_state(state: list[tuple[str, torch.Tensor]]) -> None:
    """Raise a clear error when parameters or buffers are on the meta device."""
    meta = [name for name, tensor in state if tensor.is_meta]
    if meta:
        raise InvalidExportArgumentError(
            f"The model's parameters or buffers {listed(meta)} are on the meta "
            "device (shapes without values): there are no weights to export. Load them first, "
            "e.g. model.to_empty(device='cpu') then model.load_state_dict(state_dict), or "
            "export with dynamo=True and weights= (a safetensors checkpoint), which streams "
            "them into the file without loading them.")


def state_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``model.state_dict()`` entries, each tensor once (the first name of a tied weight)."""
    seen: set[int] = set()
    state = []
    for name, tensor in model.state_dict(keep_vars=True).items():
        if isinstance(tensor, torch.Tensor) and id(tensor) not in seen:
            seen.add(id(tensor))
            state.append((name, tensor))
    return state


def _object_holder(model: torch.nn.Module) -> torch._C.ScriptModule | None:
    """A TorchScript module tree mirroring ``model`` (``holder.model`` is the model) that
    holds its TorchScript objects, such as quantized packed weights, so that the tracer
    can follow them; None when the model has none (the common, cheaper case)."""
    if not any(isinstance(value, torch.ScriptObject)
               for module in model.modules() for value in vars(module).values()):
        return None
    unit = torch._C.CompilationUnit()

    def mirror(module: torch.nn.Module) -> torch._C.ScriptModule:
        holder = torch._C.ScriptModule("__torch__.oxport.Holder", unit, True)
        for name, value in vars(module).items():
            if isinstance(value, torch.ScriptObject):
                holder._register_attribute(name, value._type(), value)
        for name, child in module.named_children():
            sub = mirror(child)
            holder._register_attribute(name, sub._type(), sub)
        return holder

    root = torch._C.ScriptModule("__torch__.oxport.Holder", unit, True)
    top = mirror(model)
    root._register_attribute("model", top._type(), top)
    return root


def _objects_as_constants(graph: torch._C.Graph, holder: torch._C.ScriptModule) -> None:
    """Replace the traced attribute reads on ``holder`` (its graph input 0) by constants
    holding the objects they reach, and drop that input."""
    def resolve(value: torch._C.Value, owner: torch._C.ScriptModule) -> None:
        for use in list(value.uses()):
            node = use.user
            attr = owner.getattr(node.s("name"))
            if isinstance(attr, torch._C.ScriptModule):
                resolve(node.output(), attr)
            else:
                with graph.insert_point_guard(node):
                    node.output().replaceAllUsesWith(graph.insertConstant(attr))
            node.destroy()

    resolve(next(graph.inputs()), holder)
    graph.eraseInput(0)


def _without_tensor_dump(message: str, limit: int = 600) -> str:
    """``message`` without the tensor torch prints into some errors (``Tensor:\n...``),
    at most ``limit`` characters."""
    message = message.split("\nTensor:\n", 1)[0]
    return message if len(message) <= limit else message[:limit] + " [...]"


#: While the tracer runs the model, free heap pages go back to the system at most this
#: often (seconds), between submodule calls.
RELEASE_INTERVAL_S = 0.02


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (``malloc_trim``; a no-op where the C
    library has none). glibc keeps freed tensors' memory mapped, and the heap fragments: a
    traced run of a model can grow the process by several times its live activations."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class _Releaser:
    """Calls :func:`release_free_memory` when ``RELEASE_INTERVAL_S`` has passed since the
    last call, so that the calls stay a small part of a trace however many submodules it
    runs."""

    def __init__(self) -> None:
        self._last = time.perf_counter()

    def __call__(self) -> None:
        if time.perf_counter() - self._last >= RELEASE_INTERVAL_S:
            release_free_memory()
            self._last = time.perf_counter()


@contextlib.contextmanager
def _module_scopes(model: torch.nn.Module) -> Iterator[None]:
    """Let the tracer record each submodule call as a scope (``__module.model.features.0``),
    returning free heap pages to the system between calls (see :class:`_Releaser`)."""
    scopes = _CallScopes(((module, f"__module.model.{path}" if path else "__module.model")
                          for path, module in model.named_modules()), _Releaser())
    with _tracer_scopes.held(scopes):
        yield


class _ScopesOfThread(dict):
    """torch's tracer module map while oxport traces (torch reads it with ``get``): each
    thread finds the scopes of the trace it runs, a thread tracing nothing finds none."""

    def get(self, module: Any, default: Any = None) -> Any:
        scopes = _tracer_scopes.current.get()
        return default if scopes is None else scopes.get(module, default)


def _install_scopes() -> Callable[[], None]:
    previous = torch.jit._trace._trace_module_map
    torch.jit._trace._trace_module_map = _ScopesOfThread()

    def restore() -> None:
        torch.jit._trace._trace_module_map = previous
    return restore


_tracer_scopes: SharedHook[_CallScopes] = SharedHook("oxport_tracer_scopes", _install_scopes)


class _CallScopes(dict):
    """Module -> scope name for the tracer, which asks once per call: a module's repeated
    calls get names of their own (``__module.model.act#1``), so calls can be told apart."""

    def __init__(self, names: Any, on_call: Callable[[], None]) -> None:
        super().__init__(names)
        self._calls: dict[int, int] = {}
        self._on_call = on_call

    def get(self, module: Any, default: Any = None) -> Any:
        self._on_call()
        name = super().get(module, default)
        if name:
            count = self._calls.get(id(module), 0)
            self._calls[id(module)] = count + 1
            if count:
                name = f"{name}#{count}"
        return name


def script_front_end(model: Any, args: Any, input_names: Sequence[str] | None = None,
                     dynamic_axes: Mapping[str, Any] | None = None, opset: int | None = None
                     ) -> FrontEnd:
    """Use a ScriptModule or ScriptFunction as given; ``args`` give the input types.

    Tensors in ``args`` type the graph inputs (dtype and shape); a tuple of tensors
    becomes one input per tensor, a list of tensors one Sequence input, and an int, float
    or bool one 0-d input of :func:`as_input`'s dtype (as torch.onnx does), a ``List[int]``
    argument (ints, or 0-d integer tensors) one Sequence input of int64 tensors from
    opset 11 (all opsets when ``opset`` is None), as torch.onnx makes it; other values
    (None, str) are hard-coded as constants. A trailing dict names arguments; the
    signature's defaults fill the rest, hard-coded. A ScriptModule is frozen first, so its
    non-tensor attributes become constants and its submodules' methods are inlined;
    parameters and buffers stay initializers.
    Sizes of inputs fold to constants except at the axes ``dynamic_axes`` names.
    """
    positional, kwargs = normalize_args(args)
    check_inputs(positional, kwargs, getattr(model, "forward", model))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATION_MESSAGES)
        method = _forward_name(model, positional) if isinstance(model, torch.jit.ScriptModule) \
            else None
        if method is None:
            graph = model.graph.copy()
            torch._C._jit_pass_inline(graph)
            params: list[tuple[str, torch.Tensor]] = []
        else:
            frozen = torch._C._freeze_module(model._c, preserveParameters=True)
            graph = frozen._get_method(method).graph.copy()
            torch._C._jit_pass_inline(graph)
            script_passes.attributes_as_values(graph)
            _inline_attributes(graph, model)
            graph, param_values = torch._C._jit_pass_lower_graph(graph, frozen)
            params = _name_params(model, param_values)
        user_inputs = list(graph.inputs())[:len(list(graph.inputs())) - len(params)]
        binding = _bind_arguments(model, method, positional, kwargs, len(user_inputs))
        bound = tuple(value for value, _ in binding)
        if opset is None or opset >= SEQUENCE_OPSET:
            binding = _int_lists_as_tensors(binding, user_inputs)
        arg_ids = [value.unique() for value in user_inputs]
        _bind_script_inputs(graph, user_inputs, binding)
        checked = _none_checked_inputs(graph)
        script_passes.fold_none_checks(graph)  # before tuples are lowered
        _lower_tuples(graph)
        problems = script_passes.unsupported_constructs(graph)
        if problems:
            raise UnsupportedOperatorError(
                "The scripted model uses constructs ONNX cannot express:\n" + "\n".join(problems))
        inputs = [pair for arg in binding for pair in _script_inputs(*arg)]
        user_inputs = list(graph.inputs())[:len(list(graph.inputs())) - len(params)]
        if len(inputs) != len(user_inputs):
            raise InvalidExportArgumentError(
                f"{_nones_note(positional, kwargs)}The scripted model's inputs "
                f"({len(user_inputs)} after flattening tuples) do not match the {len(inputs)} "
                "tensors, lists of tensors and numbers in args (a None in a tuple is none); "
                "pass one value per parameter of its forward.")
        _check_input_names(input_names, len(user_inputs) + len(params), positional, kwargs)
        kept = _kept_positions(binding, arg_ids, checked)
        names = [_input_name(v, i) for i, v in enumerate(user_inputs)]
        examples = []
        dim_names: list[dict[int, str]] = []
        for index, (value, (example, _)) in enumerate(zip(user_inputs, inputs)):
            name = input_names[index] if input_names and index < len(input_names) \
                else names[index]
            entry = _axes_entry(dynamic_axes, name)
            dim_names.append(_dim_names(name, entry))
            if _is_number(example):
                example = _number_input(graph, value, example)
            else:
                value.setType(_example_type(example, _axes(entry)))
            examples.append(example)
        script_passes.fold_static_sizes(graph)  # before loops carry what their bodies mutate
        script_passes.unroll_number_loops(graph)
        _functional_passes(graph)
        notes: list[str] = []
        try:
            example = model(*bound) if method is None else model._c._get_method(method)(*bound)
        except Exception as exc:  # noqa: BLE001 - the user's model failed: say so, chained
            raise OnnxExporterError(
                f"Running the scripted model on args failed: {type(exc).__name__}: "
                f"{_without_tensor_dump(str(exc))}") from exc
        output_names: list[str | None] = []
        outputs = flatten_outputs(example, notes, output_names)
    graph_outputs = list(graph.outputs())
    if len(graph_outputs) == len(outputs):
        graph_inputs = {value.unique() for value in graph.inputs()}
        for value, example in zip(graph_outputs, outputs):
            if value.unique() in graph_inputs:
                continue  # an input returned as it is keeps its (static) sizes
            kind = value.type().kind()
            if kind in ("ListType", "TupleType"):  # (a list of one tensor, say)
                continue
            example_type = torch._C.TensorType.create_from_tensor(example)
            example_type = example_type.with_sizes([None] * example.dim())
            if kind == "OptionalType":  # None on other runs: stays Optional
                example_type = torch._C.OptionalType(example_type)
            value.setType(example_type)
    slots = [slot for _, slot in inputs]
    read = script_passes.runtime_read_inputs(graph)
    kept |= {i for i, value in enumerate(list(graph.inputs())[:len(examples)])
             if value.unique() in read}
    return FrontEnd(graph, examples, names, params, [], notes, scripted=True,
                    input_leaves=[] if None in slots else slots, output_names=output_names,
                    input_dim_names=dim_names, kept_inputs=kept)


def _none_checked_inputs(graph: torch._C.Graph) -> set[int]:
    """The graph inputs (``unique()``) that an ``is None`` / ``is not None`` check reads,
    directly or as an item of a tuple input. torch.onnx keeps these checks at run time
    (``OptionalHasElement``), so its file takes these inputs even where oxport folds the
    checks and nothing reads them afterwards."""
    checked = set()
    for node in graph.findAllNodes("aten::__is__") + graph.findAllNodes("aten::__isnot__"):
        for value in node.inputs():
            source = value.node()
            if source.kind() == "prim::TupleUnpack":
                value, source = source.inputsAt(0), source.inputsAt(0).node()
            if source.kind() == "prim::Param":
                checked.add(value.unique())
    return checked


def _kept_positions(binding: tuple[tuple[Any, Any], ...], arg_ids: list[int],
                    checked: set[int]) -> set[int]:
    """The positions among the flat user inputs of the arguments in ``checked`` (each
    argument's graph input was ``arg_ids[i]`` before binding; a tuple is all its inputs)."""
    kept, offset = set(), 0
    for arg, arg_id in zip(binding, arg_ids):
        count = len(_script_inputs(*arg))
        if arg_id in checked:
            kept.update(range(offset, offset + count))
        offset += count
    return kept


def _nones_in(arg: Any) -> int:
    """How many None leaves ``arg`` holds (tuples, lists and dicts looked into)."""
    if arg is None:
        return 1
    if isinstance(arg, (tuple, list)):
        return sum(_nones_in(item) for item in arg)
    if isinstance(arg, Mapping):
        return sum(_nones_in(item) for item in arg.values())
    return 0


def _nones_note(positional: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """torch.onnx's words for the None arguments of a scripted model (it refuses them;
    oxport hard-codes them, so they are no inputs), or ``""`` when there are none."""
    count = _nones_in(positional) + _nones_in(kwargs)
    if not count:
        return ""
    return f"args contained {count} None's after flattening. "


def _check_input_names(input_names: Sequence[str] | None, count: int,
                       positional: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse more ``input_names`` than inputs and parameters when None arguments, which
    are no inputs, explain the difference (the serializer reports the other cases)."""
    note = _nones_note(positional, kwargs)
    if input_names and len(input_names) > count and note:
        raise InvalidExportArgumentError(
            f"{note}A None argument of a scripted model is hard-coded, not an input: "
            f"input_names has {len(input_names)} names for the model's {count} inputs and "
            "parameters; name only the inputs it has.")


def _script_inputs(arg: Any, slot: Any) -> list[tuple[Any, int | None]]:
    """The graph inputs one argument becomes, each with the index of the args leaf it comes
    from (``slot`` is ``arg`` with its leaves numbered; None for a default, which is
    hard-coded): a tensor, a list of tensors (one Sequence input, from many leaves: None),
    a number, and each of these in a tuple."""
    if slot is None:
        return []
    if isinstance(arg, torch.Tensor) or is_tensor_list(arg) or _is_number(arg):
        return [(arg, slot if isinstance(slot, int) else None)]
    if isinstance(arg, tuple):
        slots = slot if isinstance(slot, tuple) else (None,) * len(arg)
        return [pair for item, item_slot in zip(arg, slots)
                for pair in _script_inputs(item, item_slot)]
    return []


def _is_number(arg: Any) -> bool:
    return isinstance(arg, (bool, int, float))


#: A number parameter's type -> the dtype of its 0-d input (torch.onnx's) and the
#: TorchScript op that reads that tensor back as the number.
_NUMBER_INPUTS = {"BoolType": (torch.bool, "aten::Bool"), "IntType": (torch.int64, "aten::Int"),
                  "FloatType": (torch.float64, "aten::Float")}


def _number_input(graph: torch._C.Graph, value: torch._C.Value, number: Any) -> torch.Tensor:
    """Make the graph input of a number argument a 0-d tensor of torch.onnx's dtype (that of
    the parameter's type: an int given for a ``float`` is float64) that the graph reads back
    as the number it computes with; returns the tensor, the input's example."""
    if value.type().kind() not in _NUMBER_INPUTS:  # a Scalar parameter: the number's type
        value.setType(_number_type(number))
    dtype, read_op = _NUMBER_INPUTS[value.type().kind()]
    example = torch.tensor(number, dtype=dtype)
    read = graph.create(read_op, [value], 1)
    read.output().setType(value.type())
    read.insertBefore(_first_node(graph))
    value.replaceAllUsesAfterNodeWith(read, read.output())
    value.setType(torch._C.TensorType.create_from_tensor(example))
    return example


def _number_type(number: Any) -> torch._C.Type:
    if isinstance(number, bool):
        return torch._C.BoolType.get()
    return torch._C.IntType.get() if isinstance(number, int) else torch._C.FloatType.get()


def _axes_entry(dynamic_axes: Any, name: str) -> Any:
    """``dynamic_axes[name]``, or None (a malformed ``dynamic_axes`` is reported later, by
    the serializer, with the fix)."""
    return dynamic_axes.get(name) if isinstance(dynamic_axes, Mapping) else None


def _axes(spec: Any) -> set[int]:
    """The axes a ``dynamic_axes`` entry names (a dict of axis -> name, or a list)."""
    if isinstance(spec, Mapping):
        return {axis for axis in spec if isinstance(axis, int)}
    if isinstance(spec, (list, tuple)):
        return {axis for axis in spec if isinstance(axis, int)}
    return set()


def _dim_names(name: str, spec: Any) -> dict[int, str]:
    """{axis: dim name} of a well-formed ``dynamic_axes`` entry (else none: the serializer
    reports a malformed one)."""
    if not isinstance(spec, (Mapping, list, tuple)):
        return {}
    pairs = dynamic_axis_pairs(name, spec)
    return {axis: label for axis, label in pairs
            if isinstance(axis, int) and not isinstance(axis, bool) and isinstance(label, str)}


def _example_type(example: Any, dynamic: set[int] = frozenset()) -> torch._C.Type:
    """The TorchScript type of an input: a tensor type of the example's sizes (unknown at
    the ``dynamic`` axes), or a list of tensors of the first one's dtype (any size)."""
    if isinstance(example, torch.Tensor):
        complete = torch._C.TensorType.create_from_tensor(example)
        if not dynamic:
            return complete
        rank = example.dim()
        return complete.with_sizes([None if axis in dynamic or axis - rank in dynamic else size
                                    for axis, size in enumerate(example.shape)])
    first = torch._C.TensorType.create_from_tensor(example[0])
    return torch._C.ListType(first.with_sizes([None] * example[0].dim()))


def _inline_attributes(graph: torch._C.Graph, model: Any) -> None:
    """Attributes freezing kept (those some method writes, like ``nn.LSTM``'s
    ``_flat_weights``, or quantized modules' packed weights) read as they are now: numbers,
    strings and TorchScript objects become constants (as tracing makes packed weights), a
    list of the module's parameters becomes a list of reads of those parameters."""
    for node in graph.findAllNodes("prim::GetAttr"):
        owner, path = node.inputsAt(0), []
        while owner.node().kind() == "prim::GetAttr":
            path.insert(0, owner.node().s("name"))
            owner = owner.node().inputsAt(0)
        if owner.node().kind() != "prim::Param":
            continue
        module = model
        for name in path:
            module = getattr(module, name)
        value = getattr(module, node.s("name"))
        if isinstance(value, (bool, int, float, str, torch.ScriptObject)) or value is None:
            with graph.insert_point_guard(node):
                replacement = graph.insertConstant(value)
        elif isinstance(value, list) and value and all(isinstance(v, torch.Tensor) for v in value):
            by_id = {id(t): n for n, t in module.named_parameters(recurse=False)}
            if not all(id(v) in by_id for v in value):
                continue
            reads = []
            for tensor in value:
                read = graph.create("prim::GetAttr", [node.inputsAt(0)], 1)
                read.s_("name", by_id[id(tensor)])
                read.output().setType(torch._C.TensorType.get())
                read.insertBefore(node)
                reads.append(read.output())
            build = graph.create("prim::ListConstruct", reads, 1)
            build.output().setType(node.output().type())
            build.insertBefore(node)
            replacement = build.output()
        else:
            continue
        node.output().replaceAllUsesWith(replacement)
        node.destroy()


def _forward_name(model: Any, args: tuple[Any, ...]) -> str:
    """``forward``, or for an overloaded ``forward`` (``nn.LSTM``'s) the overload whose
    leading parameters take ``args``' kinds (tensor or not)."""
    names = model._c._method_names()
    if "forward" in names:
        return "forward"
    for name in sorted(n for n in names if re.fullmatch(r"forward__\d+", n)):
        params = [a for a in model._c._get_method(name).schema.arguments if a.name != "self"]
        if len(params) >= len(args) and all(
                isinstance(arg, torch.Tensor) == (param.type.kind() == "TensorType")
                for arg, param in zip(args, params) if arg is not None):
            return name
    raise InvalidExportArgumentError(
        f"{type(model).__name__} has no scripted forward that takes these args.")


def _bind_arguments(model: Any, method: str | None, args: tuple[Any, ...],
                    kwargs: dict[str, Any], count: int) -> tuple[tuple[Any, Any], ...]:
    """One (value, slot) per parameter of the scripted signature: ``args``, then ``kwargs``
    by name, then the defaults. ``slot`` is the value with each of its leaves replaced by
    its index in the flattened args (None for a default)."""
    schema = model.schema if method is None else model._c._get_method(method).schema
    params = [a for a in schema.arguments if a.name != "self"]
    names = ", ".join(p.name for p in params)
    unknown = [key for key in kwargs if key not in {p.name for p in params[len(args):]}]
    if unknown:
        raise InvalidExportArgumentError(
            f"The scripted model takes ({names}); the dict of named args has "
            f"{', '.join(map(repr, unknown))}, which names no parameter after the positional "
            "args. Name parameters as its forward does.")
    rest = params[len(args):count]
    if len(args) > count or any(p.name not in kwargs and not p.has_default_value()
                                for p in rest):
        raise InvalidExportArgumentError(
            f"The scripted model takes ({names}) but args has {len(args) + len(kwargs)} value"
            f"{'s' if len(args) + len(kwargs) != 1 else ''}; pass one per parameter without a "
            "default.")
    leaves, spec = pytree.tree_flatten((args, kwargs))
    slots, named_slots = pytree.tree_unflatten(list(range(len(leaves))), spec)
    return (*zip(args, slots), *((kwargs[p.name], named_slots[p.name]) if p.name in kwargs
                                 else (p.default_value, None) for p in rest))


def _bind_script_inputs(graph: torch._C.Graph, inputs: list[torch._C.Value],
                        args: tuple[tuple[Any, Any], ...]) -> None:
    """Type tensor inputs from their examples, number inputs (an ``Optional[int]`` given an
    int) from their values; hard-code the other arguments and the defaults."""
    for value, (example, slot) in reversed(list(zip(inputs, args))):
        if slot is not None and is_tensor_list(example) and _is_int_list_type(value.type()):
            _read_ints(graph, value, len(example))
        elif slot is not None and (isinstance(example, torch.Tensor) or is_tensor_list(example)):
            value.setType(_example_type(example))
        elif _is_number(example) and slot is not None:
            if value.type().kind() == "OptionalType":  # given a number: never None
                value.setType(value.type().getElementType())
        elif isinstance(example, tuple) and _script_inputs(example, slot):
            continue  # lowering tuples makes its tensors and numbers inputs
        else:
            with graph.insert_point_guard(_first_node(graph)):
                constant = graph.insertConstant(example)
            value.replaceAllUsesWith(constant)
            graph.eraseInput(value.offset())


#: From this opset a ``List[int]`` argument is a Sequence input, as torch.onnx makes it;
#: below it ONNX has no Sequence and the list is hard-coded.
SEQUENCE_OPSET = 11


def _is_int_list_type(type_: torch._C.Type) -> bool:
    return type_.kind() == "ListType" and type_.getElementType().kind() == "IntType"


def _int_lists_as_tensors(binding: tuple[tuple[Any, Any], ...],
                          inputs: list[torch._C.Value]) -> tuple[tuple[Any, Any], ...]:
    """The binding with each ``List[int]`` argument given in args (ints, or 0-d integer
    tensors) a list of int64 0-d tensors, the Sequence input's example."""
    def as_tensors(value: torch._C.Value, example: Any, slot: Any) -> tuple[Any, Any]:
        if slot is None or not _is_int_list_type(value.type()):
            return example, slot
        if is_int_list(example) or is_tensor_list(example) and all(
                item.dim() == 0 and not item.is_floating_point() for item in example):
            return [torch.as_tensor(item, dtype=torch.int64) for item in example], slot
        return example, slot
    return tuple(as_tensors(value, *pair) for value, pair in zip(inputs, binding))


def _read_ints(graph: torch._C.Graph, value: torch._C.Value, count: int) -> None:
    """Make ``value``, a ``List[int]`` input of ``count`` items, a Sequence of int64 0-d
    tensors that the graph reads back into the list of ints it computes with."""
    item_type = torch._C.TensorType.create_from_tensor(torch.tensor(0))
    value.setType(torch._C.ListType(item_type))
    first = _first_node(graph)
    ints = []
    for index in range(count):
        with graph.insert_point_guard(first):
            position = graph.insertConstant(index)
        item = graph.create("aten::__getitem__", [value, position], 1)
        item.output().setType(item_type)
        item.insertBefore(first)
        read = graph.create("aten::Int", [item.output()], 1)
        read.output().setType(torch._C.IntType.get())
        read.insertBefore(first)
        ints.append(read.output())
    build = graph.create("prim::ListConstruct", ints, 1)
    build.output().setType(torch._C.ListType(torch._C.IntType.get()))
    build.insertBefore(first)
    value.replaceAllUsesAfterNodeWith(build, build.output())


def _first_node(graph: torch._C.Graph) -> torch._C.Node:
    for node in graph.nodes():
        return node
    return graph.return_node()


def _input_name(value: torch._C.Value, index: int) -> str:
    name = value.debugName().split(".")[0]
    return name if name and not name[0].isdigit() else f"input_{index}"


def _general_passes(graph: torch._C.Graph) -> None:
    _lower_tuples(graph)
    _functional_passes(graph)


def _lower_tuples(graph: torch._C.Graph) -> None:
    try:
        torch._C._jit_pass_lower_all_tuples(graph)
    except RuntimeError as exc:  # TorchScript's "Couldn't lower all tuples."
        raise UnsupportedOperatorError(
            f"Cannot export {script_passes.tuple_lowering_problem(graph)}.") from exc


def _functional_passes(graph: torch._C.Graph) -> None:
    """Mutation removed where TorchScript can, made explicit through blocks elsewhere."""
    torch._C._jit_pass_remove_mutation(graph)
    if script_passes.has_control_flow(graph):
        script_passes.thread_mutations(graph)
    torch._C._jit_pass_dce(graph)


def _name_params(module: torch.nn.Module, values: list[Any]) -> list[tuple[str, torch.Tensor]]:
    by_id: dict[int, str] = {}
    for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
        by_id.setdefault(id(tensor), name.removeprefix("model."))
    named = []
    for index, value in enumerate(values):
        if not isinstance(value, torch.Tensor):
            raise OnnxExporterError(
                f"The model holds a non-tensor attribute used in forward ({type(value).__name__}); "
                "only tensors can become ONNX initializers."
            )
        named.append((by_id.get(id(value), f"param_{index}"), value.detach()))
    return named


def _record_warnings() -> Callable[[], None]:
    """While traces run: every warning (torch.jit's deprecation notices aside) goes to the
    list of the trace running in the thread that raises it; other threads' warnings go on
    to the handler that was there. Returns what restores filters and handler."""
    saved = warnings.catch_warnings()
    saved.__enter__()
    warnings.simplefilter("always")
    warnings.filterwarnings("ignore", message=_DEPRECATION_MESSAGES)
    previous = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        caught = _trace_warnings.current.get()
        if filename == baked_sizes.WRAPPER_FILE:  # the tracer warns about a conversion
            filename, lineno = baked_sizes.conversion_caller() or (filename, lineno)
        if caught is None:
            previous(message, category, filename, lineno, file, line)
        else:
            caught.append(warnings.WarningMessage(message, category, filename, lineno, file,
                                                  line))

    warnings.showwarning = show
    return lambda: saved.__exit__(None, None, None)


_trace_warnings: SharedHook[list[warnings.WarningMessage]] = SharedHook(
    "oxport_trace_warnings", _record_warnings)


#: A warnings registry per source file the trace's warnings came from: re-emitted, each
#: shows once per line as when raised directly (the ``default`` filter), not once per
#: layer that runs the line.
_REGISTRIES: dict[str, dict[Any, Any]] = {}


def _reemit(caught: list[warnings.WarningMessage]) -> None:
    for message in caught:
        warnings.warn_explicit(message.message, message.category, message.filename,
                               message.lineno,
                               registry=_REGISTRIES.setdefault(message.filename, {}))
