"""Tensor creation: zeros/ones/full/empty, their _like and new_ forms, arange, linspace, eye,
scalar_tensor/tensor, fill_/zero_, and random tensors (rand*, randint, bernoulli, multinomial)."""

from __future__ import annotations

from typing import Any

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value
from oxport.opsets.shape import ints
from oxport.types import JitScalarType, packed_count

pack = OpPack("oxport.creation", cases="oxport.opsets.cases.creation")

Shape = list[int] | Value  # a static shape, or a 1-D int64 tensor computed at run time


# -- argument helpers -----------------------------------------------------------------
def _number(value: Value | Any) -> Any:
    """A Python number when ``value`` is constant, else the Value itself."""
    if not isinstance(value, Value):
        return value
    if value.is_const:
        const = value.const
        return const.item() if isinstance(const, torch.Tensor) and const.numel() == 1 else const
    return value


def _out_dtype(g) -> torch.dtype | None:
    node = g.original_node
    if node is None or node.outputsSize() == 0:
        return None
    out_type = node.output().type()
    return out_type.dtype() if out_type.kind() == "TensorType" else None


def _result_dtype(g, dtype: Value | None, default: torch.dtype | None) -> torch.dtype:
    """An explicit ``dtype=``, else what TorchScript recorded, else ``default`` (float32)."""
    if dtype is not None and not sh._is_none(dtype):
        code = _number(dtype)
        if not isinstance(code, Value):
            return JitScalarType(code).dtype()
        if _out_dtype(g) is None:  # e.g. prim::dtype(x) in a scripted graph
            sh._unimplemented(g.original_node.kind(), "a dtype computed at run time")
    return _out_dtype(g) or default or torch.get_default_dtype()


def _inferred(*numbers: Any) -> torch.dtype:
    """The dtype torch gives a tensor made from these Python numbers or values."""
    kinds = [n.type().dtype() if isinstance(n, Value) else type(n) for n in numbers]
    if any(k in (float, torch.float32, torch.float64) for k in kinds):
        return torch.get_default_dtype()
    if kinds and all(k in (bool, torch.bool) for k in kinds):
        return torch.bool
    return torch.int64


#: Ops whose outputs read only their inputs' sizes, which a trace's example fixes.
_SIZE_READERS = frozenset({"aten::size", "aten::sym_size", "aten::dim", "aten::numel",
                           "aten::len", "prim::shape"})


def _from_data(g, value: Value) -> bool:
    """Whether an argument of the node is computed from the values of the model's input
    tensors (``t[0]``), not only from constants, parameters and sizes (``x.size(0)``):
    the output's sizes it sets are then not the example's."""
    node = g.original_node
    sources = [v for v in node.inputs() if g.value_of(v) is value] if node is not None else []
    seen: set[int] = set()
    while sources:
        source = sources.pop()
        if source.unique() in seen:
            continue
        seen.add(source.unique())
        producer = source.node()
        if producer.kind() == "prim::Param":
            if source.type().kind() != "ClassType":  # an input, not the module
                return True
        elif producer.kind() in _SIZE_READERS:
            if any(g.sizes_from_data(v) for v in producer.inputs()):
                return True
        else:
            sources.extend(producer.inputs())
    return False


def _sized_by(g, *arguments: Any) -> None:
    """Mark the node's outputs as sized by tensor values when one of ``arguments`` (the
    Values that set its sizes) is computed from them."""
    if any(isinstance(a, Value) and _from_data(g, a) for a in arguments):
        g.mark_sizes_from_data()


def _shape(g, size: Value) -> Shape:
    """A ``size`` argument: a static list, or a 1-D int64 Value (the output's sizes then
    marked as set by tensor values when they are, see :func:`_from_data`)."""
    static = sh._maybe_get_const(size, "is")
    if not isinstance(static, Value):
        return static
    _sized_by(g, size)
    if sh._is_packed_list(size):  # (a 1-element tensor item, ``zeros(t, 1)``, is one size)
        return ints(g, [sh._maybe_get_const(v, "i") for v in sh._unpack_list(size)])
    return sh.cast_to(g, size, torch.int64)


