"""Core graph passes: dead-code removal and constant folding; and the helpers every pass
shares (who consumes a value, rewiring uses, making a value an initializer, opset-dependent
axes)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from oxport.ir import Graph, Node, Type, Value
from oxport.serialize.weights import LazyTensor

log = logging.getLogger("oxport.passes.folding")

#: Ops whose result is not a function of their inputs.
NONDETERMINISTIC = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}
#: Ops never folded: a DequantizeLinear of a constant keeps a quantized weight stored as
#: integers (folding would store it as float).
_KEEP = {"DequantizeLinear"}
#: Fold a node only when its inputs hold at most this many elements in all (ops whose
#: result is a view of their input, such as Transpose, fold at any size: no bytes move).
FOLD_MAX_ELEMENTS = 1 << 24
_VIEWS = {"Shape", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Slice"}
#: A result this large is not folded while one of its inputs stays in use by a node that
#: is no repeat of it (the tied embedding and output layer of a language model): that
#: would store the weight twice.
DUPLICATE_MIN_ELEMENTS = 1024
#: ... and through ``onnx.reference`` (ops without a numpy fast path) at most this many.
REFERENCE_MAX_ELEMENTS = 1 << 12


def eliminate_dead_code(graph: Graph) -> int:
    """Remove nodes whose outputs nothing uses; returns how many were removed."""
    used: set[int] = {id(v) for v in graph.outputs}
    kept: list[Node] = []
    removed = 0
    for node in reversed(graph.nodes):
        if any(id(v) in used for v in node.output_values) or not node.output_values:
            kept.append(node)
            used.update(id(v) for v in node.input_values if v is not None)
            for subgraph in _subgraphs(node):
                removed += eliminate_dead_code(subgraph)
                _mark_subgraph_uses(subgraph, used)
        else:
            removed += 1
    kept.reverse()
    graph.nodes = kept
    if graph.parent is None:
        for name in [n for n, v in graph.initializers.items() if id(v) not in used]:
            del graph.initializers[name]
    return removed


def drop_unused_inputs(graph: Graph, readers: Mapping[int, set[int]] | None = None
                       ) -> list[int]:
    """Remove the user inputs nothing reads, as torch.onnx does (an input the outputs do
    not depend on, or whose value the trace baked in); returns their former positions.

    ``readers`` (:func:`input_readers` before folding) keeps an input whose reading was
    folded away while the source op that read it still computes something at run time:
    torch.onnx folds the nodes of one source op only all together, when the op's result
    is a constant, so ``x.view_as(y)`` keeps ``y`` though only its static shape is read.
    An input the front end marks ``kept`` (its ``meta``) stays too."""
    used: set[int] = {id(v) for v in graph.outputs}
    used.update(id(v) for v in graph.inputs if (v.meta or {}).get("kept"))
    _mark_subgraph_uses(graph, used)
    if readers:
        live = live_steps(graph)
        used.update(key for key, steps in readers.items() if steps & live)
    dropped = [i for i, v in enumerate(graph.inputs) if id(v) not in used]
    graph.inputs = [v for v in graph.inputs if id(v) in used]
    return dropped


def input_readers(graph: Graph) -> dict[int, set[int]]:
    """Graph input id -> the steps (source ops) of the nodes that read it."""
    inputs = {id(v) for v in graph.inputs}
    readers: dict[int, set[int]] = {}
    for node in _all_nodes(graph):
        for value in node.input_values:
            if value is not None and id(value) in inputs and node.step is not None:
                readers.setdefault(id(value), set()).add(node.step)
    return readers


def live_steps(graph: Graph) -> set[int]:
    """The steps (source ops) some node of the graph still comes from."""
    return {node.step for node in _all_nodes(graph) if node.step is not None}


def _all_nodes(graph: Graph) -> list[Node]:
    """The graph's nodes and those of its subgraphs."""
    nodes = []
    for node in graph.nodes:
        nodes.append(node)
        for subgraph in _subgraphs(node):
            nodes.extend(_all_nodes(subgraph))
    return nodes


