"""What a TorchScript list value is in oxport's graph, and how it becomes ONNX: lists of
tensors as Sequences (opset 11+), lists of numbers as 1-D tensors, packed lists (items
known one by one) built only when used whole, and the lists loops append to.

Shared by the packs that make or read lists (prim, sequence, shape, control flow); it
defines no symbolic.
"""

from __future__ import annotations

from typing import Any

import torch

from oxport import symbolic_helper as sh
from oxport.errors import OnnxExporterError
from oxport.ir import Graph, Node, Type, Value
from oxport.passes import infer
from oxport.types import JitScalarType

#: ONNX Sequences arrived in opset 11.
SEQUENCE_OPSET = 11
_NUMBER_DTYPES = {"IntType": torch.int64, "FloatType": torch.float32, "BoolType": torch.bool}
#: The item kinds of lists of numbers (1-D tensors in ONNX).
NUMBER_KINDS = tuple(_NUMBER_DTYPES)


# -- what a list value is ----------------------------------------------------------------
def elem_kind(ts_value: Any) -> str:
    """The TorchScript element kind of a list value (``TensorType``, ``IntType``...)."""
    t = ts_value.type()
    return t.getElementType().kind() if t.kind() == "ListType" else ""


def number_dtype(kind: str) -> torch.dtype:
    return _NUMBER_DTYPES.get(kind, torch.int64)


def sequence_type(dtype: torch.dtype | None, shape: Any = None) -> Type:
    """The type of a Sequence of tensors of ``dtype`` (of ``shape``'s rank, when known)."""
    return Type("ListType", elem=Type.tensor(dtype, None if shape is None else
                                             [None] * len(shape)))


def item_shape(t: Type) -> Any:
    """The shape a Sequence type gives its items (only their rank is kept), or None."""
    elem = element_type(t) if t.kind() == "ListType" else None
    return elem.shape if elem is not None else None


def common_rank_shape(shapes: list[Any]) -> list[None] | None:
    """The shape of unknown dims of the rank ``shapes`` share (unknown ones aside)."""
    ranks = {len(s) for s in shapes if s is not None}
    return [None] * ranks.pop() if len(ranks) == 1 else None


def grown_type(seq: Value, item: Value) -> Type:
    """The type of the Sequence ``seq`` with ``item`` inserted."""
    dtype = item.type().dtype() or elem_dtype(seq)
    return sequence_type(dtype, common_rank_shape([item_shape(seq.type()), item.type().shape]))


def element_type(t: Type) -> Type | None:
    """The element type of a list, tuple or optional type, when it has one."""
    try:
        return t.getElementType()
    except RuntimeError:  # not a container, or one of unknown items
        return None


def elem_dtype(value: Value) -> torch.dtype | None:
    """The dtype of a tensor list's items, when known."""
    if sh._is_packed_list(value):
        return next((i.type().dtype() for i in sh._unpack_list(value) if i.type().dtype()), None)
    t = value.type()
    elem = element_type(t) if t.kind() in ("ListType", "TupleType") else None
    return elem.dtype() if elem is not None else None


def item_type(seq: Value) -> Type:
    """The type of a Sequence's items (their rank when the Sequence's type knows it)."""
    elem = element_type(seq.type()) if seq.type().kind() == "ListType" else None
    if elem is not None and elem.kind() == "TensorType":
        return Type.tensor(elem.dtype(), elem.shape)
    return Type.tensor(elem_dtype(seq))


def require_sequences(g: Any, op: str) -> None:
    """Decline below opset 11 (no ONNX Sequences there), naming the opset needed."""
    if g.opset < SEQUENCE_OPSET:
        sh._onnx_opset_unsupported_detailed(
            op, g.opset, SEQUENCE_OPSET, "a list of tensors that changes at run time needs "
            "ONNX Sequences")


def packed_list(g: Any, items: list[Value], list_type: Type) -> Value:
    """A list known item by item; it becomes a Sequence or a 1-D tensor only when used whole."""
    kind = list_type.getElementType().kind() if list_type.kind() == "ListType" else ""
    const = [i.const for i in items] if all(i.is_const for i in items) else None

    def materialize(graph: Graph) -> Value:
        ctx = g.on(graph)
        if kind == "TensorType":
            return construct_sequence(ctx, items, None, "a list of tensors")
        return number_tensor(ctx, items, kind)

    if const is None:
        result = g.graph.deferred(list_type, materialize)
    else:
        result = g.graph.deferred(list_type, materialize, const=const)
    result.producer = Node("prim", "ListConstruct", list(items), [result])
    return result