def _materialize(g, packed: Value, dtype: torch.dtype) -> Value:
    """A list built by prim::ListConstruct as the 1-D tensor it materializes to."""
    count = len(sh._unpack_list(packed))
    return g.graph.materialize(packed).setType(Type.tensor(dtype, [count]))


def _shape_value(g, shape: Shape) -> Value:
    if isinstance(shape, Value):
        return shape
    return g.constant(torch.tensor(shape, dtype=torch.int64))


def _shape_of(g, x: Value) -> Shape:
    """``x``'s shape: static below opset 9 (no ConstantOfShape yet), else a Shape node."""
    sizes = x.type().varyingSizes()
    if g.opset < 9 and sizes is not None and None not in sizes:
        return sizes
    return g.op("Shape", x).setType(Type.tensor(torch.int64, [x.type().dim()]))


def _fill(g, shape: Shape, value: Any, dtype: torch.dtype, op: str) -> Value:
    """A ``dtype`` tensor of ``shape`` holding ``value`` (a number, or a Value)."""
    if packed_count(dtype) > 1:
        return _packed_zeros(g, shape, value, dtype, op)
    if isinstance(value, Value):
        if g.opset < 8:
            sh._onnx_opset_unsupported_detailed(op, g.opset, 8, "a fill value computed at run time")
        return g.op("Expand", sh.cast_to(g, value, dtype), _shape_value(g, shape))
    if g.opset < 9:
        if isinstance(shape, Value):
            sh._onnx_opset_unsupported_detailed(op, g.opset, 9, "a shape computed at run time")
        return g.constant(torch.full(shape, value, dtype=dtype))
    return g.op("ConstantOfShape", _shape_value(g, shape),
                value_t=torch.tensor([value], dtype=dtype))


def _packed_zeros(g, shape: Shape, value: Any, dtype: torch.dtype, op: str) -> Value:
    """Zeros of a dtype packing several numbers in each element (float4_e2m1fn_x2), as a
    constant: eager fills no other value, and ONNX counts each number (the weights' bytes
    are torch's)."""
    if isinstance(shape, Value) or isinstance(value, Value) or value != 0:
        sh._unimplemented(op, f"a {dtype} tensor of a run-time shape or holding a value other "
                          "than 0 (eager fills only zeros of it)")
    return g.constant(torch.zeros(shape, dtype=torch.uint8).view(dtype))


# -- zeros / ones / full / empty ------------------------------------------------------------
def _constant_factory(fill_value: int, name: str):
    def symbolic(g, size: Value, dtype: Value | None = None, *_: Value) -> Value:
        return _fill(g, _shape(g, size), fill_value, _result_dtype(g, dtype, None), f"aten::{name}")
    symbolic.__name__ = name
    overload, memory = ((".memory_format", ", MemoryFormat? memory_format=None")
                        if name == "empty" else ("", ""))
    symbolic.__doc__ = (f"{name}{overload}(SymInt[] size, *, ScalarType? dtype=None, "
                        "Layout? layout=None, Device? device=None, bool? pin_memory=None"
                        f"{memory}) -> Tensor\n\nAs ConstantOfShape ({fill_value}).")
    return symbolic


for _name, _value in (("zeros", 0), ("ones", 1), ("empty", 0)):
    pack.symbolic(f"aten::{_name}", since=7)(_constant_factory(_value, _name))


@pack.symbolic("aten::full", since=7)
def full(g, size: Value, fill_value: Value, dtype: Value | None = None, *_: Value) -> Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    value = _number(fill_value)
    dtype_ = _result_dtype(g, dtype, _inferred(value))
    return _fill(g, _shape(g, size), value, dtype_, "aten::full")