def _mark_subgraph_uses(graph: Graph, used: set[int]) -> None:
    for node in graph.walk():
        used.update(id(v) for v in node.input_values if v is not None)
    for node in graph.walk():
        for subgraph in _subgraphs(node):
            used.update(id(v) for v in subgraph.outputs)


def _subgraphs(node: Node) -> list[Graph]:
    """The graphs ``node``'s attributes hold (an If's branches, a Loop's body)."""
    subgraphs: list[Graph] = []
    for kind, value in node.attrs.values():
        subgraphs.extend(value if kind == "gs" else [value] if kind == "g" else [])
    return subgraphs


# -- shared by the passes ---------------------------------------------------------------
def consumers(graph: Graph) -> dict[int, list[Node | None]]:
    """id(value) -> the nodes that use it (subgraphs included); None for a graph output."""
    users: dict[int, list[Node | None]] = {}
    for node in graph.walk():
        for value in node.input_values:
            if value is not None:
                users.setdefault(id(value), []).append(node)
    for value in graph.outputs:
        users.setdefault(id(value), []).append(None)
    return users


def rewire(node: Node, replace: Mapping[int, Value]) -> None:
    """Point ``node``'s inputs that ``replace`` (id of a value -> its replacement) lists at
    their replacements."""
    if replace:
        node.input_values = [v if v is None else replace.get(id(v), v)
                             for v in node.input_values]


def replace_uses(graph: Graph, replace: Mapping[int, Value]) -> None:
    """Point every use of a replaced value (subgraphs and graph outputs too) at its
    replacement, following chains of replacements."""
    if not replace:
        return

    def final(value: Value | None) -> Value | None:
        while value is not None and id(value) in replace:
            value = replace[id(value)]
        return value

    for node in graph.walk():
        node.input_values = [final(v) for v in node.input_values]
        for subgraph in _subgraphs(node):
            subgraph.outputs = [final(v) for v in subgraph.outputs]
    graph.outputs = [final(v) for v in graph.outputs]


def make_initializer(graph: Graph, value: Value, tensor: torch.Tensor) -> None:
    """Make ``value`` (a node's output) an initializer holding ``tensor``, under a fresh
    name; its node no longer produces it."""
    value.const = tensor
    value.setType(Type.tensor(tensor.dtype, tuple(tensor.shape))
                  if isinstance(tensor, LazyTensor) else Type.of(tensor))
    value.producer = None
    value.name = graph.fresh_name("folded")
    graph.initializers[value.name] = value


