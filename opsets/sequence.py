"""TorchScript's list ops: lists of tensors as ONNX Sequences (opset 11+), lists of
numbers as 1-D tensors.

A list whose items are known (``prim::ListConstruct``, or appends to such a list
outside loops) stays a packed list: consumers see its items and no Sequence op is
needed. A list that grows at run time (appended to in a loop) is an ONNX Sequence
for tensors and a 1-D tensor for ints, floats and bools. Ops that change a list
(``append``, ``insert``, ``pop``, ``l[i] = v``) make later uses of it read the new
list.
"""

from __future__ import annotations

from typing import Any

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.errors import OnnxExporterError
from oxport.ir import Type, Value
from oxport.opsets.lists import (
    as_number_tensor, as_sequence, construct_sequence, elem_dtype, elem_kind, grown_type,
    item_type, number_dtype, packed_list, require_sequences, sequence_type)

pack = OpPack("oxport.sequence", cases="oxport.opsets.cases.sequence")


def _remap(g: Any, ts_list: Any, new: Value) -> None:
    """Later uses of the TorchScript list ``ts_list`` read ``new`` (it was mutated)."""
    g.rebind(ts_list, new)


def _const_index(index: Value) -> int | None:
    value = sh._maybe_get_const(index, "i")
    return None if isinstance(value, Value) else value


def _index(g: Any, index: Value) -> Value:
    return sh.cast_to(g, index, torch.int64)


# -- symbolics ---------------------------------------------------------------------------
@pack.symbolic("aten::append.t", since=7)
def append(g, self: Value, el: Value) -> Value:
    """append.t(t[](a!) self, t(c -> *) el) -> t[](a!)

    ``l.append(x)``: a longer packed list, SequenceInsert, or Concat for numbers."""
    ts_list = g.original_node.inputsAt(0)
    kind = elem_kind(ts_list)
    if self.meta and self.meta.get("scan_accumulator"):
        new = Value(self.graph, self.graph.fresh_name("scan"), self.type())
        new.meta = {"scan_accumulator": True, "scan_item": el}
    elif sh._is_packed_list(self):
        new = packed_list(g, [*sh._unpack_list(self), el], Type.of(ts_list.type()))
    elif kind == "TensorType":
        require_sequences(g, "aten::append")
        seq = as_sequence(g, self, el.type().dtype())
        new = g.op("SequenceInsert", seq, el).setType(grown_type(seq, el))
    else:
        dtype = number_dtype(kind)
        item = sh._unsqueeze_helper(g, sh.cast_to(g, el, dtype), [0])
        new = g.op("Concat", self, item, axis_i=0).setType(Type.tensor(dtype, [None]))
    _remap(g, ts_list, new)
    return new


@pack.symbolic("aten::__getitem__.t", since=7)
def getitem(g, self: Value, index: Value) -> Value:
    """__getitem__.t(t[](a) list, int idx) -> t(*)

    ``l[i]``: the item of a packed list, SequenceAt, or Gather for numbers."""
    ts_list = g.original_node.inputsAt(0)
    position = _const_index(index)
    if sh._is_packed_list(self) and position is not None:
        items = sh._unpack_list(self)
        if -len(items) <= position < len(items):
            return items[position]
    if self.is_const and position is not None:
        return g.python_constant(self.const[position])
    kind = elem_kind(ts_list)
    if kind == "TensorType":
        require_sequences(g, "aten::__getitem__")
        seq = as_sequence(g, self)
        return g.op("SequenceAt", seq, _index(g, index)).setType(item_type(seq))
    values = as_number_tensor(g, self, kind)
    return g.op("Gather", values, _index(g, index), axis_i=0).setType(
        Type.tensor(values.type().dtype(), ()))


@pack.symbolic("aten::len.t", since=7)
def length(g, self: Value) -> Value:
    """len.Tensor(Tensor t) -> int
    len.str(str s) -> int
    len.t(t[] a) -> int

    ``len(l)`` (a constant for a packed list), ``len(tensor)``, or ``len(constant str)``."""
    ts_value = g.original_node.inputsAt(0)
    if sh._is_packed_list(self):
        return g.python_constant(len(sh._unpack_list(self)))
    if self.is_const and isinstance(self.const, (list, tuple, str)):
        return g.python_constant(len(self.const))
    if ts_value.type().kind() == "ListType" and elem_kind(ts_value) == "TensorType":
        require_sequences(g, "aten::len")
        return g.op("SequenceLength", as_sequence(g, self)).setType(Type.tensor(torch.int64, ()))
    if ts_value.type().kind() == "ListType":
        return g.op("Size", self).setType(Type.tensor(torch.int64, ()))
    first = sh._slice_helper(g, g.op("Shape", self), [0], [0], [1])
    return sh._squeeze_helper(g, first, [0]).setType(Type.tensor(torch.int64, ()))


