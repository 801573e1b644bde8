"""Control flow: ``prim::If`` and ``prim::Loop`` as ONNX ``If`` and ``Loop``.

Each TorchScript block becomes a subgraph through ``g.subgraph()`` and
``g.convert_block()``; values from outside a block are read directly (ONNX
subgraphs see their enclosing scope). The front end has already made every
value a block mutates an explicit block output (loop-carried for loops).

ONNX ``Loop`` takes (max trip count, condition, carried...) and its body
(iteration number, condition, carried...) returns (condition, carried...,
scan outputs...). A for-loop has a trip count and a constant true condition; a
while-loop has no trip count. A list of tensors that a loop body appends to once
per iteration becomes a scan output (so it needs no Sequence op and works at
opset 11); other lists of tensors are carried as Sequences (opset 13). A variable
that is None on some path (``h: Optional[Tensor] = None`` before a loop) is an
ONNX Optional (opset 16): ``h is None`` reads OptionalHasElement and the
refinement to a tensor OptionalGetElement.
"""

from __future__ import annotations

from typing import Any

import torch
from onnx import helper

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.errors import OnnxExporterError
from oxport.ir import Type, Value
from oxport.opsets import lists
from oxport.types import JitScalarType

pack = OpPack("oxport.control_flow", cases="oxport.opsets.cases.control_flow")

_INT64_MAX = 2**63 - 1
#: ONNX If and Loop accept Sequence values from opset 13.
SEQUENCE_CONTROL_FLOW_OPSET = 13
#: ONNX If and Loop accept Optional values from opset 16 (Optional itself is from 15).
OPTIONAL_OPSET = 16


# -- helpers a pack writing its own control flow can reuse -----------------------------
def to_condition(g: Any, value: Value) -> Value:
    """A 0-d bool tensor for a TorchScript condition (bool, int or one-element tensor)."""
    const = _const_bool(value)
    if const is not None:
        return g.constant(torch.tensor(const))
    out = sh.cast_to(g, value, torch.bool)
    if out.type().dim() != 0:
        out = sh._reshape_helper(g, out, [])
    return out.setType(Type.tensor(torch.bool, ()))


def _const_bool(value: Value) -> bool | None:
    const = sh._scalar(value)
    return None if const is None else bool(const)


def _list_item_kind(g: Any, ts_type: Any, op: str) -> str:
    """The item kind of a list passed through If/Loop: tensors or numbers (a list of lists
    has no ONNX form here)."""
    kind = ts_type.getElementType().kind()
    if kind not in ("TensorType", *lists.NUMBER_KINDS):
        raise OnnxExporterError(
            f"{op} at {g.source or 'unknown'} passes a list of {ts_type.getElementType()} "
            "through its block; ONNX Sequences there hold tensors only (at every opset). "
            "Keep a list of tensors (e.g. torch.stack each inner list before appending it).")
    return kind


def optional_type(dtype: torch.dtype | None, shape: Any = None) -> Type:
    """The type of an ONNX Optional holding a tensor of ``dtype`` (and ``shape``)."""
    return Type("OptionalType", elem=Type.tensor(dtype, shape))


def _held_shape(t: Type) -> Any:
    elem = lists.element_type(t) if t.kind() == "OptionalType" else t
    return elem.shape if elem is not None else None


def is_runtime_optional(value: Value) -> bool:
    """Whether ``value`` is an ONNX Optional (a variable None on some paths only)."""
    return value.type().kind() == "OptionalType" and not value.is_const


def may_be_none(value: Value) -> bool:
    """Whether ``value`` is None, or an Optional that may be empty at run time."""
    return sh._is_none(value) or is_runtime_optional(value)


