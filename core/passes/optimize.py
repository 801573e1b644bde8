"""Graph clean-ups that run with constant folding (``do_constant_folding=True``).

* **Static shape arithmetic**: ``Shape`` results, and the ``Gather``/``Slice``/
  ``Squeeze``/``Unsqueeze``/``Concat``/``Cast`` arithmetic on them, become
  constants wherever the dims they read are static: no dynamic axis reaches them.
  Which dims are static comes from one ONNX shape inference over the graph with
  every weight as a typed input (no weight bytes), the dynamic axes as symbols. A
  ``Reshape`` whose target shape mixes static and run-time dims gets a constant
  target when its run-time dims are the data's own (``0``, copy) or one is left
  (``-1``, inferred).
* **Chains**: ``Transpose`` of ``Transpose``, ``Cast`` of a lossless ``Cast``,
  ``Reshape`` of ``Reshape``, ``Squeeze``/``Unsqueeze`` pairs, ``Unsqueeze`` of
  ``Unsqueeze``; casts to the same type and identity permutations disappear.
* **Identity** nodes are bypassed, and so are ``Add``/``Sub`` of an integer zero and
  ``Mul``/``Div`` by one that broadcast to nothing.
* **Constant** nodes at the top level become initializers (not with
  ``keep_initializers_as_inputs``, nor in module functions).
* **Common subexpressions**: a node repeating an earlier one (same op, attributes
  and inputs; deterministic ai.onnx ops) reuses its outputs.

Each pass returns how many nodes it changed; dead nodes are left to
:func:`oxport.passes.folding.eliminate_dead_code`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from oxport.ir import Graph, Node, Type, Value
from oxport.passes import folding as passes
from oxport.serialize.proto import Namer, graph_proto, ir_version, value_info
from oxport.serialize.weights import LazyTensor, onnx_elem_type, tensor_header, tensor_proto
from oxport.types import tensor_items

log = logging.getLogger("oxport.passes.optimize")

#: Integer tensors up to this many elements are followed as shape arithmetic.
SHAPE_MAX_ELEMENTS = 64
#: At most this many rounds of shape inference and folding.
STATIC_ROUNDS = 4
_INT_TYPES = {TensorProto.INT64: torch.int64, TensorProto.INT32: torch.int32}


#: What each count of :func:`optimize` counts, for its log line.
_DONE = {
    "batchnorms": "batch norms fused into convolutions", "static_shapes": "shapes made static",
    "folded": "nodes folded to constants", "chains": "chains collapsed",
    "identities": "identities removed", "neutral": "neutral operations removed",
    "cse": "repeated subexpressions merged", "dead": "dead nodes removed",
    "constants": "constants made initializers",
}


def optimize(graph: Graph, opset: int, *, frozen: set[int] | None = None,
             dynamic_axes: Mapping[int, Mapping[int, str]] | None = None,
             across_modules: bool = True, constants_as_initializers: bool = True
             ) -> dict[str, int]:
    """Fold constants and clean the graph up; returns counts per pass.

    ``dynamic_axes`` maps the index of each graph input to ``{axis: name}`` for its
    dynamic axes (None: every axis of every input may vary, each its own size); axes
    with one name have one size, as in the exported model. ``frozen`` holds ids of
    values never folded. ``across_modules=False`` shares values only between nodes of
    the same module call and folds no batch norm into a convolution (for
    ``export_modules_as_functions``: each module keeps its own nodes).
    ``constants_as_initializers=False`` keeps Constant nodes (``keep_initializers_as_inputs``
    would make each a graph input).
    """
    counts = {"batchnorms": fuse_conv_batchnorm(graph, frozen) if across_modules else 0,
              "static_shapes": 0,
              "folded": 0, "chains": collapse_chains(graph, opset)}
    # A Reshape whose target folds gives static dims that the next inference sees.
    hints: dict[int, tuple[Any, ...]] = {}
    for _ in range(STATIC_ROUNDS):
        before = _reshape_state(graph), dict(hints)
        counts["static_shapes"] += fold_static_shapes(graph, opset, dynamic_axes, hints,
                                                      across_modules)
        counts["folded"] += passes.fold_constants(graph, opset, frozen)
        if (_reshape_state(graph), hints) == before:
            break  # no new dims for the next inference to see
    counts["chains"] += collapse_chains(graph, opset)
    counts["identities"] = remove_identities(graph)
    counts["neutral"] = remove_neutral_arithmetic(graph)
    counts["chains"] += collapse_chains(graph, opset)
    counts["cse"] = eliminate_common_subexpressions(graph, across_modules)
    counts["folded"] += passes.fold_constants(graph, opset, frozen)
    counts["dead"] = passes.eliminate_dead_code(graph)
    if across_modules and constants_as_initializers:
        counts["constants"] = constants_to_initializers(graph)
    log.info("optimize: %s", "; ".join(f"{_DONE[key]}: {n}" for key, n in counts.items() if n)
             or "nothing to simplify")
    return counts


def _reshape_state(graph: Graph) -> tuple[int, int]:
    """Reshapes, and those with a constant target: what changes the dims inference sees."""
    reshapes = [n for n in graph.nodes if n.op_type == "Reshape" and not n.domain]
    return len(reshapes), sum(1 for n in reshapes if n.input_values[1].is_const)


# -- shared helpers ------------------------------------------------------------------
def _drop_replaced(graph: Graph, replace: dict[int, Value]) -> int:
    """Remove the top-level nodes whose (single) output was replaced and point every use
    at the replacement; returns how many were replaced."""
    if replace:
        graph.nodes = [n for n in graph.nodes
                       if not (n.output_values and id(n.output_values[0]) in replace)]
        passes.replace_uses(graph, replace)
    return len(replace)


def _substitute(replace: dict[int, Value], old: Value, new: Value) -> None:
    """Record that ``new`` stands for ``old`` (the same tensor); ``new`` takes ``old``'s
    type when its own lacks a dtype or shape (graph outputs need them)."""
    replace[id(old)] = new
    mine, theirs = new.type(), old.type()
    if theirs.kind() == "TensorType" and theirs.dtype() is not None and \
            theirs.shape is not None and (mine.dtype() is None or mine.shape is None):
        new.setType(theirs)


def _const(value: Value | None) -> Any:
    """The constant array of ``value``, or None."""
    if value is None or not value.is_const or not isinstance(value.const, torch.Tensor):
        return None
    return value.const


def _const_ints(value: Value | None) -> list[int] | None:
    tensor = _const(value)
    if tensor is None or tensor.dtype not in (torch.int64, torch.int32) or tensor.dim() > 1:
        return None
    return [int(v) for v in tensor.reshape(-1).tolist()]


def _axes(node: Node, opset: int) -> list[int] | None:
    """A Squeeze's or Unsqueeze's constant axes (an input from opset 13)."""
    attribute = node.attrs["axes"][1] if "axes" in node.attrs else None
    return passes.opset_axes(attribute, node.input_values, opset, 13, _const_ints)


def _rank(value: Value) -> int | None:
    return value.type().dim() if value.type().kind() == "TensorType" else None


def _ints_value(graph: Graph, items: list[int]) -> Value:
    """An int64 1-D constant for a new node input."""
    tensor = torch.tensor(items, dtype=torch.int64)
    value = Value(graph, graph.fresh_name("const"), Type.of(tensor))
    value.const = tensor
    graph.initializers[value.name] = value
    return value


# -- Conv + BatchNormalization ---------------------------------------------------------
def fuse_conv_batchnorm(graph: Graph, frozen: set[int] | None = None) -> int:
    """Fold inference-mode BatchNormalization into the Conv (or ungrouped ConvTranspose,
    whose weight holds the output channels on its second axis) before it, when the
    convolution's output feeds only the batch norm and its weight and bias only it.

    The new weight is a :class:`~oxport.serialize.weights.LazyTensor` computed when
    written (no copy of the weights is held during the export; a streamed weight records
    the scale: its ``scaled``); it keeps the Conv weight's name, and the bias the Conv
    bias's name (the batch norm's bias's when the Conv had none).
    Returns how many batch norms went.
    """
    frozen = frozen or set()
    consumers = passes.consumers(graph)
    replace: dict[int, Value] = {}
    fused: set[int] = set()
    for norm in graph.nodes:
        if norm.op_type != "BatchNormalization" or norm.domain or len(norm.input_values) != 5 \
                or norm.attrs.get("training_mode", ("i", 0))[1] \
                or any(consumers.get(id(v)) for v in norm.output_values[1:]):
            continue
        conv = norm.input_values[0].producer if norm.input_values[0] is not None else None
        if conv is None or conv.op_type not in ("Conv", "ConvTranspose") or conv.domain \
                or len(conv.input_values) < 2 or consumers.get(id(conv.output_values[0])) != [norm]:
            continue
        # A ConvTranspose weight is (in, out / group, ...): one group keeps out whole.
        axis = 1 if conv.op_type == "ConvTranspose" else 0
        if axis and conv.attrs.get("group", ("i", 1))[1] != 1:
            continue
        weight = conv.input_values[1]
        bias = conv.input_values[2] if len(conv.input_values) > 2 else None
        own = [v for v in (weight, bias) if v is not None]
        stats = norm.input_values[1:]
        if any(not _float_weight(v, graph, frozen) for v in [*own[1:], *stats]) \
                or not (_float_weight(weight, graph, frozen) or _scalable(weight, graph, frozen)) \
                or any(consumers.get(id(v)) != [conv] for v in own):
            continue
        scale, beta, mean, var = (_float32_array(v) for v in stats)
        w = weight.const.detach() if isinstance(weight.const, torch.Tensor) else weight.const
        if not scale.shape == beta.shape == mean.shape == var.shape == (w.shape[axis],):
            continue
        factor = scale / np.sqrt(var + np.float32(norm.attrs.get("epsilon", ("f", 1e-5))[1]))
        lazy = LazyTensor(w.shape, w.dtype, _scaled(w, torch.from_numpy(factor).to(w.device),
                                                    axis)) \
            if isinstance(w, torch.Tensor) else w.scaled(factor, axis)
        if lazy is None:
            continue
        b = _float32_array(bias) if bias is not None else np.zeros_like(mean)
        new_bias = torch.from_numpy((b - mean) * factor + beta).to(w.dtype)
        bias_name = bias.name if bias is not None else (
            stats[1].name if consumers.get(id(stats[1])) == [norm] else weight.name + ".bias")
        for value in own:
            del graph.initializers[value.name]
        if bias is None and bias_name == stats[1].name:
            del graph.initializers[bias_name]  # the norm's bias becomes the Conv's
        conv.input_values[1:] = [
            graph.add_initializer(weight.name, lazy, Type.tensor(w.dtype, tuple(w.shape)),
                                  parameter=True),
            graph.add_initializer(bias_name, new_bias, parameter=True)]
        _substitute(replace, norm.output_values[0], conv.output_values[0])
        conv.output_values[0].setType(norm.output_values[0].type())
        fused.add(id(norm))
    if fused:
        graph.nodes = [n for n in graph.nodes if id(n) not in fused]
        passes.replace_uses(graph, replace)
    return len(fused)


def _float32_array(value: Value) -> np.ndarray:
    """A per-channel batch-norm or bias vector as float32 numpy (a view where it can be):
    the fold's arithmetic on these short vectors runs in numpy, whose loops are a few pages,
    where each of torch's elementwise kernels maps more of torch's library on first use."""
    return value.const.detach().to("cpu", torch.float32).numpy()


def _float_weight(value: Value | None, graph: Graph, frozen: set[int]) -> bool:
    """A floating-point tensor initializer that may be folded."""
    tensor = _const(value)
    return (tensor is not None and tensor.is_floating_point() and id(value) not in frozen
            and graph.initializers.get(value.name) is value)


def _scalable(value: Value, graph: Graph, frozen: set[int]) -> bool:
    """A weight without values that records a per-channel scale (a streamed weight)."""
    return (value.is_const and hasattr(value.const, "scaled") and id(value) not in frozen
            and value.const.dtype.is_floating_point
            and graph.initializers.get(value.name) is value)


def _scaled(weight: torch.Tensor, factor: torch.Tensor, axis: int = 0) -> Any:
    """Computes rows ``start:stop`` of ``weight`` scaled by ``factor`` along dimension
    ``axis`` (0 or 1) into ``out``, in float32."""
    shape = [1] * weight.dim()
    shape[axis] = -1

    def rows(start: int, stop: int, out: torch.Tensor) -> None:
        along = (factor[start:stop] if axis == 0 else factor).reshape(shape)
        part = weight[start:stop]
        if out.dtype == part.dtype == torch.float32 and part.device.type == "cpu":
            np.multiply(part.numpy(), along.numpy(), out=out.numpy())  # as _float32_array
        else:
            out.copy_(part.float() * along)
    return rows


# -- static shape arithmetic ---------------------------------------------------------
class _Item:
    """One element of a shape tensor: its traced value, whether it is static, and (for a
    run-time dim read by ``Shape``) which value and axis it came from and the symbol shape
    inference gave that dim (equal symbols are equal sizes)."""

    __slots__ = ("value", "static", "origin", "symbol")

    def __init__(self, value: int | None, static: bool, origin: tuple[int, int] | None = None,
                 symbol: str | None = None) -> None:
        self.value = value
        self.static = static
        self.origin = origin
        self.symbol = symbol


class _Known:
    """A small integer tensor followed through shape arithmetic, element by element."""

    __slots__ = ("shape", "items", "dtype")

    def __init__(self, shape: tuple[int, ...], items: list[_Item], dtype: torch.dtype) -> None:
        self.shape = shape
        self.items = items
        self.dtype = dtype

    @property
    def static(self) -> bool:
        return all(item.static for item in self.items)

    def signature(self) -> tuple[Any, ...] | None:
        """What identifies the run-time values: static values and dim symbols (None when
        some element has neither)."""
        parts = []
        for item in self.items:
            if item.static:
                parts.append(item.value)
            elif item.symbol is not None:
                parts.append(("symbol", item.symbol))
            else:
                return None
        return self.shape, self.dtype, tuple(parts)

    def tensor(self) -> torch.Tensor:
        return torch.tensor([item.value for item in self.items], dtype=self.dtype).reshape(
            self.shape)


def fold_static_shapes(graph: Graph, opset: int,
                       dynamic_axes: Mapping[int, Mapping[int, str]] | None = None,
                       hints: dict[int, tuple[Any, ...]] | None = None,
                       across_modules: bool = True) -> int:
    """Replace shape arithmetic over static dims by constants and repeated run-time shape
    values by their first computation; give Reshapes constant targets where their
    run-time dims allow, and drop those that keep their input's shape.

    ``hints`` (id(value) -> dims) are dims shape inference cannot derive (a ``Range``
    over a run-time dim); new ones are added for the next call. Returns how many nodes
    changed (new hints count too)."""
    hints = {} if hints is None else hints
    if not any(node.op_type in _SHAPE_OPS and not node.domain for node in graph.nodes):
        return 0  # nothing reads a shape: skip the inference
    dims = inferred_dims(graph, dynamic_axes, hints)
    if not dims:
        return 0
    known: dict[int, _Known] = {}
    canonical: dict[tuple[Any, ...], Value] = {}
    replace: dict[int, Value] = {}
    kept: list[Node] = []
    changed = 0
    for node in graph.nodes:
        passes.rewire(node, replace)
        result = None if node.domain or len(node.output_values) != 1 else \
            _SHAPE_RULES.get(node.op_type, _no_rule)(node, opset, known, dims)
        if result is not None:
            if any(item.static and item.value is None for item in result.items):
                log.debug("static shape pass: %s has a static dim of unknown value", node)
                result = None
        if result is not None and result.static:
            passes.make_initializer(graph, node.output_values[0], result.tensor())
            changed += 1
            continue
        if result is None and node.op_type == "Range":
            length = _range_length(node, known)
            if length is not None and hints.get(id(node.output_values[0])) != (length,):
                hints[id(node.output_values[0])] = (length,)
                changed += 1
        if result is None and node.op_type == "Reshape" and _keeps_shape(node, dims):
            _substitute(replace, node.output_values[0], node.input_values[0])
            changed += 1
            continue
        if result is not None:
            output = node.output_values[0]
            signature = result.signature()
            if signature is not None and not across_modules:
                signature = (node.calls, *signature)
            earlier = canonical.get(signature) if signature is not None else None
            if earlier is not None:  # the same run-time values as an earlier result
                replace[id(output)] = earlier
                changed += 1
                continue
            if signature is not None:
                canonical[signature] = output
            known[id(output)] = result
        elif node.op_type == "Reshape" and _constant_target(graph, node, known, dims):
            changed += 1
            if _keeps_shape(node, dims):
                _substitute(replace, node.output_values[0], node.input_values[0])
                continue
        kept.append(node)
    graph.nodes = kept
    passes.replace_uses(graph, replace)
    return changed


_SHAPE_OPS = {"Shape", "Reshape", "Range"}


def _no_rule(*_: Any) -> None:
    return None


def _known(value: Value | None, known: dict[int, _Known]) -> _Known | None:
    if value is None:
        return None
    found = known.get(id(value))
    if found is not None:
        return found
    tensor = _const(value)
    if tensor is None or tensor.dtype not in (torch.int64, torch.int32) \
            or tensor.numel() > SHAPE_MAX_ELEMENTS:
        return None
    return _Known(tuple(tensor.shape), [_Item(int(v), True) for v in tensor.reshape(-1).tolist()],
                  tensor.dtype)


def _shape_rule(node: Node, opset: int, known: dict[int, _Known],
                dims: dict[int, tuple[Any, ...]]) -> _Known | None:
    data = node.input_values[0]
    inferred = dims.get(id(data))
    traced = data.type().shape if data.type().kind() == "TensorType" else None
    if inferred is None or traced is None or len(traced) != len(inferred):
        return None
    items = []
    for axis, (ours, theirs) in enumerate(zip(traced, inferred)):
        value = ours if isinstance(ours, int) else None
        if isinstance(theirs, int):
            if value is not None and value != theirs:
                return None  # the trace and the inference disagree: leave it alone
            items.append(_Item(theirs, True))
        else:
            items.append(_Item(value, False, (id(data), axis),
                               theirs if isinstance(theirs, str) else None))
    rank = len(items)
    start = node.attrs.get("start", ("i", 0))[1]
    end = node.attrs.get("end", ("i", rank))[1]
    start, end = (max(0, min(rank, s + rank if s < 0 else s)) for s in (start, end))
    items = items[start:end]
    return _Known((len(items),), items, torch.int64)


def _gather_rule(node: Node, opset: int, known: dict[int, _Known], dims: Any) -> _Known | None:
    data, indices = _known(node.input_values[0], known), _const(node.input_values[1])
    if data is None or indices is None or len(data.shape) != 1 \
            or node.attrs.get("axis", ("i", 0))[1] not in (0, -1) \
            or indices.dtype not in (torch.int64, torch.int32):
        return None
    size = data.shape[0]
    picked = []
    for index in indices.reshape(-1).tolist():
        if not -size <= index < size:
            return None
        picked.append(data.items[index])
    return _Known(tuple(indices.shape), picked, data.dtype)


def _slice_rule(node: Node, opset: int, known: dict[int, _Known], dims: Any) -> _Known | None:
    data = _known(node.input_values[0], known)
    if data is None or len(data.shape) != 1:
        return None
    if opset < 10:
        starts, ends = node.attrs["starts"][1], node.attrs["ends"][1]
        axes, steps = node.attrs.get("axes", ("is", None))[1], None
    else:
        inputs = node.input_values + [None] * (5 - len(node.input_values))
        starts, ends = _const_ints(inputs[1]), _const_ints(inputs[2])
        axes = _const_ints(inputs[3]) if inputs[3] is not None else None
        steps = _const_ints(inputs[4]) if inputs[4] is not None else None
        if starts is None or ends is None or (inputs[3] is not None and axes is None) \
                or (inputs[4] is not None and steps is None):
            return None
    if len(starts) != 1 or (axes is not None and list(axes) not in ([0], [-1])) \
            or (steps is not None and steps[0] == 0):
        return None
    items = data.items[slice(starts[0], ends[0], steps[0] if steps else 1)]
    return _Known((len(items),), items, data.dtype)


def _reshaped(shape: tuple[int, ...], fn: Any) -> tuple[int, ...] | None:
    try:
        return tuple(fn(np.empty(shape, dtype=np.int8)).shape)
    except (ValueError, np.exceptions.AxisError):
        return None


def _squeeze_rule(node: Node, opset: int, known: dict[int, _Known], dims: Any) -> _Known | None:
    data = _known(node.input_values[0], known)
    if data is None:
        return None
    axes = _axes(node, opset)
    has_axes = "axes" in node.attrs if opset < 13 else len(node.input_values) > 1
    if has_axes and axes is None:
        return None
    shape = _reshaped(data.shape, lambda a: np.squeeze(a, axis=None if axes is None
                                                        else tuple(axes)))
    return None if shape is None else _Known(shape, data.items, data.dtype)


def _unsqueeze_rule(node: Node, opset: int, known: dict[int, _Known],
                    dims: Any) -> _Known | None:
    data, axes = _known(node.input_values[0], known), _axes(node, opset)
    if data is None or axes is None:
        return None
    shape = _reshaped(data.shape, lambda a: np.expand_dims(a, tuple(axes)))
    return None if shape is None else _Known(shape, data.items, data.dtype)


def _concat_rule(node: Node, opset: int, known: dict[int, _Known], dims: Any) -> _Known | None:
    parts = [_known(v, known) for v in node.input_values]
    if any(p is None or len(p.shape) != 1 for p in parts) or not parts \
            or len({p.dtype for p in parts}) != 1 or node.attrs["axis"][1] not in (0, -1):
        return None
    items = [item for part in parts for item in part.items]
    return _Known((len(items),), items, parts[0].dtype)


def _cast_rule(node: Node, opset: int, known: dict[int, _Known], dims: Any) -> _Known | None:
    data, target = _known(node.input_values[0], known), _INT_TYPES.get(node.attrs["to"][1])
    if data is None or target is None:
        return None
    return _Known(data.shape, data.items, target)


def _identity_rule(node: Node, opset: int, known: dict[int, _Known],
                   dims: Any) -> _Known | None:
    return _known(node.input_values[0], known)


def _reshape_rule(node: Node, opset: int, known: dict[int, _Known], dims: Any) -> _Known | None:
    data, target = _known(node.input_values[0], known), _const_ints(node.input_values[1])
    if data is None or target is None or 0 in target:
        return None
    shape = _reshaped(data.shape, lambda a: a.reshape(target))
    return None if shape is None else _Known(shape, data.items, data.dtype)


def _arithmetic(op: Any) -> Any:
    def rule(node: Node, opset: int, known: dict[int, _Known], dims: Any) -> _Known | None:
        a, b = _known(node.input_values[0], known), _known(node.input_values[1], known)
        if a is None or b is None or a.dtype != b.dtype:
            return None
        if len(a.items) == 1 and len(b.items) != 1:
            shape, pairs = b.shape, [(a.items[0], item) for item in b.items]
        elif len(b.items) == 1 or a.shape == b.shape:
            shape = a.shape if len(a.shape) >= len(b.shape) else b.shape
            pairs = list(zip(a.items, b.items * len(a.items) if len(b.items) == 1 else b.items))
        else:
            return None
        items = []
        for x, y in pairs:
            if x.value is None or y.value is None or (y.value == 0 and op in _DIVISIONS):
                items.append(_Item(None, False))
            else:
                items.append(_Item(op(x.value, y.value), x.static and y.static))
        return _Known(shape, items, a.dtype)
    return rule


def _truncated_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _floored_mod(a: int, b: int) -> int:
    """ONNX ``Mod`` of integers (``fmod=0``): the sign of the divisor, as Python's ``%``."""
    return a % b