def _fill_like(g, x: Value, value: Any, dtype: torch.dtype, op: str) -> Value:
    """A ``dtype`` tensor shaped like ``x`` holding ``value``. Below opset 9, where no op
    makes a tensor of a run-time shape, a number fills a dynamic shape through ``x``
    itself: ``b or not b`` for ``b = bool(x)`` is true everywhere (NaN included), cast to
    ``dtype`` and scaled."""
    shape = _shape_of(g, x)
    if g.opset >= 9 or not isinstance(shape, Value) or isinstance(value, Value):
        return _fill(g, shape, value, dtype, op)
    truth = sh.cast_to(g, x, torch.bool)
    ones = sh.cast_to(g, g.op("Or", truth, g.op("Not", truth)), dtype)
    return ones if value == 1 else g.op("Mul", ones, g.constant(torch.tensor(value, dtype=dtype)))


def _like_factory(fill_value: int, name: str):
    def symbolic(g, self: Value, dtype: Value | None = None, *_: Value) -> Value:
        dtype_ = _result_dtype(g, dtype, self.type().dtype())
        return _fill_like(g, self, fill_value, dtype_, f"aten::{name}")
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
                        "Device? device=None, bool? pin_memory=None, "
                        "MemoryFormat? memory_format=None) -> Tensor\n\n"
                        f"{fill_value}s shaped like ``self``.")
    return symbolic


for _name, _value in (("zeros_like", 0), ("ones_like", 1), ("empty_like", 0)):
    pack.symbolic(f"aten::{_name}", since=7)(_like_factory(_value, _name))


@pack.symbolic("aten::full_like", since=7)
def full_like(g, self: Value, fill_value: Value, dtype: Value | None = None, *_: Value) -> Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    dtype_ = _result_dtype(g, dtype, self.type().dtype())
    return _fill_like(g, self, _number(fill_value), dtype_, "aten::full_like")


def _new_factory(fill_value: int, name: str):
    def symbolic(g, self: Value, size: Value, dtype: Value | None = None, *_: Value) -> Value:
        dtype_ = _result_dtype(g, dtype, self.type().dtype())
        return _fill(g, _shape(g, size), fill_value, dtype_, f"aten::{name}")
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, SymInt[] size, *, ScalarType? dtype=None, "
                        "Layout? layout=None, Device? device=None, bool? pin_memory=None) "
                        f"-> Tensor\n\n{fill_value}s of ``self``'s dtype.")
    return symbolic


for _name, _value in (("new_zeros", 0), ("new_ones", 1), ("new_empty", 0)):
    pack.symbolic(f"aten::{_name}", since=7)(_new_factory(_value, _name))


@pack.symbolic("aten::new_full", since=7)
def new_full(g, self: Value, size: Value, fill_value: Value, dtype: Value | None = None,
             *_: Value) -> Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    dtype_ = _result_dtype(g, dtype, self.type().dtype())
    return _fill(g, _shape(g, size), _number(fill_value), dtype_, "aten::new_full")


def fill(g, self: Value, value: Value) -> Value:
    """fill.Tensor(Tensor self, Tensor value) -> Tensor
    fill.Scalar(Tensor self, Scalar value) -> Tensor
    fill_.Tensor(Tensor(a!) self, Tensor value) -> Tensor(a!)

    ``self.fill_(value)`` (a number or a 0-d tensor) as a new tensor of ``self``'s shape.
    Removing mutation turns ``fill_`` into ``fill`` unless it writes to a graph input."""
    return _fill(g, _shape_of(g, self), _number(value), self.type().dtype() or torch.float32,
                 "aten::fill")


pack.alias(fill, "aten::fill", "aten::fill_", since=7)


@pack.symbolic("aten::zero_", since=7)
def zero_(g, self: Value) -> Value:
    """zero_(Tensor(a!) self) -> Tensor(a!)

    In-place zeroing of a graph input (elsewhere it becomes zeros_like)."""
    return _fill(g, _shape_of(g, self), 0, self.type().dtype() or torch.float32, "aten::zero_")


# -- scalar_tensor / tensor / as_tensor --------------------------------------------------
@pack.symbolic("aten::scalar_tensor", since=7)
def scalar_tensor(g, s: Value, dtype: Value | None = None, *_: Value) -> Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    value = _number(s)
    dtype_ = _result_dtype(g, dtype, None)
    if isinstance(value, Value):
        return sh.cast_to(g, value, dtype_)
    return g.constant(torch.tensor(value, dtype=dtype_))