def as_optional(g: Any, value: Value, dtype: torch.dtype | None, op: str) -> Value:
    """``value`` as an ONNX Optional: empty for None, wrapping a tensor otherwise; ``dtype``
    types an empty one."""
    if is_runtime_optional(value):
        return g.graph.materialize(value)
    if g.opset < OPTIONAL_OPSET:
        sh._onnx_opset_unsupported_detailed(
            op, g.opset, OPTIONAL_OPSET, "a variable that is None on some paths (e.g. "
            "`h = None` before a loop) needs ONNX Optional")
    if not sh._is_none(value):
        value = g.graph.materialize(value)
        return g.op("Optional", value).setType(optional_type(value.type().dtype(),
                                                             value.type().shape))
    if dtype is None:
        raise OnnxExporterError(
            f"{op}: the dtype of a variable that is None on some paths is unknown here; "
            "annotate it (`h: Optional[Tensor] = None`) and give it a tensor on another path.")
    empty = helper.make_tensor_type_proto(JitScalarType.from_dtype(dtype).onnx_type(), None)
    return g.op("Optional", type_tp=empty).setType(optional_type(dtype))


def runtime_value(g: Any, value: Value, ts_type: Any, dtype: torch.dtype | None = None,
                  op: str = "prim::If", optional: bool = False) -> Value:
    """What a TorchScript value is at run time in ONNX: a Sequence for a list of tensors,
    a 1-D tensor for a list of numbers, an Optional where ``optional`` says it may be None
    (``dtype`` types empty lists and Optionals), the materialized value otherwise."""
    if optional:
        return as_optional(g, value, dtype, op)
    if ts_type.kind() == "ListType":
        kind = _list_item_kind(g, ts_type, op)
        if kind == "TensorType":
            if g.opset < SEQUENCE_CONTROL_FLOW_OPSET:
                sh._onnx_opset_unsupported_detailed(
                    op, g.opset, SEQUENCE_CONTROL_FLOW_OPSET,
                    "a list of tensors passed through If/Loop needs Sequence support in If "
                    "and Loop")
            return lists.as_sequence(g, value, dtype, op)
        return g.graph.materialize(lists.as_number_tensor(g, value, kind))
    if value.is_const and value.const is None:
        raise OnnxExporterError(
            f"{op} passes None into or out of its block (a variable that is None on some "
            "path, e.g. `h = None` before a loop) where its type says it is never None. "
            "Annotate it as Optional[Tensor], or give it a tensor value before the loop or "
            "branch.")
    return g.graph.materialize(value)


def mark_uninitialized(value: Value) -> Value:
    """Mark ``value`` as the stand-in for a variable a path leaves unset."""
    value.meta = {**(value.meta or {}), "uninitialized": True}
    return value


def is_uninitialized(value: Value) -> bool:
    """Whether ``value`` stands for a variable a path leaves unset (``prim::Uninitialized``)."""
    return bool(value.meta and value.meta.get("uninitialized"))


def placeholder(g: Any, t: Type) -> Value:
    """A value of type ``t`` for a path that leaves a variable unset (it returns early or
    raises) and never reads it: zeros (unknown sizes 1), an empty Sequence or Optional."""
    dtype = held_dtype(t)
    if dtype is None:
        raise OnnxExporterError(
            "A variable that one path leaves unset (an early `return` or a `raise`) has a "
            "dtype unknown on the other path; give it a tensor before the branch.")
    onnx_dtype = JitScalarType.from_dtype(dtype).onnx_type()
    if t.kind() == "ListType":
        return g.op("SequenceEmpty", dtype_i=onnx_dtype).setType(lists.sequence_type(dtype))
    if t.kind() == "OptionalType":
        shape = _held_shape(t)
        empty = helper.make_tensor_type_proto(onnx_dtype, shape)
        return g.op("Optional", type_tp=empty).setType(optional_type(dtype, shape))
    shape = [d if isinstance(d, int) else 1 for d in (t.shape or ())]
    return g.op("Identity", g.constant(torch.zeros(shape, dtype=dtype))).setType(
        Type.tensor(dtype, shape))


def finish_subgraph(sub: Any, outputs: list[Value]) -> list[Value]:
    """Make ``outputs`` the subgraph's outputs; each one is produced inside it (an
    Identity stands in for an outer value, an input, or a repeated value)."""
    graph = sub.graph
    seen: set[int] = set()
    final = []
    for value in outputs:
        value = graph.materialize(value)
        if value.graph is not graph or value.producer is None or id(value) in seen:
            value = _copy(sub, value)
        seen.add(id(value))
        final.append(value)
    graph.outputs = final
    return final