def opset_axes(attribute: Sequence[int] | None, inputs: Sequence[Any], opset: int,
               since: int, ints: Callable[[Any], list[int] | None]) -> list[int] | None:
    """A node's ``axes``: the ``attribute`` before opset ``since``, its input 1 from it
    (read with ``ints``, e.g. from a constant); None when absent."""
    if opset < since:
        return list(attribute) if attribute is not None else None
    return ints(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None


def fold_constants(graph: Graph, opset: int, frozen: set[int] | None = None) -> int:
    """Replace ai.onnx nodes whose inputs are all constants by their result.

    The common shape and arithmetic ops are computed with numpy directly; any other op
    goes through ``onnx.reference`` (slow per node), and only when its inputs are small
    (``REFERENCE_MAX_ELEMENTS``). One pass in node order, so chains fold completely.
    ``frozen`` holds ids of values (e.g. parameters kept as inputs) never folded.
    Returns how many nodes were folded.
    """
    frozen = frozen or set()
    folded = 0
    kept: list[Node] = []
    #: (op, attributes, input ids) -> outputs already folded: a repeat (e.g. the Transpose of
    #: a weight shared by two layers) reuses them instead of storing the result twice.
    done: dict[tuple[Any, ...], Node] = {}  # holds the node, so the ids in keys stay unique
    replace: dict[int, Value] = {}
    users = consumers(graph)
    for node in graph.nodes:
        rewire(node, replace)
        inputs = node.input_values
        if (node.domain or node.op_type in NONDETERMINISTIC or node.op_type in _KEEP
                or _fills_no_dims(node)
                or not node.output_values
                or node.op_type == "Constant"
                or any(kind in ("g", "gs") for kind, _ in node.attrs.values())
                or not all(_foldable(v, frozen) for v in inputs if v is not None)):
            kept.append(node)
            continue
        key = _fold_key(node)
        if key in done:
            for value, prev in zip(node.output_values, done[key].output_values):
                replace[id(value)] = prev
                users.setdefault(id(prev), []).extend(users.get(id(value), ()))
            folded += 1
            continue
        size = sum(_numel(v.const) for v in inputs if v is not None)
        lazy = any(isinstance(v.const, LazyTensor) for v in inputs if v is not None)
        with np.errstate(all="ignore"):  # log(0), 0/0, Cast(inf): ONNX Runtime's values too
            results = ((_fold_lazy if lazy else _fold_numpy)(node, opset)
                       if size <= FOLD_MAX_ELEMENTS or node.op_type in _VIEWS else None)
            if results is None and size <= REFERENCE_MAX_ELEMENTS and not lazy:
                results = _fold_reference(node, opset)
        if results is None or len(results) != len(node.output_values) \
                or any(isinstance(r, list) for r in results) \
                or _duplicates(node, key, results, users):  # (a Sequence: no initializer)
            kept.append(node)
            continue
        for value, result in zip(node.output_values, results):
            make_initializer(graph, value, _as_tensor(result))
        done[key] = node
        folded += 1
    graph.nodes = kept
    replace_uses(graph, replace)  # subgraphs may use the replaced values too
    return folded


def _fills_no_dims(node: Node) -> bool:
    """A ConstantOfShape of an empty shape (a 0-d fill): torch.onnx leaves it unfolded, so
    ``full_like(x, v)`` of a 0-d ``x`` keeps reading ``x`` (and ``x`` stays an input)."""
    shape = node.input_values[0] if node.op_type == "ConstantOfShape" and not node.domain \
        and node.input_values else None
    return shape is not None and shape.is_const and _numel(shape.const) == 0


def _duplicates(node: Node, key: tuple[Any, ...], results: list[Any],
                users: dict[int, list[Node | None]]) -> bool:
    """Whether folding ``node`` would store a large constant next to the input it was
    computed from, because that input has a use besides ``node`` and its exact repeats."""
    if sum(_numel(r) for r in results) < DUPLICATE_MIN_ELEMENTS:
        return False
    for value in node.input_values:
        if value is None or _numel(value.const) < DUPLICATE_MIN_ELEMENTS:
            continue
        for other in users.get(id(value), ()):
            if other is not node and (other is None or other.domain or (
                    other.op_type != "Shape" and _fold_key(other) != key)):
                return True
    return False


def _as_tensor(result: Any) -> torch.Tensor:
    """A folded result as a tensor, sharing memory with it when numpy made a view (a
    transposed weight is copied only when it is written)."""
    if isinstance(result, LazyTensor):
        return result
    array = np.asarray(result)
    if not array.ndim or min(array.strides) < 0 or not array.flags.writeable:
        array = array.copy()  # torch takes no negative strides nor read-only arrays
    if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16, which torch does not read
        return torch.from_numpy(np.ascontiguousarray(array).view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _fold_key(node: Node) -> tuple[Any, ...]:
    attrs = tuple(sorted((name, kind, id(value) if kind in ("t", "ts") else repr(value))
                         for name, (kind, value) in node.attrs.items()))
    return node.op_type, attrs, tuple(id(v) if v is not None else None for v in node.input_values)


def _fold_reference(node: Node, opset: int) -> list[Any] | None:
    """Run one node with ``onnx.reference`` (any op, but milliseconds per call)."""
    from onnx.reference import ReferenceEvaluator  # slow to import: only when needed

    from oxport.serialize import tensor_proto

    names = [f"i{i}" if v is not None else "" for i, v in enumerate(node.input_values)]
    outs = [f"o{i}" for i in range(len(node.output_values))]
    proto = helper.make_node(node.op_type, names, outs)
    for name, (kind, value) in node.attrs.items():
        if kind == "t":
            proto.attribute.append(helper.make_attribute(name, tensor_proto("", value)))
        else:
            proto.attribute.append(helper.make_attribute(name, value))
    feeds = {n: _to_numpy(v.const) for n, v in zip(names, node.input_values) if v is not None}
    # A one-node model, so the evaluator picks the operator version of ``opset``.
    graph = helper.make_graph(
        [proto], "fold",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in feeds.items()],
        [helper.make_value_info(o, onnx.TypeProto()) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        return list(ReferenceEvaluator(model).run(None, feeds))
    except Exception as exc:  # noqa: BLE001 - the reference runtime lacks some ops: keep the node
        log.debug("not folding %s: %s", node.op_type, exc)
        return None


# -- the numpy fast path ------------------------------------------------------------
class _Unfoldable(Exception):
    """These inputs are outside what the fast path handles; the node is left to others."""


def _fold_numpy(node: Node, opset: int) -> list[np.ndarray] | None:
    fold = _NUMPY_FOLDERS.get(node.op_type)
    if fold is None:
        return None
    arrays = [None if v is None else _to_numpy(v.const) for v in node.input_values]
    attrs = {name: value for name, (_kind, value) in node.attrs.items()}
    try:
        return [fold(arrays, attrs, opset)]
    except _Unfoldable:
        return None


def _fold_lazy(node: Node, opset: int) -> list[Any] | None:
    """Fold a node reading a weight computed when written (a
    :class:`~oxport.serialize.weights.LazyTensor`): the weight records the fold, to apply
    it to its bytes as they are written (``LazyTensor.fold``; None: the node stays)."""
    fold = _NUMPY_FOLDERS.get(node.op_type)
    consts = [None if v is None else v.const for v in node.input_values]
    lazy = next(c for c in consts if isinstance(c, LazyTensor))
    attrs = {name: value for name, (_kind, value) in node.attrs.items()}
    result = None if fold is None else lazy.fold(node.op_type, fold, consts, attrs, opset)
    return None if result is None else [result]


def _axes(arrays: list[Any], attrs: dict[str, Any], opset: int) -> list[int] | None:
    """Squeeze's and Unsqueeze's axes (an input from opset 13)."""
    return opset_axes(attrs.get("axes"), arrays, opset, 13,
                      lambda array: [int(a) for a in array.reshape(-1)])


def _shape(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    dims = arrays[0].shape[attrs.get("start", 0):attrs.get("end", None)]
    return np.array(dims, dtype=np.int64)


def _gather(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    data, indices = arrays
    if indices.dtype not in (np.int32, np.int64):
        raise _Unfoldable
    return np.take(data, indices, axis=attrs.get("axis", 0))


def _unsqueeze(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    axes = _axes(arrays, attrs, opset)
    if axes is None:
        raise _Unfoldable
    return np.expand_dims(arrays[0], tuple(axes))


def _squeeze(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    axes = _axes(arrays, attrs, opset)
    return np.squeeze(arrays[0], axis=None if axes is None else tuple(axes))


def _concat(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    if any(a is None for a in arrays) or len({a.dtype for a in arrays}) != 1:
        raise _Unfoldable
    return np.concatenate(arrays, axis=attrs["axis"])


def _cast(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    target = attrs["to"]
    if target not in _NUMPY_CASTS or arrays[0].dtype.kind not in "biuf":
        raise _Unfoldable
    return arrays[0].astype(helper.tensor_dtype_to_np_dtype(target))


def _slice(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    data = arrays[0]
    if opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = arrays[1].tolist(), arrays[2].tolist()
        axes = arrays[3].tolist() if len(arrays) > 3 and arrays[3] is not None else None
        steps = arrays[4].tolist() if len(arrays) > 4 and arrays[4] is not None else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if 0 in steps:
        raise _Unfoldable
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(start, end, step)  # Python slicing clamps exactly as ONNX does
    return data[tuple(index)]


def _reshape(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    data, shape = arrays[0], [int(d) for d in arrays[1].reshape(-1)]
    if not attrs.get("allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return data.reshape(shape)


def _transpose(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    return np.transpose(arrays[0], attrs.get("perm"))


def _binary(fn: Any, kinds: str = "iuf"):
    """Fold a two-input op on same-dtype arrays whose numpy kind is in ``kinds``."""
    def fold(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
        a, b = arrays
        if a.dtype != b.dtype or a.dtype.kind not in kinds:
            raise _Unfoldable
        return fn(a, b)
    return fold


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX Div: true division for floats, truncation toward zero for integers."""
    if a.dtype.kind == "f":
        return np.divide(a, b)
    if not np.all(b):
        raise _Unfoldable
    quotient = np.floor_divide(a, b)
    inexact = (a - quotient * b) != 0
    return quotient + (inexact & ((a < 0) != (b < 0))).astype(a.dtype)


def _logical(fn: Any):
    def fold(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
        if any(a.dtype != np.bool_ for a in arrays):
            raise _Unfoldable
        return fn(*arrays)
    return fold


def _expand(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    """ONNX Expand: both shapes broadcast. Only for inputs as small as onnx.reference
    would take (a constant broadcast large is stored whole)."""
    data, shape = arrays
    if data.size + shape.size > REFERENCE_MAX_ELEMENTS:
        raise _Unfoldable
    try:
        target = np.broadcast_shapes(data.shape, tuple(int(d) for d in shape.reshape(-1)))
    except ValueError:
        raise _Unfoldable from None
    return np.broadcast_to(data, target)


def _constant_of_shape(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    value = attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else (
        _to_numpy(value).reshape(-1) if isinstance(value, torch.Tensor) else None)
    shape = [int(d) for d in arrays[0].reshape(-1)]
    if fill is None or fill.size != 1 or any(d < 0 for d in shape):
        raise _Unfoldable
    return np.full(shape, fill[0], dtype=fill.dtype)


_NUMPY_CASTS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8,
                TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
                TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL}
_NUMPY_FOLDERS = {
    "Shape": _shape, "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Concat": _concat, "Cast": _cast, "Slice": _slice, "Reshape": _reshape,
    "Transpose": _transpose, "Identity": lambda arrays, attrs, opset: arrays[0],
    "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Div": _binary(_divide),
    "Equal": _binary(np.equal, "biuf"), "Less": _binary(np.less, "biuf"),
    "Greater": _binary(np.greater, "biuf"), "LessOrEqual": _binary(np.less_equal, "biuf"),
    "GreaterOrEqual": _binary(np.greater_equal, "biuf"),
    "Not": _logical(np.logical_not), "And": _logical(np.logical_and),
    "Or": _logical(np.logical_or), "Xor": _logical(np.logical_xor),
    "ConstantOfShape": _constant_of_shape, "Expand": _expand,
}


def _foldable(value: Value, frozen: set[int]) -> bool:
    return (value.is_const and id(value) not in frozen
            and isinstance(value.const, (torch.Tensor, np.ndarray, LazyTensor))
            and getattr(value.const, "dtype", None) != torch.bfloat16)


def _numel(obj: Any) -> int:
    return int(obj.numel()) if isinstance(obj, (torch.Tensor, LazyTensor)) \
        else int(np.size(obj))


def _to_numpy(obj: Any) -> np.ndarray:
    if isinstance(obj, torch.Tensor):
        if obj.dtype == torch.bfloat16:
            return obj.float().numpy()
        return obj.detach().cpu().numpy()
    return np.asarray(obj)

