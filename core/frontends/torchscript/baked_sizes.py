"""Sizes of dynamic axes that a trace turned into Python numbers and decisions.

While the model runs under the tracer, ``x.size(0)`` is a traced 0-d tensor: arithmetic on
it and passing it to torch ops is recorded, so the graph recomputes it at any size. Once
Python converts it (``int(n)``, ``range(n)``, ``.item()``, an ``if`` on ``n < m``), the
trace holds only the traced value. While an export with ``dynamic_axes`` traces, the
conversions of such values are recorded here (the tensor conversion methods are wrapped,
for the tracing thread only) with the sizes they came from and the user's source line;
after the conversion :func:`warn` names those whose size is dynamic in the exported graph.

Not every conversion is a loss: torch records the slice bounds and indices it converts
(``x[:, :n - 1]``), a comparison with a constant (``if n > 1``) is how models guard edge
sizes and an equality test how they check inputs; none is reported. An ordering of two
sizes (SEW's ``if upsampled.shape[1] < n_input_timesteps``) is, unless the sides look
like one size: the same dynamic dim, or dims shape inference cannot name that were equal
when traced (a query's and a key's length in self-attention; a branch among those that
changes at another size is left to ``verify``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import dis
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from oxport.errors import warn_at_source
from oxport.exporter.process_hooks import SharedHook

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OXPORT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
#: Tensor methods that turn a traced value into a Python number, and into a decision.
_NUMBERS = ("__int__", "__index__", "__float__", "item")
_DECISIONS = ("__bool__",)
#: Comparisons whose outcome a trace may fix for sizes that vary (``eq``/``ne`` are left out:
#: models test sizes for equality to check that inputs agree, true at every valid size).
_ORDERINGS = frozenset(f"aten::{name}" for name in ("lt", "le", "gt", "ge"))
#: Nodes a size expression is followed back through, at most (they are short).
_WALK_LIMIT = 64

#: Opcodes of a subscript: torch records the slice bounds and indices of a tensor it converts.
_SUBSCRIPTS = frozenset(name for name in ("BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR",
                                          "BINARY_SLICE", "STORE_SLICE") if name in dis.opmap)

#: A traced value, by what survives the trace's clean-up (which copies the nodes made
#: inside module calls): ("input", position), or its node's kind, scope, source range and
#: output position.
Key = tuple[Any, ...]
#: (key of a tensor, axis or None for every axis, the size when traced or None): one
#: traced size an expression read.
Leaf = tuple[Key, "int | None", "int | None"]


@dataclasses.dataclass
class BakedSize:
    """A traced size expression that Python converted: a ``number`` (one side) or a
    ``decision`` (the two sides of a comparison), at ``source`` (``file(line): function``)."""

    kind: str
    sides: list[list[Leaf]]
    source: str
    #: The converted value's key: a torch op on the same line that takes it was given the
    #: traced size (its argument parser converts it, and the tracer records the size).
    converted: Key | None = None


class Recorder:
    """The conversions of one trace's size expressions, in :attr:`baked`."""

    def __init__(self) -> None:
        self.baked: list[BakedSize] = []

    def record(self, tensor: torch.Tensor, kind: str, caller: Any) -> None:
        code = caller.f_code
        if code.co_filename.startswith((_TORCH_DIR, _OXPORT_DIR)):
            return  # torch's own argument checks (e.g. batch_norm's size test)
        if kind == "number" and dis.opname[code.co_code[caller.f_lasti]] in _SUBSCRIPTS:
            return
        try:
            value = torch._C._get_value_trace(tensor)
        except RuntimeError:
            return
        node = value.node()
        if kind == "decision":
            if node.kind() not in _ORDERINGS:
                return  # a bool of one size, like ``if n % 2``, is a comparison with 0
            sides = [_size_leaves(operand) for operand in list(node.inputs())[:2]]
            if {leaf[:2] for leaf in sides[0]} == {leaf[:2] for leaf in sides[1]}:
                return  # the same sizes on both sides (``x.size(1) > x.size(1) - 1``)
        else:
            sides = [_size_leaves(value)]
        if sides and all(sides):
            self.baked.append(BakedSize(kind, sides, _user_source(caller), key(value)))


def _size_leaves(value: torch._C.Value) -> list[Leaf]:
    """The traced sizes (tensor, axis; None: every axis) a scalar expression reads."""
    leaves: list[Leaf] = []
    stack, visited = [value], 0
    while stack and visited < _WALK_LIMIT:
        node = stack.pop().node()
        visited += 1
        kind = node.kind()
        if kind in ("aten::size", "aten::sym_size", "aten::numel"):
            inputs = list(node.inputs())
            axis = inputs[1].toIValue() if len(inputs) > 1 else None
            axis = axis if isinstance(axis, int) else None
            type_ = inputs[0].type()
            sizes = (type_.sizes() or []) if type_.kind() == "TensorType" else []
            traced = sizes[axis] if axis is not None and -len(sizes) <= axis < len(sizes) \
                else None
            leaves.append((key(inputs[0]), axis, traced))
        elif kind not in ("prim::Constant", "prim::Param"):
            stack.extend(operand for operand in node.inputs() if _is_scalar(operand))
    return leaves