def _copy(g: Any, value: Value) -> Value:
    """A new value equal to ``value`` (Identity takes Sequences from opset 14 only)."""
    if value.type().kind() != "ListType" or g.opset >= 14:
        return g.op("Identity", value).setType(value.type())
    dtype = held_dtype(value.type())
    if dtype is None:
        raise OnnxExporterError("Internal error: a Sequence of unknown dtype leaves a block.")
    grown = g.op("SequenceInsert", value, g.constant(torch.zeros((), dtype=dtype)))
    return g.op("SequenceErase", grown).setType(value.type())


def merge_types(types: list[Type], where: str) -> Type:
    """One type for values that meet (the branches of an If): dtypes must agree; dims that
    differ become unknown."""
    dtypes = {d for d in map(held_dtype, types) if d is not None}
    if len(dtypes) > 1:
        names = " vs ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        raise OnnxExporterError(
            f"{where} has different dtypes on different paths ({names}); ONNX needs one. "
            "Cast the value to one dtype on every path.")
    dtype = dtypes.pop() if dtypes else None
    first = types[0]
    if first.kind() == "ListType":  # (an empty one's unknown items say nothing)
        return lists.sequence_type(dtype, lists.common_rank_shape(
            [lists.item_shape(t) for t in types]))
    if first.kind() == "OptionalType":  # (an empty one's unknown shape says nothing)
        known = [shape for shape in map(_held_shape, types) if shape is not None]
        return optional_type(dtype, _merged_shape(known) if known else None)
    return Type.tensor(dtype, _merged_shape([t.shape for t in types]))


def _merged_shape(shapes: list[Any]) -> list[Any] | None:
    """One shape for shapes that meet: the rank they share, dims that differ unknown."""
    if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:
        return None
    return [dims[0] if len(set(dims)) == 1 else None for dims in zip(*shapes)]


def held_dtype(t: Type) -> torch.dtype | None:
    """A tensor's dtype, or the dtype of the tensors a Sequence or Optional holds."""
    if t.kind() in ("ListType", "OptionalType"):
        elem = lists.element_type(t)
        return elem.dtype() if elem is not None else None
    return t.dtype()


def _relaxed(t: Type) -> Type:
    """A loop-carried tensor's type: the same dtype and rank, any size."""
    if t.shape is None:
        return Type.tensor(t.dtype())
    return Type.tensor(t.dtype(), [None] * len(t.shape))


def _raises(block: Any) -> bool:
    return any(node.kind() == "prim::RaiseException" for node in block.nodes())