def number_tensor(g: Any, items: list[Value], kind: str) -> Value:
    """A list of numbers as a 1-D tensor."""
    dtype = number_dtype(kind)
    if all(i.is_const for i in items):
        return g.constant(torch.tensor([sh.constant_item(i) for i in items], dtype=dtype))
    parts = [sh._unsqueeze_helper(g, sh.cast_to(g, i, dtype), [0]) for i in items]
    out = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis_i=0)
    return out.setType(Type.tensor(dtype, [len(items)]))


def as_sequence(g: Any, value: Value, dtype: torch.dtype | None = None,
                op: str = "a list of tensors") -> Value:
    """An ONNX Sequence holding a list of tensors. A packed list becomes one where it was
    built (once); ``dtype`` types an empty one."""
    if value.meta and "stacked" in value.meta:
        return value.graph.materialize(value)
    if value.is_const and isinstance(value.const, (list, tuple)):  # ([] after freezing)
        return construct_sequence(g, [g.constant(t) for t in value.const], dtype, op)
    if not sh._is_packed_list(value):
        if dtype is not None and elem_dtype(value) is None:
            value.setType(sequence_type(dtype))  # a loop's list: what other paths show
        return value
    require_sequences(g, op)
    items = sh._unpack_list(value)
    if items and value.is_deferred:
        real = value.graph.materialize(value)
        if elem_dtype(real) is None:
            real.setType(sequence_type(sh.result_dtype(*items)))
        return real
    return construct_sequence(g, items, dtype or elem_dtype(value), op)


def construct_sequence(g: Any, items: list[Value], dtype: torch.dtype | None, op: str) -> Value:
    require_sequences(g, op)
    if not items:
        if dtype is None:
            raise OnnxExporterError(
                f"{op}: the dtype of an empty list of tensors is unknown here; append to it "
                "before using it, or build it with at least one tensor.")
        return g.op("SequenceEmpty", dtype_i=JitScalarType.from_dtype(dtype).onnx_type()
                    ).setType(sequence_type(dtype))
    for item in items:  # (a Sequence's type needs its items' dtype: a graph output's does)
        infer.infer_value(item, g.opset)
    common = sh.result_dtype(*items)
    items = [sh.cast_to(g, i, common) for i in items] if common is not None else items
    shapes = [i.type().shape for i in items]
    shape = common_rank_shape(shapes) if None not in shapes else None
    return g.op("SequenceConstruct", *items).setType(sequence_type(common, shape))


def as_number_tensor(g: Any, value: Value, kind: str) -> Value:
    """A list of numbers as a 1-D tensor (it may already be one)."""
    if sh._is_packed_list(value):
        return number_tensor(g, sh._unpack_list(value), kind)
    if value.is_const:
        return g.constant(torch.tensor(value.const, dtype=number_dtype(kind)))
    return value


# -- scan accumulators (lists appended to once per loop iteration) -----------------------
def scan_accumulator(graph: Graph, list_type: Type) -> Value:
    """A stand-in for a loop's list that each iteration appends exactly one tensor to."""
    marker = Value(graph, graph.fresh_name("scan"), list_type)
    marker.meta = {"scan_accumulator": True}
    return marker


def scanned_item(value: Value) -> Value | None:
    """The tensor appended to a scan accumulator in this iteration, if any."""
    return value.meta.get("scan_item") if value.meta else None


def stacked_list(g: Any, stacked: Value, list_type: Type) -> Value:
    """The list whose items are the rows of ``stacked`` (a loop's scan output)."""
    def materialize(graph: Graph) -> Value:
        ctx = g.on(graph)
        require_sequences(ctx, "a list appended to in a loop")
        shape = stacked.type().shape
        return ctx.op("SplitToSequence", stacked, axis_i=0, keepdims_i=0).setType(
            sequence_type(stacked.type().dtype(), shape[1:] if shape else None))

    result = g.graph.deferred(list_type, materialize)
    result.meta = {"stacked": stacked}
    return result