_DIVISIONS = (_truncated_div, _floored_mod)

_SHAPE_RULES = {
    "Shape": _shape_rule, "Gather": _gather_rule, "Slice": _slice_rule,
    "Squeeze": _squeeze_rule, "Unsqueeze": _unsqueeze_rule, "Concat": _concat_rule,
    "Cast": _cast_rule, "Identity": _identity_rule, "Reshape": _reshape_rule,
    "Add": _arithmetic(lambda a, b: a + b), "Sub": _arithmetic(lambda a, b: a - b),
    "Mul": _arithmetic(lambda a, b: a * b), "Div": _arithmetic(_truncated_div),
    "Mod": _arithmetic(_floored_mod),
}


def _constant_target(graph: Graph, node: Node, known: dict[int, _Known],
                     dims: dict[int, tuple[Any, ...]]) -> bool:
    """Give ``Reshape(data, shape)`` a constant ``shape`` when each run-time element is
    the data's own dim at that position (``0`` copies it) but at most one (``-1``)."""
    target = known.get(id(node.input_values[1]))
    if target is None or len(target.shape) != 1 or node.attrs.get("allowzero", ("i", 0))[1]:
        return False
    data = id(node.input_values[0])
    data_dims = dims.get(data, ())
    out: list[int] = []
    inferred = 0
    for position, item in enumerate(target.items):
        if item.static:
            if item.value == -1:
                inferred += 1
            out.append(item.value)
        elif item.origin == (data, position) or (
                item.symbol is not None and position < len(data_dims)
                and data_dims[position] == item.symbol):
            out.append(0)
        else:
            inferred += 1
            out.append(-1)
    if inferred > 1:
        return False
    node.input_values[1] = _ints_value(graph, out)
    return True