@pack.symbolic("aten::tensor", since=7)
def tensor(g, data: Value, dtype: Value | None = None, *_: Value) -> Value:
    """tensor(t[] data, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor
    tensor.int(int t, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor
    tensor.bool(bool t, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor
    and the overloads tensor.float, tensor.complex

    ``torch.tensor(data)`` in scripted code: a constant, or the list/number cast."""
    explicit = None if dtype is None or sh._is_none(dtype) else _result_dtype(g, dtype, None)
    if data.is_const:
        return g.constant(torch.tensor(data.const, dtype=explicit or _out_dtype(g)))
    if sh._is_packed_list(data):
        data = _materialize(g, data, _inferred(*sh._unpack_list(data)))
    return sh.cast_to(g, data, explicit or _out_dtype(g) or _inferred(data))


@pack.symbolic("aten::as_tensor", since=7)
def as_tensor(g, data: Value, dtype: Value | None = None, *_: Value) -> Value:
    """as_tensor(Tensor(a) data, *, ScalarType? dtype=None, Device? device=None) -> Tensor(b|a)

    ``torch.as_tensor``: a tensor keeps its data (cast to ``dtype``); lists as :func:`tensor`."""
    if not sh._is_tensor(data):
        return tensor(g, data, dtype)
    return data if sh._is_none(dtype) else sh.cast_to(g, data, _result_dtype(g, dtype, None))


# -- ranges ----------------------------------------------------------------------------
def _as_scalar(g, value: Any, dtype: torch.dtype) -> Value:
    if isinstance(value, Value):
        return sh.cast_to(g, value, dtype)
    return g.constant(torch.tensor(value, dtype=dtype))


def range_values(g, start: Any, end: Any, step: Any, dtype: torch.dtype, op: str) -> Value:
    """``arange(start, end, step)`` in ``dtype``: a constant when the bounds are, else Range
    (opset 11) or, at 9 and 10, the indices NonZero finds in a tensor of ones. For an
    integer ``dtype`` the bounds and step are truncated to integers first, as in eager
    (``arange(2, 8.5, 1.5, dtype=torch.int64)`` is ``[2, ..., 7]``)."""
    if not any(isinstance(v, Value) for v in (start, end, step)):
        return g.constant(torch.arange(start, end, step, dtype=dtype))
    compute = dtype if dtype.is_floating_point else torch.int64
    start, end, step = (_as_scalar(g, v, compute) for v in (start, end, step))
    if g.opset >= 11:
        out = g.op("Range", _as_scalar(g, start, compute), _as_scalar(g, end, compute),
                   _as_scalar(g, step, compute)).setType(Type.tensor(compute, [None]))
        return sh.cast_to(g, out, dtype)
    if g.opset < 9:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 9, "bounds computed at run time")
    double = torch.float64
    span = g.op("Sub", _as_scalar(g, end, double), _as_scalar(g, start, double))
    count = g.op("Ceil", g.op("Div", span, _as_scalar(g, step, double)))
    count = g.op("Max", count, g.constant(torch.tensor(0.0, dtype=double)))
    count = g.op("Cast", count, to_i=JitScalarType.INT64.onnx_type())
    ones = g.op("ConstantOfShape", sh._unsqueeze_helper(g, count, [0]),
                value_t=torch.tensor([1], dtype=torch.int64))
    index = sh._squeeze_helper(g, g.op("NonZero", ones), [0])
    index = g.op("Cast", index, to_i=JitScalarType.from_dtype(compute).onnx_type())
    out = g.op("Add", g.op("Mul", index, _as_scalar(g, step, compute)),
               _as_scalar(g, start, compute)).setType(Type.tensor(compute, [None]))
    return sh.cast_to(g, out, dtype)