# -- If --------------------------------------------------------------------------------
@pack.symbolic("prim::If", since=7)
def prim_if(g, condition: Value) -> Value | tuple[Value, ...] | None:
    """If(bool cond) -> t...

    No schema in torch: two blocks, then and else, each returning the outputs. ONNX If; a
    constant condition, or a branch that only raises, keeps just one branch."""
    node = g.original_node
    blocks = list(node.blocks())
    raising = [_raises(block) for block in blocks]
    if all(raising):
        raise OnnxExporterError(
            f"Both branches of this `if` raise an exception (at {g.source or 'unknown'}); "
            "the model cannot run past it.")
    const = _const_bool(condition)
    chosen = None
    if any(raising):  # the raising branch is the error path: keep the other one
        chosen = blocks[1] if raising[0] else blocks[0]
    elif const is not None:
        chosen = blocks[0] if const else blocks[1]
    if chosen is not None:
        outs = g.convert_block(chosen, [])
        return tuple(outs) if len(outs) != 1 else outs[0]
    ts_outputs = list(node.outputs())
    if not ts_outputs:
        return None
    if g.opset < 9:  # below 9 a subgraph cannot hold the int and bool constants it needs
        sh._onnx_opset_unsupported_detailed("prim::If", g.opset, 9, "a condition known only at "
                                            "run time")
    cond = to_condition(g, condition)
    branches = []
    for name, block in zip(("then_branch", "else_branch"), blocks):
        sub = g.subgraph(name)
        branches.append((sub, sub.convert_block(block, [])))
    mapped: list[Value | None] = [_unconverted_output(g, ts, [outs[k] for _, outs in branches])
                                  for k, ts in enumerate(ts_outputs)]
    kept = [k for k, value in enumerate(mapped) if value is None]
    hints = {k: _dtype_hint([outs[k] for _, outs in branches]) for k in kept}
    optional = {k for k in kept if ts_outputs[k].type().kind() == "OptionalType"
                and any(may_be_none(outs[k]) for _, outs in branches)}
    converted = [[None if _takes_other_type(outs[k], k in optional) else
                  runtime_value(sub, outs[k], ts_outputs[k].type(), hints[k],
                                optional=k in optional) for k in kept]
                 for sub, outs in branches]
    finals = []
    for (sub, outs), values, others in zip(branches, converted, reversed(converted)):
        values = [_fill(sub, value, other, outs[k], ts_outputs[k].type(), hints[k],
                        k in optional) for k, value, other in zip(kept, values, others)]
        finals.append(finish_subgraph(sub, values))
    if kept:
        result = g.op("If", cond, then_branch_g=branches[0][0].graph,
                      else_branch_g=branches[1][0].graph, outputs=len(kept))
        for index, (k, value) in enumerate(zip(kept, [result] if len(kept) == 1 else result)):
            merged = merge_types([f[index].type() for f in finals], f"Output {k} of the `if` "
                                 f"at {g.source or 'unknown'}")
            mapped[k] = value.setType(merged)
            if merged.kind() == "OptionalType":  # both branches declare the one type
                for final in finals:
                    final[index].setType(merged)
    return tuple(mapped) if len(mapped) != 1 else mapped[0]


#: TorchScript values an `if` may choose that have no ONNX form (messages for warnings).
_NO_ONNX_VALUE = ("StringType", "NoneType", "DeviceObjType")


def _takes_other_type(value: Value, optional: bool) -> bool:
    """Whether a branch's value is typed by the other branch's: a variable it leaves unset,
    or None where the `if` gives an Optional."""
    return is_uninitialized(value) or (optional and sh._is_none(value))


def _fill(g: Any, value: Value | None, other: Value | None, original: Value, ts_type: Any,
          hint: torch.dtype | None, optional: bool) -> Value:
    """A branch's output: ``value`` converted, else a placeholder of the other branch's
    type (an empty Optional for None)."""
    if value is not None:
        return value
    if other is not None:
        return placeholder(g, other.type())
    return runtime_value(g, original, ts_type, hint, optional=optional)


def _unconverted_output(g: Any, ts_output: Any, values: list[Value]) -> Value | None:
    """An `if` output that needs no ONNX If output: one without an ONNX form, or one that
    no branch sets (None for the others)."""
    if ts_output.type().kind() in _NO_ONNX_VALUE:
        return _chosen_constant(g, ts_output, values)
    return values[0] if all(map(is_uninitialized, values)) else None


def _chosen_constant(g: Any, ts_output: Any, values: list[Value]) -> Value:
    """What an `if` output without an ONNX form is: the constant both branches give, or a
    value that fails naming the `if` if anything but a no-op (``warnings.warn``) uses it."""
    if all(v.is_const for v in values) and all(v.const == values[0].const for v in values):
        return values[0]

    def materialize(graph: Any) -> Value:
        raise OnnxExporterError(
            f"The `if` at {g.source or 'unknown'} chooses a {ts_output.type()} at run time "
            "and the model uses it; ONNX has no such values. Compute tensors on both "
            "branches instead.")

    return g.graph.deferred(Type.of(ts_output.type()), materialize)


def _dtype_hint(values: list[Value]) -> torch.dtype | None:
    """The dtype of the values meeting at an If output (for lists, of their items): one
    may be an empty list, or None."""
    dtypes = (lists.elem_dtype(v) or held_dtype(v.type()) for v in values)
    return next((d for d in dtypes if d is not None), None)