def _range_length(node: Node, known: dict[int, _Known]) -> str | None:
    """The symbol of ``Range(0, n, 1)``'s length when ``n`` is a run-time dim."""
    start, limit, delta = (_known(v, known) for v in node.input_values[:3])
    if start is None or limit is None or delta is None or len(limit.items) != 1:
        return None
    first, step, end = start.items[0], delta.items[0], limit.items[0]
    if (first.static, first.value, step.static, step.value) != (True, 0, True, 1) \
            or end.static or end.symbol is None or end.symbol.startswith("unk__"):
        return None  # an unk__ symbol means nothing to the next inference
    return end.symbol


def _keeps_shape(node: Node, dims: dict[int, tuple[Any, ...]]) -> bool:
    """Whether a Reshape to a constant target gives its input's own shape: every target
    element copies (``0``) or equals the input's static dim, but at most one ``-1``."""
    target = _const_ints(node.input_values[1])
    data = dims.get(id(node.input_values[0]))
    if target is None or data is None or len(target) != len(data) \
            or node.attrs.get("allowzero", ("i", 0))[1]:
        return False
    inferred = 0
    for wanted, dim in zip(target, data):
        if wanted == -1:
            inferred += 1
        elif wanted != 0 and wanted != dim:
            return False
    return inferred <= 1