def key(value: torch._C.Value) -> Key:
    """What names ``value`` in the trace before and after its clean-up."""
    node = value.node()
    if node.kind() == "prim::Param":
        return ("input", value.offset())
    return (node.kind(), node.scopeName(), node.sourceRange(), value.offset())


def _is_scalar(value: torch._C.Value) -> bool:
    """Whether a value may be part of a size expression: a number or a 0-d tensor."""
    type_ = value.type()
    kind = type_.kind()
    if kind == "TensorType":
        return type_.dim() == 0
    return kind in ("IntType", "FloatType", "NumberType", "BoolType", "ListType")


def _user_source(frame: Any) -> str:
    """The first frame outside torch and oxport, as a node's source line reads."""
    while frame is not None and frame.f_code.co_filename.startswith((_TORCH_DIR, _OXPORT_DIR)):
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{frame.f_code.co_filename}({frame.f_lineno}): {frame.f_code.co_name}"


#: The caller of the conversion running in this thread, for the tracer's own warning.
_caller: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "oxport_conversion_caller", default=None)


def _wrapped(name: str, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def convert(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        recorder = _watch.current.get()
        if recorder is None or torch._C._get_tracing_state() is None:
            return original(self, *args, **kwargs)
        caller = sys._getframe(1)
        recorder.record(self, kind, caller)
        token = _caller.set((caller.f_code.co_filename, caller.f_lineno))
        try:
            return original(self, *args, **kwargs)
        finally:
            _caller.reset(token)
    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = original.__doc__
    return convert


#: The file the tracer's own TracerWarning names for a wrapped conversion.
WRAPPER_FILE = _wrapped.__code__.co_filename


def conversion_caller() -> tuple[str, int] | None:
    """The user's file and line of the conversion that runs in this thread (None outside
    one): the tracer's TracerWarning for it is attributed there, not to the wrapper."""
    return _caller.get()


def _install() -> Callable[[], None]:
    for name in (*_NUMBERS, *_DECISIONS):
        kind = "decision" if name in _DECISIONS else "number"
        setattr(torch.Tensor, name, _wrapped(name, kind, getattr(torch._C.TensorBase, name)))

    def restore() -> None:
        for name in (*_NUMBERS, *_DECISIONS):
            delattr(torch.Tensor, name)
    return restore


_watch: SharedHook[Recorder] = SharedHook("oxport_baked_sizes", _install)


def watching(recorder: Recorder | None) -> contextlib.AbstractContextManager[None]:
    """Record into ``recorder`` the conversions of the trace that runs inside, in this
    thread (nothing is wrapped when it is None)."""
    return _watch.held(recorder) if recorder is not None else contextlib.nullcontext()


def warn(baked: Sequence[BakedSize], graph: torch._C.Graph, lookup: Callable[[int], Any],
         dims: Mapping[int, tuple[Any, ...]], *,
         dynamic_sizes: Mapping[int, str] | None = None,
         second: Callable[[], Mapping[int, tuple[Any, ...]]] | None = None) -> None:
    """Warn once per source line for each conversion whose sizes are dynamic in the graph:
    ``graph`` is the traced graph, ``lookup(uid)`` the converted value of its value
    ``uid`` (None if none), ``dims`` the converted values' inferred dims.

    Where inference lost track of a value (no dims), a size of it that equals the traced
    size of a dynamic axis (``dynamic_sizes``: traced size -> axis name) is taken for that
    axis. ``second()`` gives the dims inferred with the dynamic axes at another size: a
    comparison whose sides were one size when traced is reported when they part there."""
    if not baked:
        return
    # Kind and scope first: reading every node's source range would cost more.
    wanted = {leaf[0][:2] for record in baked for side in record.sides for leaf in side}
    kinds = {kind for kind, _ in wanted}
    values: dict[Key, list[int]] = {}
    for value in graph.inputs():
        values.setdefault(key(value), []).append(value.unique())
    for node in graph.nodes():
        kind = node.kind()
        if kind in kinds and (kind, node.scopeName()) in wanted:
            for value in node.outputs():
                values.setdefault(key(value), []).append(value.unique())

    def dynamic_dims(side: list[Leaf]) -> frozenset[Any]:
        """The dims (symbols, None where unknown) of a side's sizes that are not static."""
        found = set()
        for leaf_key, axis, traced in side:
            for uid in values.get(leaf_key, ()):
                converted = lookup(uid)
                shape = dims.get(id(converted)) if converted is not None else None
                if shape is None:  # inference never reached it: judge by the traced size
                    if axis is not None and traced in (dynamic_sizes or {}):
                        found.add(f"{(dynamic_sizes or {})[traced]}, by its traced size")
                    continue
                axes = range(len(shape)) if axis is None else \
                    [axis] if -len(shape) <= axis < len(shape) else []
                found.update(shape[a] for a in axes if not isinstance(shape[a], int))
        return frozenset(found)

    def parts_at_second_size(record: BakedSize) -> bool:
        """Whether a comparison's two one-size sides infer to different sizes at the
        second size (or to a size on one side only)."""
        if second is None or any(len(side) != 1 or side[0][1] is None for side in record.sides):
            return False
        resized = second()
        sizes = []
        for ((leaf_key, axis, _),) in record.sides:
            found = {resized.get(id(lookup(uid)), ())[axis:][:1] for uid in values.get(leaf_key, ())
                     if lookup(uid) is not None}
            sizes.append({size[0] for size in found if size and isinstance(size[0], int)})
        # Parted, or only one side still known: inference no longer follows them as one.
        return len(sizes[0]) + len(sizes[1]) == 1 or (
            len(sizes[0]) == len(sizes[1]) == 1 and sizes[0] != sizes[1])

    said: set[tuple[str, str]] = set(_taken_by_torch_ops(baked, graph))
    for record in baked:
        if (record.kind, record.source) in said:
            continue
        sides = [dynamic_dims(side) for side in record.sides]
        if not all(sides) or (record.kind == "decision" and _alike(record, sides) and not (
                _unnamed(sides) and parts_at_second_size(record))):
            continue
        said.add((record.kind, record.source))
        names = ", ".join(sorted({_dim_name(dim) for side in sides for dim in side}))
        where = f" at {record.source}" if record.source else ""
        if record.kind == "number":
            message = (f"oxport: a size that dynamic_axes makes dynamic ({names}) is converted "
                       f"to a Python number{where} (int(), float(), range() or .item()): the "
                       "trace recorded the traced value as a constant, so "
                       "the exported model is only right at the traced size. Keep it a tensor "
                       "(arithmetic on x.size(0) and passing it to torch ops are traced), or "
                       "keep that axis static.")
        else:
            message = (f"oxport: a Python condition{where} (an if, min or max) compares sizes "
                       f"that dynamic_axes makes dynamic ({names}): the trace followed the "
                       "branch the traced sizes took, so the exported model is only right at "
                       "sizes that take it too. Compute both cases with tensor ops "
                       "(torch.where, torch.minimum), or keep those axes static.")
        warn_at_source(message, UserWarning, record.source)


def _taken_by_torch_ops(baked: Sequence[BakedSize],
                        graph: torch._C.Graph) -> Iterator[tuple[str, str]]:
    """(kind, source) of the conversions a torch op on their own line takes as an argument
    (``torch.hann_window(x.size(0))``): the op's argument parser converted the size, and the
    trace recorded it as the op's input."""
    converted: dict[Key, set[str]] = {}
    for record in baked:
        if record.kind == "number" and record.converted is not None:
            converted.setdefault(record.converted, set()).add(record.source)
    producers = {value_key[:2] for value_key in converted}
    kinds = {kind for kind, _ in producers}
    # From the few nodes that made a converted value to the top-level nodes reading it:
    # reading every node's operands would cost more than the rest of the check.
    for producer in graph.nodes():
        if producer.kind() not in kinds or (producer.kind(), producer.scopeName()) \
                not in producers:
            continue
        for operand in producer.outputs():
            sources = converted.get(key(operand), ())
            if not sources:
                continue
            for node in _top_level_readers(operand):
                for source in sources:
                    if source.split(": ", 1)[0] in node.sourceRange():
                        yield "number", source


def _top_level_readers(value: torch._C.Value) -> Iterator[torch._C.Node]:
    """The top-level nodes that take ``value``, directly or through the tracer's unwrapping
    of it into an op's number argument (:data:`_UNWRAPS`)."""
    for use in value.uses():
        reader = use.user
        if reader.owningBlock().owningNode() is not None:
            continue
        yield reader
        if reader.kind() in _UNWRAPS:
            yield from (use.user for use in reader.output().uses()
                        if use.user.owningBlock().owningNode() is None)


#: Nodes the tracer puts between a traced size and the op argument it was given as.
_UNWRAPS = frozenset(("aten::Int", "aten::Float", "aten::ScalarImplicit"))


def _alike(record: BakedSize, dims: list[frozenset[Any]]) -> bool:
    """Whether a comparison's sides look like one size: the same dynamic dims, or dims
    inference could not name (None, ``unk__``) from sizes that were equal when traced."""
    if dims[0] == dims[1] and None not in dims[0]:
        return True
    if any(_dim_name(dim) != _DERIVED for side in dims for dim in side):
        return False
    traced = [sorted(str(leaf[2]) for leaf in side) for side in record.sides]
    return traced[0] == traced[1] and "None" not in traced[0]


_DERIVED = "a size computed from one"


def _unnamed(dims: list[frozenset[Any]]) -> bool:
    """Whether inference named none of the dims (each derives from a dynamic axis)."""
    return all(_dim_name(dim) == _DERIVED for side in dims for dim in side)


def _dim_name(dim: Any) -> str:
    """A dim as the warning names it: the dynamic axis's name, else what it derives from."""
    if isinstance(dim, str) and not dim.startswith("unk__"):
        return dim
    return _DERIVED