# -- Loop ------------------------------------------------------------------------------
@pack.symbolic("prim::Loop", since=9)
def prim_loop(g, max_trip: Value, condition: Value, *initial: Value
              ) -> Value | tuple[Value, ...] | None:
    """Loop(int max_trip_count, bool cond, t... carried) -> t...

    No schema in torch: the body block takes the iteration and the carried values, and
    returns the condition and the next carried values.
    ONNX Loop: for-loops get a trip count, while-loops a condition; carried values,
    outer values read in the body, and lists appended to once per iteration (scan outputs)."""
    node = g.original_node
    body = next(node.blocks())
    ts_carried = list(node.inputs())[2:]
    if not ts_carried:  # the front end made every effect of the body a carried value
        return None
    scans = {k for k in range(len(initial)) if _is_scan_slot(g, body, k, initial[k])}
    optional = {k for k, (init, ts_out) in enumerate(zip(initial, node.outputs()))
                if ts_out.type().kind() == "OptionalType"
                and (may_be_none(init) or _body_may_give_none(body, k))}
    types = {k: _carried_type(g, init, ts_value, k in optional)
             for k, (init, ts_value) in enumerate(zip(initial, ts_carried)) if k not in scans}
    sub, inner, body_values, scan_items = _convert_body(g, body, ts_carried, scans, optional,
                                                        types)
    learned = {k: value.type() for k, value in inner.items() if value.type() != types[k]}
    if learned:  # the body showed the item dtype of an empty list or a None: convert again
        types.update(learned)
        sub, inner, body_values, scan_items = _convert_body(g, body, ts_carried, scans,
                                                            optional, types)
    finish_subgraph(sub, [*body_values, *scan_items])
    loop_inputs = [_trip_count(g, max_trip), to_condition(g, condition)]
    for k, (init, ts_value) in enumerate(zip(initial, ts_carried)):
        if k not in scans:
            loop_inputs.append(runtime_value(g, init, ts_value.type(), _elem_dtype(inner[k]),
                                             "prim::Loop", optional=k in optional))
    count = len(initial)
    result = g.op("Loop", *loop_inputs, body_g=sub.graph, outputs=count)
    carried_keys = [k for k in range(count) if k not in scans]
    out_types = {k: merge_types([given.type(), returned.type()], "prim::Loop")
                 if k in optional else inner[k].type()
                 for k, given, returned in zip(carried_keys, loop_inputs[2:], body_values[1:])}
    results = [result] if count == 1 else list(result)
    carried_out = iter(results[:count - len(scans)])
    scan_out = iter(results[count - len(scans):])
    mapped = []
    for k, ts_value in enumerate(ts_carried):
        if k in scans:
            stacked = next(scan_out)
            item = scan_items[len([m for m in range(k) if m in scans])]
            shape = item.type().shape
            stacked.setType(Type.tensor(item.type().dtype(),
                                        None if shape is None else [None, *shape]))
            mapped.append(lists.stacked_list(g, stacked, Type.of(ts_value.type())))
        else:
            value = next(carried_out)
            value.setType(out_types[k])
            mapped.append(value)
    return tuple(mapped) if count != 1 else mapped[0]