def arange(g, *args: Value) -> Value:
    """arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    ``arange(end)``, ``arange(start, end)`` or ``arange(start, end, step)``, each followed by
    ``dtype, layout, device, pin_memory``; or the ``out=`` forms ``(end)`` and
    ``(start, end, step)`` (the walker writes ``out``; its dtype is the traced one).
    Registered at 7 and 11 (Range)."""
    out_form = len(args) in (1, 3)
    numbers = [_number(v) for v in (args if out_form else args[:-4])]
    start, end, step = (0, numbers[0], 1) if len(numbers) == 1 else (
        (*numbers, 1) if len(numbers) == 2 else numbers)
    dtype = _result_dtype(g, None if out_form else args[-4], _inferred(start, end, step))
    _sized_by(g, start, end, step)
    return range_values(g, start, end, step, dtype, "aten::arange")


@sh.parse_args("v", "i")
def _dim_arange(g, like: Value, dim: int) -> Value:
    """_dim_arange(Tensor like, int dim) -> Tensor

    ``arange(like.size(dim))``. Registered at 7 and 11 (Range)."""
    rank = like.type().dim()
    axis = dim % rank if dim < 0 and rank is not None else dim
    size = g.op("Gather", g.op("Shape", like), g.constant(torch.tensor(axis)), axis_i=0)
    return range_values(g, 0, size.setType(Type.tensor(torch.int64, ())), 1, torch.int64,
                  "aten::_dim_arange")


def linspace(g, start: Value, end: Value, steps: Value, dtype: Value | None = None,
             *_: Value) -> Value:
    """linspace.Tensor_Tensor(Tensor start, Tensor end, int steps, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    linspace.Tensor_Scalar(Tensor start, Scalar end, int steps, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    linspace.Scalar_Tensor(Scalar start, Tensor end, int steps, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    A constant for constant bounds; else ``start + i * (end - start) / (steps - 1)`` over
    a Range (opset 11; at 9 and 10 the indices NonZero finds in a tensor of ones)."""
    first, last, count = _number(start), _number(end), _number(steps)
    dtype_ = _result_dtype(g, dtype, None)
    if not any(isinstance(v, Value) for v in (first, last, count)):
        return g.constant(torch.linspace(first, last, count, dtype=dtype_))
    double = torch.float64
    index = range_values(g, 0, count, 1, double, "aten::linspace")
    intervals = g.op("Max", g.op("Sub", _as_scalar(g, count, double), _as_scalar(g, 1, double)),
                     _as_scalar(g, 1, double))
    first_d = _as_scalar(g, first, double)
    width = g.op("Div", g.op("Sub", _as_scalar(g, last, double), first_d), intervals)
    out = g.op("Add", g.op("Mul", index, width), first_d).setType(Type.tensor(double, [None]))
    return sh.cast_to(g, out, dtype_)


for _since in (7, 11):
    pack.symbolic("aten::arange", since=_since)(arange)
    pack.symbolic("aten::_dim_arange", since=_since)(_dim_arange)
pack.symbolic("aten::linspace", since=7)(linspace)


@pack.symbolic("aten::eye", since=7)
def eye(g, n: Value, *args: Value) -> Value:
    """eye(SymInt n, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    eye.m(SymInt n, SymInt m, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    ``eye(n)`` / ``eye(n, m)``: a constant, or EyeLike over zeros when sizes are dynamic."""
    rows = _number(n)
    cols = _number(args[0]) if len(args) == 5 else rows
    dtype = _result_dtype(g, args[-4], None)
    if not isinstance(rows, Value) and not isinstance(cols, Value):
        return g.constant(torch.eye(rows, cols, dtype=dtype))
    if g.opset < 9:
        sh._onnx_opset_unsupported_detailed("aten::eye", g.opset, 9, "sizes computed at run time")
    _sized_by(g, rows, cols)
    shape = g.op("Concat", *[sh._unsqueeze_helper(g, _as_scalar(g, v, torch.int64), [0])
                             for v in (rows, cols)], axis_i=0)
    return g.op("EyeLike", _fill(g, shape, 0, dtype, "aten::eye"))