pack.alias(length, "aten::len.Tensor", "aten::len.str", since=7)


@pack.symbolic("aten::_set_item.t", since=7)
def set_item(g, self: Value, index: Value, el: Value) -> Value:
    """_set_item.t(t[](a!) l, int idx, t(b -> *) el) -> t[](a!)

    ``l[i] = x`` on a list."""
    ts_list = g.original_node.inputsAt(0)
    kind = elem_kind(ts_list)
    position = _const_index(index)
    if sh._is_packed_list(self) and position is not None:
        items = list(sh._unpack_list(self))
        items[position] = el
        new = packed_list(g, items, Type.of(ts_list.type()))
    elif kind == "TensorType":
        require_sequences(g, "aten::_set_item")
        seq = as_sequence(g, self, el.type().dtype())
        at = _normalized(g, index, g.op("SequenceLength", seq))
        new = g.op("SequenceInsert", g.op("SequenceErase", seq, at), el, at)
        new.setType(seq.type())
    else:
        if g.opset < 11:
            sh._onnx_opset_unsupported("aten::_set_item.t", g.opset, 11)  # ScatterND
        values = as_number_tensor(g, self, kind)
        at = sh._reshape_helper(g, _normalized(g, index, g.op("Size", values)), [1, 1])
        item = sh._reshape_helper(g, sh.cast_to(g, el, values.type().dtype()), [1])
        new = g.op("ScatterND", values, at, item).setType(values.type())
    _remap(g, ts_list, new)
    return new


def _normalized(g: Any, index: Value, size: Value) -> Value:
    """A non-negative position for ``index`` in a list of ``size`` items."""
    position = _const_index(index)
    if position is not None and position >= 0:
        return g.constant(torch.tensor(position, dtype=torch.int64))
    index = _index(g, index)
    negative = g.op("Less", index, g.constant(torch.tensor(0)))
    shifted = g.op("Add", index, size)
    return g.op("Where", negative, shifted, index).setType(Type.tensor(torch.int64, ()))


@pack.symbolic("aten::insert.t", since=7)
def insert(g, self: Value, index: Value, el: Value) -> None:
    """insert.t(t[](a!) self, int idx, t(b -> *) el) -> ()

    ``l.insert(i, x)``."""
    ts_list = g.original_node.inputsAt(0)
    kind = elem_kind(ts_list)
    position = _const_index(index)
    if sh._is_packed_list(self) and position is not None:
        items = list(sh._unpack_list(self))
        items.insert(position, el)
        new = packed_list(g, items, Type.of(ts_list.type()))
    elif kind == "TensorType":
        require_sequences(g, "aten::insert")
        seq = as_sequence(g, self, el.type().dtype())
        new = g.op("SequenceInsert", seq, el, _normalized(g, index, g.op("SequenceLength", seq)))
        new.setType(grown_type(seq, el))
    else:
        values = as_number_tensor(g, self, kind)
        at = _normalized(g, index, g.op("Size", values))
        item = sh._unsqueeze_helper(g, sh.cast_to(g, el, values.type().dtype()), [0])
        head = sh._slice_helper(g, values, [0], [0], [at])
        tail = sh._slice_helper(g, values, [0], [at], [2**62])
        new = g.op("Concat", head, item, tail, axis_i=0).setType(values.type())
    _remap(g, ts_list, new)


@pack.symbolic("aten::pop.t", since=7)
def pop(g, self: Value, index: Value | None = None) -> Value:
    """pop.t(t[](a!) self, int idx=-1) -> t(*)

    ``l.pop(i)``: the item, and the list without it."""
    ts_list = g.original_node.inputsAt(0)
    kind = elem_kind(ts_list)
    index = index if index is not None else g.python_constant(-1)
    position = _const_index(index)
    if sh._is_packed_list(self) and position is not None:
        items = list(sh._unpack_list(self))
        item = items.pop(position)
        _remap(g, ts_list, packed_list(g, items, Type.of(ts_list.type())))
        return item
    if kind == "TensorType":
        require_sequences(g, "aten::pop")
        seq = as_sequence(g, self)
        at = _index(g, index)
        item = g.op("SequenceAt", seq, at).setType(item_type(seq))
        _remap(g, ts_list, g.op("SequenceErase", seq, at).setType(seq.type()))
        return item
    values = as_number_tensor(g, self, kind)
    at = _normalized(g, index, g.op("Size", values))
    item = g.op("Gather", values, at, axis_i=0).setType(Type.tensor(values.type().dtype(), ()))
    after = g.op("Add", at, g.constant(torch.tensor(1)))
    head = sh._slice_helper(g, values, [0], [0], [at])
    tail = sh._slice_helper(g, values, [0], [after], [2**62])
    _remap(g, ts_list, g.op("Concat", head, tail, axis_i=0).setType(values.type()))
    return item


