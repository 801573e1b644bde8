"""A model's arguments and results at its boundary, for every front end: torch.onnx's ``args``
forms, Python numbers as inputs, feeds for ONNX Runtime, the names of nested argument leaves,
and structured outputs flattened to a tuple of tensors named after their dict keys."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from oxport.errors import InvalidExportArgumentError, OnnxExporterError
from oxport.frontends import io_types


def normalize_args(args: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The seed's args forms -> (positional, keyword) arguments.

    A single tensor (or number) is a 1-tuple, and so is a list, which is one argument as
    torch.onnx passes it (``args=[a, b]`` calls ``forward([a, b])``); a trailing dict of
    a tuple holds named arguments (so ``(x, {"a": 1}, {})`` passes the dict
    positionally), unless tensors key it: a dict keyed by tensors is a
    :class:`TensorKeyed` argument. Tensors and Python ints,
    floats and bools anywhere in the (nested) arguments become graph inputs (see
    :func:`as_input`); other values (None, str...) are hard-coded into the graph.
    """
    if isinstance(args, (torch.Tensor, int, float, bool, list)):
        return (args,), {}
    if not isinstance(args, tuple):
        raise InvalidExportArgumentError(
            f"args must be a tuple of inputs or a single tensor, not {type(args).__name__}. "
            "Wrap a single input as (x,)."
        )
    args = tuple(_keys_as_inputs(arg) for arg in args)
    if args and isinstance(args[-1], dict) and not isinstance(args[-1], TensorKeyed):
        return args[:-1], dict(args[-1])
    return args, {}


class TensorKeyed(dict):
    """A dict argument keyed by tensors: as torch.onnx flattens it, each key is an input
    too, before its value (the model gets a plain dict of the traced keys and values)."""


def _keyed_children(mapping: TensorKeyed) -> tuple[list[Any], int]:
    return [item for pair in mapping.items() for item in pair], len(mapping)


def _keyed_children_with_keys(mapping: TensorKeyed) -> tuple[list[tuple[Any, Any]], int]:
    children, count = _keyed_children(mapping)
    return [(pytree.SequenceKey(i), child) for i, child in enumerate(children)], count


pytree.register_pytree_node(
    TensorKeyed, _keyed_children, lambda children, _: dict(zip(children[::2], children[1::2])),
    flatten_with_keys_fn=_keyed_children_with_keys)


def _keys_as_inputs(arg: Any) -> Any:
    """``arg`` with its dicts keyed by tensors made :class:`TensorKeyed` (nested too)."""
    if type(arg) is dict:
        items = {key: _keys_as_inputs(value) for key, value in arg.items()}
        return TensorKeyed(items) if any(isinstance(k, torch.Tensor) for k in items) else items
    if type(arg) in (list, tuple):
        return type(arg)(_keys_as_inputs(item) for item in arg)
    return arg


def as_input(leaf: Any) -> Any:
    """An args leaf as the model sees it while tracing, as torch.onnx does: a Python
    bool, int or float becomes a 0-d bool, int64 or float64 tensor (a graph input the
    model may read); anything else is unchanged."""
    if isinstance(leaf, bool):
        return torch.tensor(leaf, dtype=torch.bool)
    if isinstance(leaf, int):
        return torch.tensor(leaf, dtype=torch.int64)
    if isinstance(leaf, float):
        return torch.tensor(leaf, dtype=torch.float64)
    return leaf


def feed_array(leaf: Any, part: str | None = None) -> Any:
    """An args leaf (tensor or Python number) as the numpy array ONNX Runtime takes (a list
    of tensors, a Sequence input's feed, as a list of arrays); for a quantized tensor, its
    ``part`` (``value``, ``scale`` or ``zero_point``)."""
    from oxport.frontends import quantized_io
    if is_tensor_list(leaf) or is_int_list(leaf):
        return [feed_array(item) for item in leaf]
    # resolved: a conjugated or negated view (the imaginary part of an ifft) has no numpy form
    tensor = as_input(leaf).detach().cpu().resolve_conj().resolve_neg()
    if part is not None:
        tensor = quantized_io.feed(tensor, part)
    if tensor.is_complex():  # fed as its real pairs, as the graph takes it
        tensor = torch.view_as_real(tensor)
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: ml_dtypes' has the same bits
        import ml_dtypes
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


class Flattened(torch.nn.Module):
    """Calls the model with rebuilt structured args and returns a flat tuple of tensors
    (their names, from dict keys and namedtuple fields, go to ``output_names``, which
    may be given: a list kept outside the module survives torch.export, which restores a
    module's attributes after its capture)."""

    def __init__(self, model: torch.nn.Module, spec: Any, leaves: list[Any],
                 tensor_slots: list[int], notes: list[str],
                 output_names: list[str | None] | None = None) -> None:
        super().__init__()
        self.model = model
        self._spec = spec
        self._leaves = leaves
        self._tensor_slots = tensor_slots
        self._notes = notes
        self.output_names: list[str | None] = [] if output_names is None else output_names

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        leaves = list(self._leaves)
        for slot, tensor in zip(self._tensor_slots, tensors):
            leaves[slot] = tensor
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        self.output_names.clear()
        return flatten_outputs(self.model(*args, **kwargs), self._notes, self.output_names)