# -- random tensors ---------------------------------------------------------------------
def _random(g, kind: str, shape: Shape, dtype: torch.dtype) -> Value:
    """RandomUniform/RandomNormal of a static shape, or their Like form over zeros."""
    onnx_dtype = JitScalarType.from_dtype(dtype).onnx_type()
    if isinstance(shape, Value):
        return g.op(f"{kind}Like", _fill(g, shape, 0, dtype, f"aten::{kind}"), dtype_i=onnx_dtype)
    return g.op(kind, shape_i=shape, dtype_i=onnx_dtype)


def _random_factory(kind: str, name: str):
    def symbolic(g, size: Value, *args: Value) -> Value:
        # (size, [generator,] dtype, layout, device, pin_memory)
        return _random(g, kind, _shape(g, size), _result_dtype(g, args[-4], None))
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
                        "Device? device=None, bool? pin_memory=None) -> Tensor\n"
                        "and its generator overload\n\n"
                        f"As ONNX {kind}.")
    return symbolic


def _random_like_factory(kind: str, name: str):
    def symbolic(g, self: Value, *args: Value) -> Value:
        # (self, [generator,] dtype, layout, device, pin_memory, memory_format)
        dtype = _result_dtype(g, args[-5], self.type().dtype())
        return g.op(f"{kind}Like", self, dtype_i=JitScalarType.from_dtype(dtype).onnx_type())
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
                        "Device? device=None, bool? pin_memory=None, "
                        "MemoryFormat? memory_format=None) -> Tensor\n"
                        "and its generator overload\n\n"
                        f"As ONNX {kind}Like.")
    return symbolic


pack.symbolic("aten::rand", since=7)(_random_factory("RandomUniform", "rand"))
pack.symbolic("aten::randn", since=7)(_random_factory("RandomNormal", "randn"))
pack.symbolic("aten::rand_like", since=7)(_random_like_factory("RandomUniform", "rand_like"))
pack.symbolic("aten::randn_like", since=7)(_random_like_factory("RandomNormal", "randn_like"))


@pack.symbolic("aten::randint", since=7)
def randint(g, *args: Value) -> Value:
    """randint(SymInt high, SymInt[] size, *, ScalarType? dtype=4, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    randint.generator(SymInt high, SymInt[] size, *, Generator? generator, ScalarType? dtype=4, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=4, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
    randint.low_generator(SymInt low, SymInt high, SymInt[] size, *, Generator? generator, ScalarType? dtype=4, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    ``randint([low,] high, size, ...)``: Floor of RandomUniform over [low, high), cast."""
    sizes = [i for i, v in enumerate(args) if v.type().kind() == "ListType"]
    bounds = [_number(v) for v in args[:sizes[0]]]
    if any(isinstance(b, Value) for b in bounds):
        sh._unimplemented("aten::randint", "bounds computed at run time")
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    shape = _shape(g, args[sizes[0]])
    dtype = _result_dtype(g, args[-4], torch.int64)
    if isinstance(shape, Value):
        uniform = g.op("RandomUniformLike", _fill(g, shape, 0.0, torch.float32, "aten::randint"),
                       low_f=low, high_f=high)
    else:
        uniform = g.op("RandomUniform", shape_i=shape, low_f=low, high_f=high)
    return g.op("Cast", g.op("Floor", uniform), to_i=JitScalarType.from_dtype(dtype).onnx_type())


def _probabilities(g, self: Value, args: tuple[Value, ...]) -> Value:
    """``bernoulli(self)``'s probabilities: ``self``, or ``p`` in its shape for
    ``bernoulli(self, p)``."""
    if len(args) < 2:
        return self
    return _fill(g, _shape_of(g, self), _number(args[0]), self.type().dtype() or torch.float32,
                 "aten::bernoulli")


@pack.symbolic("aten::bernoulli", since=9)
def bernoulli(g, self: Value, *args: Value) -> Value:
    """bernoulli(Tensor self, *, Generator? generator=None) -> Tensor
    bernoulli.Tensor(Tensor self, Tensor p, *, Generator? generator=None) -> Tensor
    bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor

    A uniform sample below the probability. Not ONNX Bernoulli (opset 15): ONNX Runtime's
    kernel draws 1 with probability 1 - p (docs/parity.md)."""
    probs = _probabilities(g, self, args)
    hit = g.op("Less", g.op("RandomUniformLike", probs), probs)
    return sh.cast_to(g, hit, self.type().dtype() or torch.float32)


