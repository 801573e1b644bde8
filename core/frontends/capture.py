"""The torch.export front end's capture: a model called on its arguments captured with
``torch.export.export`` as the TorchScript front end traces it (tensors anywhere in the
arguments as inputs, outputs flattened and named), its dynamic dims given by
``dynamic_shapes`` (``Dim``s, or strings as torch.onnx takes them) or ``dynamic_axes``.
:mod:`oxport.frontends.exported` reads the program."""

from __future__ import annotations

import contextlib
import inspect
import linecache
import warnings
from collections.abc import Container, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch.export._patches import _register_rnn_while_loop_decomposition
from torch.fx.experimental import _config as fx_config
from torch.fx.experimental import proxy_tensor
from torch.utils import _pytree as pytree

from oxport.errors import InvalidExportArgumentError, OnnxExporterError, front_end
from oxport.frontends.arguments import Flattened, dynamic_axis_pairs, leaf_paths


def capture(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], *,
            dynamic_shapes: Any = None, dynamic_axes: Mapping[str, Any] | None = None,
            input_names: Sequence[str] | None = None, strict: bool = False,
            kernels: Mapping[str, Any] | None = None, served: Container[str] = ()
            ) -> Captured:
    """Capture ``model`` with ``torch.export.export`` as the TorchScript front end traces it:
    the tensors in ``args`` (nested, named ones included) become the inputs, every other
    argument a constant, and the outputs a flat tuple of tensors.

    ``kernels`` (op name -> a pack's capture kernel) keeps those ops whole where a symbolic
    in ``served`` converts them: asked when the model calls one (so the pack serving it
    loads only then); the others are decomposed as usual.

    Returns the program, the inputs' names, the names of their dynamic axes, notes on the
    outputs and their names (see :class:`Captured`)."""

    leaves, spec = pytree.tree_flatten((args, kwargs))
    paths = leaf_paths(args, kwargs, model.forward)
    slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i] for i in slots]
    names = [paths[i] for i in slots]
    if dynamic_shapes is not None:
        specs = _tensor_specs(model, args, kwargs, dynamic_shapes)
        per_tensor = [specs.get(id(t)) for t in tensors]
        axis_names = {(index, axis % max(t.dim(), 1)): _dim_name(dim)
                      for index, (t, axes) in enumerate(zip(tensors, per_tensor)) if axes
                      for axis, dim in _axis_items(axes) if _dim_name(dim) is not None}
        per_tensor = [_strings_as_dims(axes) for axes in per_tensor]
    else:
        per_tensor, axis_names = _specs_from_axes(tensors, names, dynamic_axes or {},
                                                  input_names)
    notes: list[str] = []
    output_names: list[str | None] = []  # outside the module, whose attributes torch.export
    # restores after a capture
    wrapper = Flattened(model, spec, leaves, slots, notes, output_names)
    failed: Exception | None = None
    for attempt in (strict,) if strict else (False, True):  # non-strict, then strict
        try:
            program = _export(wrapper, tensors, per_tensor, kernels or {}, served, attempt)
            break
        except OnnxExporterError:
            raise  # oxport's own (a pack's capture kernel), already clear
        except Exception as exc:  # noqa: BLE001 - torch.export's own errors, chained
            failed = failed or exc
    else:
        assert failed is not None
        raise _capture_error(model, wrapper, tensors, failed) from failed
    return Captured(program, names, axis_names, notes, output_names)


def _export(wrapper: Flattened, tensors: Sequence[torch.Tensor], per_tensor: Sequence[Any],
            kernels: Mapping[str, Any], served: Container[str], strict: bool
            ) -> torch.export.ExportedProgram:
    """One ``torch.export.export`` of ``wrapper``: the tensors' axes dynamic as
    ``per_tensor`` says, the ops of ``kernels`` kept whole where ``served``."""
    shapes = (tuple(per_tensor),) if any(per_tensor) else None
    with warnings.catch_warnings(), contextlib.ExitStack() as stack:
        if _example_size_below_two(tensors, per_tensor):
            # That axis stays dynamic only with size-oblivious guards, which slow the
            # capture of a transformer down: only when needed.
            stack.enter_context(fx_config.patch(backed_size_oblivious=True))
        for name, kernel in kernels.items():
            stack.enter_context(_kept_whole(name, kernel, served))
        warnings.simplefilter("ignore", FutureWarning)
        return torch.export.export(wrapper, tuple(tensors), dynamic_shapes=shapes,
                                   strict=strict)