def _convert_body(g: Any, body: Any, ts_carried: list[Any], scans: set[int],
                  optional: set[int], types: dict[int, Type]
                  ) -> tuple[Any, dict[int, Value], list[Value], list[Value]]:
    """The loop body as a subgraph whose carried inputs have ``types``: (its context, the
    carried inputs (their types refined by what the body returns), the condition and
    carried values it returns, its scan outputs)."""
    sub = g.subgraph("loop_body")
    iteration = sub.graph.add_input(sub.graph.fresh_name("iter"), Type.tensor(torch.int64, ()))
    sub.graph.add_input(sub.graph.fresh_name("cond"), Type.tensor(torch.bool, ()))
    block_inputs: list[Value] = [iteration]
    inner: dict[int, Value] = {}
    for k, ts_value in enumerate(ts_carried):
        if k in scans:
            block_inputs.append(lists.scan_accumulator(sub.graph, Type.of(ts_value.type())))
            continue
        inner[k] = sub.graph.add_input(sub.graph.fresh_name(_hint(ts_value)), types[k])
        block_inputs.append(inner[k])
    outs = sub.convert_block(body, block_inputs)
    body_values = [to_condition(sub, outs[0])]
    scan_items = []
    for k, ts_value in enumerate(ts_carried):
        out = outs[1 + k]
        if k in scans:
            item = lists.scanned_item(out)
            if item is None:
                raise OnnxExporterError(
                    f"Internal error: the loop at {g.source or 'unknown'} lost the item "
                    "appended to its list.")
            scan_items.append(sub.graph.materialize(item))
            continue
        dtype = lists.elem_dtype(out) if ts_value.type().kind() == "ListType" else None
        value = runtime_value(sub, out, ts_value.type(), dtype or _elem_dtype(inner[k]),
                              "prim::Loop", optional=k in optional)
        _refine(inner[k], value)
        before, after = held_dtype(inner[k].type()), held_dtype(value.type())
        if before is not None and after is not None and before != after:
            raise OnnxExporterError(
                f"The loop at {g.source or 'unknown'} changes the dtype of "
                f"{ts_value.debugName()} from {before} to {after}; an ONNX Loop carries one "
                "dtype. Cast the value to its final dtype before the loop.")
        body_values.append(value)
    return sub, inner, body_values, scan_items


def _body_may_give_none(body: Any, k: int) -> bool:
    """Whether the loop body may give None for carried value ``k`` (it returns None, or an
    Optional other than the one it was given)."""
    given, returned = list(body.inputs())[1 + k], list(body.outputs())[1 + k]
    return returned.type().kind() in ("NoneType", "OptionalType") and returned != given


def _hint(ts_value: Any) -> str:
    return ts_value.debugName().split(".")[0] if not ts_value.debugName()[0].isdigit() \
        else "carried"


def _carried_type(g: Any, init: Value, ts_value: Any, optional: bool) -> Type:
    ts_type = ts_value.type()
    if optional:
        if g.opset < OPTIONAL_OPSET:
            sh._onnx_opset_unsupported_detailed(
                "prim::Loop", g.opset, OPTIONAL_OPSET, "a variable that is None before a loop "
                "needs ONNX Optional")
        return optional_type(held_dtype(init.type()))
    if ts_type.kind() == "ListType":
        kind = _list_item_kind(g, ts_type, "prim::Loop")
        if kind == "TensorType":
            if g.opset < SEQUENCE_CONTROL_FLOW_OPSET:
                sh._onnx_opset_unsupported_detailed(
                    "prim::Loop", g.opset, SEQUENCE_CONTROL_FLOW_OPSET,
                    "a list of tensors carried through a loop (other than one appended to "
                    "once per iteration) needs Sequence support in Loop")
            return lists.sequence_type(lists.elem_dtype(init), _init_item_shape(init))
        return Type.tensor(lists.number_dtype(kind), [None])
    t = init.type()
    if t.kind() in ("IntType", "FloatType", "BoolType", "NumberType"):
        return Type.tensor(t.dtype(), ())
    return _relaxed(t)


def _init_item_shape(init: Value) -> Any:
    """The item shape (rank) of a list entering a loop, when its items or type know it."""
    if sh._is_packed_list(init):
        shapes = [i.type().shape for i in sh._unpack_list(init)]
        return lists.common_rank_shape(shapes) if shapes and None not in shapes else None
    return lists.item_shape(init.type())


def _elem_dtype(value: Value) -> torch.dtype | None:
    """The dtype of the tensors a list or Optional holds."""
    kind = value.type().kind()
    if kind == "ListType":
        return lists.elem_dtype(value)
    return held_dtype(value.type()) if kind == "OptionalType" else None