def inferred_dims(graph: Graph, dynamic_axes: Mapping[int, Mapping[int, str]] | None = None,
                  hints: Mapping[int, tuple[Any, ...]] | None = None
                  ) -> dict[int, tuple[Any, ...]]:
    """id(value) -> its dims as ONNX shape inference derives them (an int for a static
    dim, else a symbol or None), for the top-level values it could type.

    One inference over the graph without weight bytes: inputs typed with their dynamic
    axes as symbols (every axis when ``dynamic_axes`` is None), weights as typed inputs
    (initializers of at most ``SHAPE_MAX_ELEMENTS`` elements keep their values).
    Returns {} when inference fails.
    """
    namer = Namer()
    axes: dict[str, dict[int, str]] = {}
    for index, value in enumerate(graph.inputs):
        name = namer.name(value)
        rank = _rank(value) or 0
        if dynamic_axes is None:
            axes[name] = {axis: f"{name}_{axis}" for axis in range(rank)}
        else:
            axes[name] = {axis % rank: label for axis, label in
                          dynamic_axes.get(index, {}).items() if -rank <= axis < rank}
    for value in graph.initializers.values():
        namer.name(value)
    proto = graph_proto(graph, namer, False, False, {}, {})
    for value in graph.inputs:
        proto.input.append(value_info(namer.name(value), value.type(), axes))
    for value in graph.initializers.values():  # small ones with their data: shape operands
        if isinstance(value.const, torch.Tensor) and value.const.numel() <= SHAPE_MAX_ELEMENTS:
            proto.initializer.append(tensor_proto(namer.name(value), value.const))
            continue
        header = tensor_header(namer.name(value), value.const)
        proto.input.append(helper.make_tensor_value_info(
            header.name, header.data_type, list(header.dims)))
    for value in graph.outputs:
        proto.output.append(helper.make_value_info(namer.name(value), onnx.TypeProto()))
    outputs = {id(o): o for n in graph.nodes for o in n.output_values} if hints else {}
    for value_id, hinted in (hints or {}).items():
        name, value = namer.names.get(value_id), outputs.get(value_id)
        if name is not None and value is not None and value.type().dtype() is not None:
            proto.value_info.append(helper.make_tensor_value_info(
                name, onnx_elem_type(value.type().dtype()), list(hinted)))
    model = helper.make_model(proto, opset_imports=[
        helper.make_opsetid(domain, version) for domain, version in graph.opset_imports.items()])
    model.functions.extend(graph.functions)
    model.ir_version = ir_version(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:  # noqa: BLE001 - inference is an optimisation: skip it on any error
        log.debug("shape inference failed, no static shape folding: %s", exc)
        return {}
    by_name = {name: value_id for value_id, name in namer.names.items()}
    dims: dict[int, tuple[Any, ...]] = {}
    for info in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        value_id = by_name.get(info.name)
        tensor = info.type.tensor_type
        if value_id is None or not info.type.HasField("tensor_type") \
                or not tensor.HasField("shape"):
            continue
        dims[value_id] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                               for d in tensor.shape.dim)
    return dims