class Captured(NamedTuple):
    """What :func:`capture` made of the model."""

    program: torch.export.ExportedProgram
    #: The tensor inputs' names (their parameter paths: ``x``, ``state.0``).
    input_names: list[str]
    #: ``{(input index, axis): name}`` from ``dynamic_shapes``' names or ``dynamic_axes``.
    axis_names: dict[tuple[int, int], str]
    #: What happened to the outputs (dicts flattened, strings dropped).
    notes: list[str]
    #: Each flat output's name from the dict keys and namedtuple fields it was under.
    output_names: list[str | None]


def _capture_error(model: Any, wrapper: Flattened, tensors: Sequence[torch.Tensor],
                   exc: Exception) -> OnnxExporterError:
    """torch.export's failure with the way out that fits it: when the model raises in eager
    PyTorch on these inputs too, its code (or the inputs) must change, as any front end
    would fail; else the TorchScript front end may read it."""
    what = f"torch.export could not capture {type(model).__name__}: {type(exc).__name__}: {exc}"
    try:
        with torch.no_grad():
            wrapper(*tensors)
    except Exception as eager:  # noqa: BLE001 - the model's own error, quoted
        return OnnxExporterError(
            f"{what}\nThe model raises in eager PyTorch on these inputs too "
            f"({type(eager).__name__}: {eager}): fix the model or give inputs it accepts.")
    return OnnxExporterError(f"{what}\nExport {front_end(False)} (the TorchScript front end) "
                             "instead, or fix the model where torch.export points.")


def _kept_whole(name: str, kernel: Any, served: Container[str]
                ) -> contextlib.AbstractContextManager[None]:
    """While capturing, ``kernel`` stands in for op ``name``'s decomposition (a
    CompositeImplicitAutograd kernel), so torch.export records the op whole, if a symbolic
    in ``served`` converts it; else the op decomposes as it would without the kernel.

    torch.export._patches does this for its while_loop LSTM and GRU; a pack's kernel only
    gives the outputs' shapes, since the symbolic converts the op itself."""
    namespace, _, rest = name.partition("::")
    op_name, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), op_name), overload or "default")
    except AttributeError:
        raise OnnxExporterError(
            f"A capture kernel is registered for {name}, which torch does not define: fix "
            "the name in the pack that registers it, or block that pack.") from None

    def kernel_if_served(*args: Any, **kwargs: Any) -> Any:
        if name in served or name.partition(".")[0] in served:
            return kernel(*args, **kwargs)
        return op._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd, *args, **kwargs)

    return _register_rnn_while_loop_decomposition(op, kernel_if_served)


def _example_size_below_two(tensors: Sequence[torch.Tensor], per_tensor: Sequence[Any]
                            ) -> bool:
    """Whether a dynamic axis has an example size of 0 or 1, which torch.export would
    otherwise fix."""
    return any(dim is not None and -tensor.dim() <= axis < tensor.dim()
               and tensor.shape[axis] < 2
               for tensor, axes in zip(tensors, per_tensor) if axes
               for axis, dim in _axis_items(axes))


def _axis_items(axes: Any) -> list[tuple[int, Any]]:
    return list(axes.items() if isinstance(axes, Mapping) else enumerate(axes))


def _dim_name(dim: Any) -> str | None:
    """The ONNX name a ``dynamic_shapes`` entry gives its axis: a string itself (as
    torch.onnx takes it), a ``torch.export.Dim``'s name; None for the rest."""
    if isinstance(dim, str):
        return dim
    name = getattr(dim, "__name__", None)
    return name if isinstance(name, str) else None


def _strings_as_dims(axes: Any) -> Any:
    """One tensor's ``dynamic_shapes`` entry with each dim name given as a string made
    ``Dim.DYNAMIC``, as torch.onnx passes it to torch.export (the name goes to ONNX)."""
    if isinstance(axes, Mapping):
        return {axis: _string_as_dim(dim) for axis, dim in axes.items()}
    if isinstance(axes, (list, tuple)):
        return type(axes)(_string_as_dim(dim) for dim in axes)
    return axes