@pack.symbolic("aten::Delete.t", since=7)
def delete(g, self: Value, index: Value) -> None:
    """Delete.t(t[](a!) self, int idx) -> ()

    ``del l[i]``: later uses read the list without its item."""
    pop(g, self, index)


@pack.symbolic("aten::add.t", since=7)
def list_concat(g, self: Value, other: Value) -> Value:
    """add.t(t[] a, t[] b) -> t[]

    ``a + b`` for lists."""
    return _joined(g, self, other, g.original_node.output())


@pack.symbolic("aten::add_.t", since=7)
def list_extend_in_place(g, self: Value, other: Value) -> Value:
    """add_.t(t[](a!) self, t[] b) -> t[]

    ``a += b`` for lists: later uses of ``a`` read the joined list."""
    ts_list = g.original_node.inputsAt(0)
    new = _joined(g, self, other, ts_list)
    _remap(g, ts_list, new)
    return new


@pack.symbolic("aten::extend.t", since=7)
def list_extend(g, self: Value, other: Value) -> None:
    """extend.t(t[](a!) self, t[] other) -> ()

    ``a.extend(b)``: later uses of ``a`` read the joined list."""
    ts_list = g.original_node.inputsAt(0)
    _remap(g, ts_list, _joined(g, self, other, ts_list))


def _joined(g: Any, first: Value, second: Value, ts_list: Any) -> Value:
    """The list of ``first``'s items then ``second``'s: a packed list when both are, a
    Sequence for tensors, a Concat for numbers."""
    list_type = Type.of(ts_list.type())
    kind = elem_kind(ts_list)
    if sh._is_packed_list(first) and sh._is_packed_list(second):
        return packed_list(g, [*sh._unpack_list(first), *sh._unpack_list(second)], list_type)
    if kind == "TensorType":
        return _joined_sequences(g, first, second)
    parts = [as_number_tensor(g, v, kind) for v in (first, second)]
    lengths = [(p.type().shape or [None])[0] for p in parts]
    length = sum(lengths) if all(isinstance(n, int) for n in lengths) else None
    return g.op("Concat", *parts, axis_i=0).setType(Type.tensor(number_dtype(kind), [length]))


def _joined_sequences(g: Any, first: Value, second: Value) -> Value:
    """Two lists of tensors, one of them grown at run time, as one Sequence: the known
    items of a packed list are inserted one by one (at the front for ``first``), two
    Sequences are joined by a Loop inserting the second's items."""
    require_sequences(g, "aten::add.t")
    dtype = elem_dtype(first) or elem_dtype(second)
    if sh._is_packed_list(second):
        seq = as_sequence(g, first, dtype, "aten::add.t")
        for item in sh._unpack_list(second):
            seq = g.op("SequenceInsert", seq, item).setType(grown_type(seq, item))
        return seq
    seq = as_sequence(g, second, dtype, "aten::add.t")
    if sh._is_packed_list(first):
        for position, item in enumerate(sh._unpack_list(first)):
            seq = g.op("SequenceInsert", seq, item, g.constant(torch.tensor(position))
                       ).setType(grown_type(seq, item))
        return seq
    return _inserted_all(g, as_sequence(g, first, dtype, "aten::add.t"), seq)


def _inserted_all(g: Any, target: Value, items: Value) -> Value:
    """``target`` with every item of the Sequence ``items`` appended (a Loop carrying a
    Sequence: opset 13)."""
    if g.opset < 13:
        sh._onnx_opset_unsupported_detailed(
            "aten::add.t", g.opset, 13, "joining two lists of tensors built at run time needs "
            "a Loop carrying a Sequence")
    dtype = elem_dtype(target) or elem_dtype(items)
    body = g.subgraph("join_body")
    iteration = body.graph.add_input(body.graph.fresh_name("iter"), Type.tensor(torch.int64, ()))
    condition = body.graph.add_input(body.graph.fresh_name("cond"), Type.tensor(torch.bool, ()))
    grown = body.graph.add_input(body.graph.fresh_name("joined"), sequence_type(dtype))
    item = body.op("SequenceAt", items, iteration).setType(item_type(items))
    body.graph.outputs = [body.op("Identity", condition).setType(condition.type()),
                          body.op("SequenceInsert", grown, item).setType(sequence_type(dtype))]
    count = g.op("SequenceLength", items).setType(Type.tensor(torch.int64, ()))
    return g.op("Loop", count, None, target, body_g=body.graph).setType(sequence_type(dtype))