# -- chains ---------------------------------------------------------------------------
_SAFE_CASTS = {
    torch.bool: {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                 torch.float16, torch.bfloat16, torch.float32, torch.float64},
    torch.uint8: {torch.int16, torch.int32, torch.int64, torch.float16, torch.float32,
                  torch.float64},
    torch.int8: {torch.int16, torch.int32, torch.int64, torch.float16, torch.float32,
                 torch.float64},
    torch.int16: {torch.int32, torch.int64, torch.float32, torch.float64},
    torch.int32: {torch.int64, torch.float64},
    torch.float16: {torch.float32, torch.float64},
    torch.bfloat16: {torch.float32, torch.float64},
    torch.float32: {torch.float64},
}


def collapse_chains(graph: Graph, opset: int) -> int:
    """Rewire the second node of Transpose/Cast/Reshape/Squeeze/Unsqueeze chains to read
    the first one's input (dead first nodes go with dead-code removal); drop no-op casts
    and identity permutations. Returns how many nodes changed."""
    replace: dict[int, Value] = {}
    changed = 0
    for node in graph.nodes:
        passes.rewire(node, replace)
        if node.domain or len(node.output_values) != 1 or not node.input_values \
                or node.input_values[0] is None:
            continue
        rule = _CHAIN_RULES.get(node.op_type)
        result = rule(graph, node, opset) if rule is not None else None
        if isinstance(result, Value):
            _substitute(replace, node.output_values[0], result)
            changed += 1
        elif result:
            changed += 1
    _drop_replaced(graph, replace)
    return changed