def _string_as_dim(dim: Any) -> Any:
    return torch.export.Dim.DYNAMIC if isinstance(dim, str) else dim


def _specs_from_axes(tensors: Sequence[torch.Tensor], names: Sequence[str],
                     dynamic_axes: Mapping[str, Any], input_names: Sequence[str] | None
                     ) -> tuple[list[Any], dict[tuple[int, int], str]]:
    """torch.onnx's ``dynamic_axes`` (keys name the flat tensor inputs: ``input_names``,
    else the parameter paths such as ``hidden.0``) as one torch.export spec per tensor:
    ``Dim.AUTO``, so an axis the model fixes becomes static with a warning, as tracing
    would fix it, instead of failing the capture."""
    keys = list(input_names or [])
    specs: list[Any] = []
    axis_names: dict[tuple[int, int], str] = {}
    for index, tensor in enumerate(tensors):
        key = keys[index] if index < len(keys) else names[index]
        axes = dynamic_axes.get(key)
        if axes is None:
            specs.append(None)
            continue
        pairs = dynamic_axis_pairs(key, axes)
        spec = {}
        for axis, name in pairs:
            axis %= max(tensor.dim(), 1)
            spec[axis] = torch.export.Dim.AUTO
            axis_names[(index, axis)] = str(name)
        specs.append(spec)
    return specs, axis_names


def _tensor_specs(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  dynamic_shapes: Any) -> dict[int, Any]:
    """id(input tensor) -> its spec in ``dynamic_shapes`` (by parameter name, or a tuple in
    the order of ``forward``'s parameters, as torch.export reads it, named arguments
    included; nested like the arguments)."""
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
    except (TypeError, ValueError) as exc:
        if isinstance(dynamic_shapes, Mapping):
            raise InvalidExportArgumentError(
                f"args do not match {type(model).__name__}.forward: {exc}") from None
        bound = {str(i): value for i, value in enumerate((*args, *kwargs.values()))}
    if isinstance(dynamic_shapes, Mapping):
        unknown = set(dynamic_shapes) - set(bound)
        if unknown:
            raise InvalidExportArgumentError(
                f"dynamic_shapes names {sorted(unknown)}, which are not arguments given to "
                f"{type(model).__name__}.forward (given: {list(bound)}).")
        pairs = [(value, dynamic_shapes.get(name)) for name, value in bound.items()]
    elif isinstance(dynamic_shapes, (list, tuple)):
        pairs = list(zip(bound.values(), dynamic_shapes))
    else:
        raise InvalidExportArgumentError(
            f"dynamic_shapes must be a dict by argument name or a tuple in argument order, not "
            f"{type(dynamic_shapes).__name__}.")
    found: dict[int, Any] = {}

    def visit(value: Any, spec: Any) -> None:
        if spec is None:
            return
        if isinstance(value, torch.Tensor):
            found[id(value)] = spec
        elif isinstance(value, Mapping) and isinstance(spec, Mapping):
            for key, item in value.items():
                visit(item, spec.get(key))
        elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
            for item, item_spec in zip(value, spec):
                visit(item, item_spec)

    for value, spec in pairs:
        visit(value, spec)
    return found


@contextlib.contextmanager
def capture_state_released() -> Iterator[None]:
    """Drop at the block's end what torch.export keeps of the captures made inside it.

    * The source files read into ``linecache``: torch.export reads every file on the
      capture's call stacks to record stack traces (on ResNet-50, 37 of torch's own files,
      1.8 M characters) and linecache keeps them for the life of the process. The nodes
      hold their stack traces as text, and linecache reads a file again if anything asks
      for it; entries without a file behind them stay.
    * The nodes of the last non-strict capture, which torch.export maps by fake tensor in a
      module global (for its fake-tensor leak check, made during the capture) until the
      next capture: they keep the captured graph and its fake tensors alive after the
      program is dropped."""
    before = set(linecache.cache)
    try:
        yield
    finally:
        for name in set(linecache.cache) - before:
            entry = linecache.cache.get(name)
            if entry is not None and len(entry) == 4 and entry[1] is not None:
                linecache.cache.pop(name, None)
        traced = getattr(proxy_tensor, "_FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT", None)
        if isinstance(traced, dict):
            traced.clear()