def _refine(inner: Value, out: Value) -> None:
    """Give a body input the dtype its body output shows (an empty list's, say)."""
    t, o = inner.type(), out.type()
    elem = lists.element_type(t)
    if t.kind() == "ListType" and elem is not None and (
            elem.dtype() is None or (elem.shape is None and lists.item_shape(o) is not None)):
        inner.setType(lists.sequence_type(lists.elem_dtype(out) or elem.dtype(),
                                          lists.item_shape(o)))
    elif t.kind() == "OptionalType" and held_dtype(t) is None:
        inner.setType(optional_type(held_dtype(o)))
    elif t.kind() == "TensorType" and t.dtype() is None and o.dtype() is not None:
        inner.setType(t.with_dtype(o.dtype()))


def _trip_count(g: Any, max_trip: Value) -> Value | None:
    """The trip count as a 0-d int64 (none for a while-loop's unbounded maximum)."""
    const = sh._scalar(max_trip)
    if const is not None and const >= _INT64_MAX:
        return None
    if const is not None:
        return g.constant(torch.tensor(int(const), dtype=torch.int64))
    trip = sh.cast_to(g, max_trip, torch.int64)
    if trip.type().dim() != 0:
        trip = sh._reshape_helper(g, trip, []).setType(Type.tensor(torch.int64, ()))
    return trip


def _is_scan_slot(g: Any, body: Any, k: int, init: Value) -> bool:
    """Below opset 13, a list of tensors starting empty that the body appends to exactly
    once per iteration (and reads nowhere else) becomes a scan output."""
    if g.opset >= SEQUENCE_CONTROL_FLOW_OPSET or not sh._is_packed_list(init) \
            or sh._unpack_list(init):
        return False
    block_input = list(body.inputs())[1 + k]
    if lists.elem_kind(block_input) != "TensorType":
        return False
    returned = list(body.outputs())[1 + k]
    uses = [u.user for u in block_input.uses() if u.user != body.returnNode()]
    if len(uses) != 1:
        return False
    user = uses[0]
    return (user.kind() == "aten::append" and user.owningBlock() == body
            and user.inputsAt(0) == block_input and returned in (block_input, user.output())
            and all(u.user == body.returnNode() for u in user.output().uses()))


# -- torch.export's scan and map -------------------------------------------------------------
@pack.symbolic("higher_order::scan", since=9)
def scan(g, *operands: Value, carried_i: int) -> Value | tuple[Value, ...]:
    """scan(GraphModule combine_fn, Tensor[] init, Tensor[] xs, Tensor[] additional_inputs) -> Tensor[]

    A torch.export higher-order op (no TorchScript schema).
    torch.export's ``scan(combine, init, xs)`` as ONNX Scan: the carried values, then the
    tensors scanned along axis 0; the block returns the next carried values, then one item
    of each stacked output."""
    return _scan(g, list(operands), carried_i)


@pack.symbolic("higher_order::map_impl", since=9)
def map_impl(g, *scanned: Value, carried_i: int = 0) -> Value | tuple[Value, ...]:
    """map_impl(GraphModule f, Tensor[] xs, Tensor[] pos_args) -> Tensor[]

    A torch.export higher-order op (no TorchScript schema).
    torch.export's ``map(f, xs, *args)`` as an ONNX Scan carrying nothing: ``f`` of each
    item of ``xs`` along axis 0, stacked."""
    return _scan(g, list(scanned), carried_i)


def _scan(g: Any, operands: list[Value], carried: int) -> Value | tuple[Value, ...]:
    node = g.original_node
    body = next(node.blocks())
    sub = g.subgraph("scan_body")
    inputs = [sub.graph.add_input(sub.graph.fresh_name(_hint(ts_value)),
                                  Type.of(ts_value.type()))
              for ts_value in body.inputs()]
    finish_subgraph(sub, sub.convert_block(body, inputs))
    ts_outputs = list(node.outputs())
    result = g.op("Scan", *[g.graph.materialize(v) for v in operands], body_g=sub.graph,
                  num_scan_inputs_i=len(operands) - carried, outputs=len(ts_outputs))
    results = [result] if len(ts_outputs) == 1 else list(result)
    for value, ts_value in zip(results, ts_outputs):
        value.setType(Type.of(ts_value.type()))
    return tuple(results) if len(results) != 1 else results[0]