@pack.symbolic("aten::normal", since=7)
def normal(g, mean: Value, std: Value, *args: Value) -> Value:
    """normal.Tensor_float(Tensor mean, float std=1., *, Generator? generator=None) -> Tensor
    normal.float_Tensor(float mean, Tensor std, *, Generator? generator=None) -> Tensor
    normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor

    ``normal(mean, std)`` with tensor or number operands (RandomNormalLike of their
    broadcast, scaled and shifted), or ``normal(mean, std, size)``: RandomNormal, or
    RandomNormalLike of zeros for a size computed at run time (``x.normal_()`` comes as
    ``normal(mean, std, x's shape)``)."""
    if len(args) > 1:  # (size, generator, dtype, layout, device, pin_memory)
        dtype = _result_dtype(g, args[2], None)
        shape = _shape(g, args[0])
        moments = {"mean_f": sh._get_const(mean, "f", "mean"),
                   "scale_f": sh._get_const(std, "f", "std"),
                   "dtype_i": JitScalarType.from_dtype(dtype).onnx_type()}
        if isinstance(shape, Value):
            return g.op("RandomNormalLike", _fill(g, shape, 0, dtype, "aten::normal"), **moments)
        return g.op("RandomNormal", shape_i=shape, **moments)
    tensors = [v for v in (mean, std) if sh._is_tensor(v) and not v.is_const]
    dtype = tensors[0].type().dtype() or torch.float32
    like = tensors[0] if len(tensors) == 1 else g.op("Add", mean, std)
    noise = g.op("RandomNormalLike", like, dtype_i=JitScalarType.from_dtype(dtype).onnx_type())
    scale, shift = (sh.cast_to(g, g.as_value(v), dtype) for v in (std, mean))
    return g.op("Add", g.op("Mul", noise, scale), shift)


@pack.symbolic("aten::randint_like", since=7)
def randint_like(g, self: Value, *args: Value) -> Value:
    """randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor
    randint_like.Tensor(Tensor self, Tensor high, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor
    randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor
    and the overloads randint_like.generator, randint_like.Tensor_generator, randint_like.low_generator_dtype

    ``randint_like(self, [low,] high)``: Floor of RandomUniformLike over [low, high), cast."""
    bounds = [_number(v) for v in args[:-5]]  # then dtype, layout, device, pin_memory, format
    if any(isinstance(b, Value) for b in bounds):
        sh._unimplemented("aten::randint_like", "bounds computed at run time")
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    dtype = _result_dtype(g, args[-5], self.type().dtype())
    uniform = g.op("RandomUniformLike", self, low_f=low, high_f=high,
                   dtype_i=JitScalarType.from_dtype(torch.float32).onnx_type())
    return g.op("Cast", g.op("Floor", uniform), to_i=JitScalarType.from_dtype(dtype).onnx_type())


@pack.symbolic("aten::multinomial", since=7)
@sh.parse_args("v", "i", "b", "none")
def multinomial(g, self: Value, num_samples: int, replacement: bool,
                generator: Value | None = None) -> Value:
    """multinomial(Tensor self, SymInt num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor

    ONNX Multinomial over log-probabilities; it samples with replacement only."""
    if not replacement and num_samples > 1:
        sh._unimplemented("aten::multinomial",
                          "sampling without replacement (ONNX Multinomial always replaces)")
    rank = self.type().dim()
    logits = g.op("Log", self)
    if rank == 1:
        logits = sh._unsqueeze_helper(g, logits, [0])
    out = g.op("Multinomial", logits, sample_size_i=num_samples,
               dtype_i=JitScalarType.INT64.onnx_type())
    return sh._squeeze_helper(g, out, [0]) if rank == 1 else out