def _producer(value: Value, op_type: str) -> Node | None:
    node = value.producer
    if node is None or node.op_type != op_type or node.domain or value.is_const:
        return None
    return node


def _transpose_chain(graph: Graph, node: Node, opset: int) -> Value | bool | None:
    perm = node.attrs.get("perm", (None, None))[1]
    if perm is None:
        return None
    if list(perm) == list(range(len(perm))):
        return node.input_values[0]
    first = _producer(node.input_values[0], "Transpose")
    inner = first.attrs.get("perm", (None, None))[1] if first is not None else None
    if inner is None or len(inner) != len(perm):
        return None
    composed = [inner[p] for p in perm]
    if composed == list(range(len(composed))):
        return first.input_values[0]
    node.input_values[0] = first.input_values[0]
    node.attrs["perm"] = ("is", composed)
    return True


def _cast_chain(graph: Graph, node: Node, opset: int) -> Value | bool | None:
    from oxport.types import JitScalarType

    try:
        target = JitScalarType.from_onnx_type(node.attrs["to"][1]).dtype()
    except Exception:  # noqa: BLE001 - an ONNX type torch has no dtype for: leave it
        return None
    source_type = node.input_values[0].type()
    source = source_type.dtype() if source_type.kind() == "TensorType" else None
    if source == target:
        return node.input_values[0]
    first = _producer(node.input_values[0], "Cast")
    if first is None:
        return None
    origin = first.input_values[0]
    origin_dtype = origin.type().dtype() if origin.type().kind() == "TensorType" else None
    middle = node.input_values[0].type().dtype()
    if origin_dtype is None or middle is None or middle not in _SAFE_CASTS.get(origin_dtype, ()):
        return None
    if origin_dtype == target:
        return origin
    node.input_values[0] = origin
    return True