def flatten_outputs(out: Any, notes: list[str],
                    names: list[str | None] | None = None) -> tuple[torch.Tensor, ...]:
    """Outputs as a flat tuple of tensors (and of the SymInts, SymFloats and SymBools a
    torch.export capture computes from sizes); strings are dropped. ``names`` receives a name
    for each: the dict keys and namedtuple fields on its path (``"logits"``,
    ``"pair.0"``), or None when there are none."""
    flat: list[torch.Tensor] = []

    def visit(obj: Any, where: str, label: str | None) -> None:
        if isinstance(obj, torch.Tensor):
            flat.append(obj)
            if names is not None:
                names.append(label)
        elif isinstance(obj, dict):
            _note(notes, f"the dict output{' ' + where if where else ''} was replaced by its "
                         f"values, named after its keys {list(obj)} (ONNX has no dict outputs)",
                  lossy=False)
            for key, item in obj.items():
                visit(item, f"{where}[{key!r}]", _join(label, key))
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
            for field, item in zip(obj._fields, obj):
                visit(item, f"{where}.{field}", _join(label, field))
        elif isinstance(obj, (list, tuple)):
            for i, item in enumerate(obj):
                visit(item, f"{where}[{i}]", None if label is None else _join(label, i))
        elif isinstance(obj, str):
            _note(notes, f"the str output{' ' + where if where else ''} ({obj!r}) was dropped "
                         "(ONNX has no string outputs)", lossy=True)
        elif obj is None:
            return
        elif isinstance(obj, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            flat.append(obj)  # a number computed from sizes (torch.export): a 0-d output
            if names is not None:
                names.append(label)
        elif isinstance(obj, (bool, int, float)):
            flat.append(torch.tensor(obj))
            if names is not None:
                names.append(label)
        elif hasattr(obj, "to_tuple"):  # ModelOutput-like containers
            visit(obj.to_tuple(), where, label)
        elif (children := io_types.named_children(obj)) is not None:
            for name, item in children:  # a type a plugin declared for the boundary
                visit(item, f"{where}.{name}", _join(label, name))
        else:
            raise OnnxExporterError(
                f"The model returned {type(obj).__name__} at output{where}; only tensors, "
                "numbers, tuples, lists and dicts of them, and the types plugins declare "
                "(oxport_register_io_types) can be exported: install or write the plugin "
                f"that declares {type(obj).__module__}.{type(obj).__qualname__}."
            )

    visit(out, "", None)
    return tuple(flat)


def _join(label: str | None, key: Any) -> str:
    return f"{label}.{key}" if label is not None else str(key)


class OutputNote(str):
    """What happened to the model's outputs on the way to ONNX; ``lossy`` when something
    it returned is not in the file (a warning), not when it was only reshaped (a dict
    flattened into outputs named after its keys)."""

    lossy: bool = False


def _note(notes: list[str], text: str, lossy: bool) -> None:
    if text not in notes:
        note = OutputNote(text)
        note.lossy = lossy
        notes.append(note)


def leaf_paths(args: tuple[Any, ...], kwargs: dict[str, Any], fn: Any) -> list[str]:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        positional_names = [p.name for p in params]
    except (TypeError, ValueError):
        positional_names = []
    paths, _ = pytree.tree_flatten_with_path((args, kwargs))
    names = []
    for key_path, _leaf in paths:
        top, where, rest = key_path[0].idx, key_path[1], key_path[2:]
        if top == 0:
            index = where.idx
            base = positional_names[index] if index < len(positional_names) else f"input_{index}"
        else:
            base = io_types.key_name(where)
        names.append(".".join([base, *(io_types.key_name(k) for k in rest)]))
    return names


def check_inputs(positional: tuple[Any, ...], kwargs: dict[str, Any], fn: Any) -> None:
    """Raise a clear error, naming the input, for an args leaf no front end can take: a numpy
    array, or a tensor on the meta device (it has no values)."""
    leaves = pytree.tree_leaves((positional, kwargs))
    for name, value in zip(leaf_paths(positional, kwargs, fn), leaves):
        if isinstance(value, np.ndarray):
            raise InvalidExportArgumentError(
                f"Input {name!r} in args is a numpy.ndarray; export takes torch tensors: pass "
                f"torch.from_numpy({name}) instead.")
        if isinstance(value, torch.Tensor) and value.is_meta:
            raise InvalidExportArgumentError(
                f"Input {name!r} in args is on the meta device (a shape without values): pass "
                "a tensor with values, e.g. torch.randn(...) on the CPU.")


def is_tensor_list(arg: Any) -> bool:
    """Whether ``arg`` is a non-empty list of tensors (a scripted model's Sequence input)."""
    return isinstance(arg, list) and bool(arg) and all(isinstance(a, torch.Tensor) for a in arg)


def is_int_list(arg: Any) -> bool:
    """Whether ``arg`` is a non-empty list of Python ints (a scripted ``List[int]``
    argument, a Sequence input from opset 11)."""
    return isinstance(arg, list) and bool(arg) and all(
        isinstance(a, int) and not isinstance(a, bool) for a in arg)


def check_signature(forward: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        inspect.signature(forward).bind(*args, **kwargs)
    except TypeError as exc:
        raise InvalidExportArgumentError(
            f"args do not match {getattr(forward, '__qualname__', 'forward')}"
            f"{signature(forward)}: {exc}. Pass one value per parameter; end args with a "
            "dict for named arguments."
        ) from None
    except ValueError:
        return


def signature(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"



def dynamic_axis_pairs(key: str, spec: Mapping[int, str] | Sequence[int]) -> list[tuple[int, str]]:
    """``dynamic_axes[key]`` as (axis, dim name) pairs: a dict as given, a list of axes
    named as torch.onnx names them (``<key>_dynamic_axes_<1-based position>``)."""
    if isinstance(spec, Mapping):
        return list(spec.items())
    return [(axis, f"{key}_dynamic_axes_{i + 1}") for i, axis in enumerate(spec)]