@pack.symbolic("aten::slice.t", since=7)
def list_slice(g, self: Value, start: Value | None = None, end: Value | None = None,
               step: Value | None = None) -> Value:
    """slice.t(t[] l, int? start=None, int? end=None, int step=1) -> t[]

    ``l[a:b:c]`` for lists."""
    list_type = Type.of(g.original_node.output().type())
    kind = elem_kind(g.original_node.output())
    bounds = [None if v is None or sh._is_none(v) else sh._maybe_get_const(v, "i")
              for v in (start, end, step)]
    static = not any(isinstance(b, Value) for b in bounds)
    if sh._is_packed_list(self) and static:
        return packed_list(g, sh._unpack_list(self)[slice(*bounds)], list_type)
    stride = 1 if bounds[2] is None else bounds[2]
    if isinstance(stride, Value):
        sh._unimplemented("aten::slice.t", "a step computed at run time")
    if kind == "TensorType":
        return _sequence_slice(g, as_sequence(g, self, op="aten::slice.t"), *bounds[:2], stride)
    values = as_number_tensor(g, self, kind)
    first, past = (0, 2**62) if stride > 0 else (2**62, -2**62)  # Slice clamps them
    begin = first if bounds[0] is None else bounds[0]
    stop = past if bounds[1] is None else bounds[1]
    out = sh._slice_helper(g, values, [0], [begin], [stop], [stride] if stride != 1 else None)
    known = values.type().shape
    length = len(range(known[0])[slice(*bounds)]) if static and known and \
        isinstance(known[0], int) else None
    return out.setType(Type.tensor(values.type().dtype(), [length]))


def _sequence_slice(g: Any, items: Value, start: int | Value | None,
                    end: int | Value | None, step: int) -> Value:
    """``l[start:end:step]`` of a Sequence: the positions Python's slice picks (a Range of the
    bounds clamped as Python clamps them to the run-time length), each item inserted into a
    new Sequence by a Loop (opset 13, whose Loop carries Sequences)."""
    if g.opset < 13:
        sh._onnx_opset_unsupported_detailed(
            "aten::slice.t", g.opset, 13, "slicing a list of tensors built at run time needs "
            "a Loop carrying a Sequence")
    dtype = elem_dtype(items)
    if dtype is None:
        raise OnnxExporterError(
            f"aten::slice.t at {g.source or 'unknown'}: the dtype of the sliced list's items "
            "is unknown here; append to it before slicing it.")
    size = g.op("SequenceLength", items).setType(Type.tensor(torch.int64, ()))
    lowest, highest = (0, size) if step > 0 else (-1, g.op("Sub", size, _int64(g, 1)))
    first, past = (lowest, highest) if step > 0 else (highest, lowest)

    def clamped(bound: int | Value | None, default: int | Value) -> int | Value:
        if bound is None:
            return default
        bound = _int64(g, bound)
        wrapped = g.op("Where", g.op("Less", bound, _int64(g, 0)),
                       g.op("Add", bound, size), bound)
        return g.op("Min", g.op("Max", wrapped, _int64(g, lowest)), _int64(g, highest))

    positions = g.op("Range", _int64(g, clamped(start, first)), _int64(g, clamped(end, past)),
                     _int64(g, step))
    body = g.subgraph("slice_body")
    iteration = body.graph.add_input(body.graph.fresh_name("iter"), Type.tensor(torch.int64, ()))
    condition = body.graph.add_input(body.graph.fresh_name("cond"), Type.tensor(torch.bool, ()))
    picked = body.graph.add_input(body.graph.fresh_name("picked"), sequence_type(dtype))
    position = body.op("Gather", positions, iteration, axis_i=0).setType(
        Type.tensor(torch.int64, ()))
    item = body.op("SequenceAt", items, position).setType(item_type(items))
    body.graph.outputs = [body.op("Identity", condition).setType(condition.type()),
                          body.op("SequenceInsert", picked, item).setType(sequence_type(dtype))]
    empty = construct_sequence(g, [], dtype, "aten::slice.t")
    return g.op("Loop", g.op("Size", positions), None, empty, body_g=body.graph).setType(
        sequence_type(dtype))


def _int64(g: Any, value: int | Value) -> Value:
    """A 0-d int64 Value of a Python int or a number Value."""
    return g.constant(torch.tensor(value)) if isinstance(value, int) else \
        sh.cast_to(g, value, torch.int64)


@pack.symbolic("aten::list.t", since=7)
def list_copy(g, self: Value) -> Value:
    """list.t(t[] l) -> t[]

    ``list(l)``: a copy, which is the same value in a functional graph."""
    return self