def _reshape_chain(graph: Graph, node: Node, opset: int) -> Value | bool | None:
    target = _const_ints(node.input_values[1])
    if target is None:
        return None
    rank = _rank(node.input_values[0])
    if (rank, target) in ((0, [1]), (1, [])):
        # A scalar to a 1-element vector and back: Unsqueeze/Squeeze, which shape
        # inference follows through shape arithmetic (and the pairs then cancel).
        node.op_type = "Unsqueeze" if rank == 0 else "Squeeze"
        node.attrs.pop("allowzero", None)
        if opset < 13:
            node.attrs["axes"] = ("is", [0])
            node.input_values = node.input_values[:1]
        else:
            node.input_values[1] = _ints_value(graph, [0])
        return _CHAIN_RULES[node.op_type](graph, node, opset) or True
    first = _producer(node.input_values[0], "Reshape")
    if first is None or (0 in target and not node.attrs.get("allowzero", ("i", 0))[1]):
        return None
    node.input_values[0] = first.input_values[0]
    return True


def _squeeze_chain(graph: Graph, node: Node, opset: int) -> Value | bool | None:
    first = _producer(node.input_values[0], "Unsqueeze")
    axes = _axes(node, opset)
    if first is None or axes is None:
        return None
    inner = _axes(first, opset)
    rank = _rank(node.input_values[0])
    if inner is None or rank is None:
        return None
    if sorted(a % rank for a in axes) == sorted(a % rank for a in inner):
        return first.input_values[0]
    return None


def _unsqueeze_chain(graph: Graph, node: Node, opset: int) -> Value | bool | None:
    axes = _axes(node, opset)
    if axes is None:
        return None
    squeezed = _producer(node.input_values[0], "Squeeze")
    if squeezed is not None:
        inner = _axes(squeezed, opset)
        rank = _rank(squeezed.input_values[0])
        if inner is not None and rank is not None and \
                sorted(a % rank for a in axes) == sorted(a % rank for a in inner):
            return squeezed.input_values[0]
    first = _producer(node.input_values[0], "Unsqueeze")
    inner = _axes(first, opset) if first is not None else None
    rank = _rank(first.input_values[0]) if first is not None else None
    if inner is None or rank is None:
        return None
    final_rank = rank + len(inner) + len(axes)
    outer = sorted(a % final_rank for a in axes)
    kept = [p for p in range(final_rank) if p not in outer]
    middle_rank = rank + len(inner)
    merged = sorted(set(outer) | {kept[a % middle_rank] for a in inner})
    node.input_values[0] = first.input_values[0]
    if opset < 13:
        node.attrs["axes"] = ("is", merged)
    else:
        node.input_values[1] = _ints_value(graph, merged)
    return True


_CHAIN_RULES = {"Transpose": _transpose_chain, "Cast": _cast_chain, "Reshape": _reshape_chain,
                "Squeeze": _squeeze_chain, "Unsqueeze": _unsqueeze_chain}


# -- Identity and common subexpressions -----------------------------------------------
def constants_to_initializers(graph: Graph) -> int:
    """Top-level ``Constant`` nodes become initializers of the same value (what folded
    constants already are; the dynamo exporter's graphs carry no Constant nodes either).
    Returns how many became initializers."""
    replace: dict[int, Value] = {}
    for node in graph.nodes:
        if node.op_type != "Constant" or node.domain or len(node.output_values) != 1 \
                or list(node.attrs) != ["value"] or node.attrs["value"][0] != "t" \
                or not isinstance(node.attrs["value"][1], torch.Tensor):
            continue
        output = node.output_values[0]
        initializer = graph.add_initializer(output.name or "const", node.attrs["value"][1],
                                            output.type())
        _substitute(replace, output, initializer)
    return _drop_replaced(graph, replace)


#: x + 0, x - 0 (integers: a float -0.0 + 0 is +0.0), x * 1, x / 1 are x.
_NEUTRAL = {"Add": (0, True), "Sub": (0, False), "Mul": (1, True), "Div": (1, False)}


def remove_neutral_arithmetic(graph: Graph) -> int:
    """Bypass top-level Add/Sub of zero (integer tensors) and Mul/Div by one whose output
    is the other operand unchanged: same dtype, and the constant broadcasts to nothing
    (a scalar, or all dims 1 with no more dims than the operand). Returns how many."""
    replace: dict[int, Value] = {}
    for node in graph.nodes:
        rule = _NEUTRAL.get(node.op_type)
        if rule is None or node.domain or len(node.input_values) != 2 \
                or len(node.output_values) != 1:
            continue
        neutral, commutes = rule
        sides = [(node.input_values[0], node.input_values[1])]
        if commutes:
            sides.append((node.input_values[1], node.input_values[0]))
        for operand, other in sides:
            const = _const(other)
            if operand is None or const is None or not _keeps(operand, const, neutral):
                continue
            _substitute(replace, node.output_values[0], operand)
            break
    return _drop_replaced(graph, replace)


def _keeps(operand: Value, const: torch.Tensor, neutral: int) -> bool:
    """Whether ``operand (op) const`` is ``operand``: see :func:`remove_neutral_arithmetic`."""
    dtype, shape = operand.type().dtype(), operand.type().shape
    if dtype is None or const.dtype != dtype or const.numel() != 1:
        return False
    if neutral == 0 and (dtype.is_floating_point or dtype.is_complex):
        return False
    if const.dim() and (shape is None or const.dim() > len(shape)):
        return False
    return bool(const.reshape(()).item() == neutral)


def remove_identities(graph: Graph) -> int:
    """Bypass top-level Identity nodes (serialization adds one back where a graph output
    needs its own value). Returns how many were removed."""
    replace: dict[int, Value] = {}
    for node in graph.nodes:
        if node.op_type == "Identity" and not node.domain and node.input_values \
                and node.input_values[0] is not None and len(node.output_values) == 1:
            _substitute(replace, node.output_values[0], node.input_values[0])
    return _drop_replaced(graph, replace)


def eliminate_common_subexpressions(graph: Graph, across_modules: bool = True) -> int:
    """Drop top-level nodes that repeat an earlier node (same deterministic ai.onnx op,
    attributes and inputs; with ``across_modules=False`` also the same module call),
    reusing its outputs. Returns how many were dropped."""
    seen: dict[tuple[Any, ...], Node] = {}
    replace: dict[int, Value] = {}
    kept: list[Node] = []
    for node in graph.nodes:
        passes.rewire(node, replace)
        key = _cse_key(node)
        if key is not None and not across_modules:
            key = (node.calls, *key)
        if key is None:
            kept.append(node)
            continue
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = node
            kept.append(node)
            continue
        for value, kept_value in zip(node.output_values, earlier.output_values):
            _substitute(replace, value, kept_value)
    dropped = len(graph.nodes) - len(kept)
    graph.nodes = kept
    passes.replace_uses(graph, replace)
    return dropped


def _cse_key(node: Node) -> tuple[Any, ...] | None:
    if node.domain or not node.output_values or node.op_type in passes.NONDETERMINISTIC:
        return None
    attrs = []
    for name, (kind, value) in sorted(node.attrs.items()):
        if kind in ("g", "gs"):
            return None
        if kind == "t":
            if not isinstance(value, torch.Tensor) or value.numel() > SHAPE_MAX_ELEMENTS:
                return None
            value = (value.dtype, tuple(value.shape), tuple(tensor_items(value)))
        elif kind == "ts":
            return None
        else:
            value = repr(value)
        attrs.append((name, kind, value))
    return (node.op_type, tuple(attrs), len(node.output_values),
            tuple(id(v) if v is not None else None for v in node.input_values))
