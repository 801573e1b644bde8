"""TorchScript numbers and type queries in scripted code.

Scripted graphs compute with Python ``int``/``float``/``bool`` values (``n + 1``,
``x.dim() == 4``, ``min(a, b)``) and ask tensors about themselves
(``x.dtype``, ``x.device``, ``x is None``). Constants fold at conversion time, so an
``if`` on a known condition keeps one branch; run-time numbers are 0-d tensors
(int64, float32, bool).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.errors import OnnxExporterError
from oxport.ir import Type, Value
from oxport.opsets import control_flow as cf
from oxport.types import JitScalarType

pack = OpPack("oxport.scalars", cases="oxport.opsets.cases.scalars")

def _const(value: Value) -> Any:
    """The Python number a value holds, or None."""
    const = sh._scalar(value)
    return const if isinstance(const, (bool, int, float)) else None


def _number(g: Any, value: Value, dtype: torch.dtype) -> Value:
    return sh.cast_to(g, value, dtype)


def _result_dtype(a: Value, b: Value) -> torch.dtype:
    dtypes = {v.type().dtype() for v in (a, b)}
    if any(isinstance(_const(v), float) for v in (a, b)) or any(
            d is not None and d.is_floating_point for d in dtypes):
        return torch.float32
    return torch.int64


def _typed(value: Value, dtype: torch.dtype) -> Value:
    return value.setType(Type.tensor(dtype, ()))


# -- comparisons -----------------------------------------------------------------------
def _comparison(name: str, op_type: str, py: Callable[[Any, Any], bool]):
    def symbolic(g, a: Value, b: Value) -> Value:
        ca, cb = _const(a), _const(b)
        if ca is not None and cb is not None:
            return g.python_constant(bool(py(ca, cb)))
        dtype = _result_dtype(a, b)
        if op_type != "Equal" and op_type != "NotEqual" and g.opset < 9:
            dtype = torch.float64  # Less and Greater take integers from opset 9
        x, y = _number(g, a, dtype), _number(g, b, dtype)
        if op_type == "LessOrEqual" and g.opset < 12:
            return _typed(g.op("Not", g.op("Greater", x, y)), torch.bool)
        if op_type == "GreaterOrEqual" and g.opset < 12:
            return _typed(g.op("Not", g.op("Less", x, y)), torch.bool)
        if op_type == "NotEqual":
            return _typed(g.op("Not", g.op("Equal", x, y)), torch.bool)
        return _typed(g.op(op_type, x, y), torch.bool)
    symbolic.__name__ = f"{name}_number"
    symbolic.__doc__ = (f"{name}.int(int a, int b) -> bool\n\n"
                        f"ONNX {op_type} of TorchScript numbers (folded when constant).")
    return symbolic


_COMPARISONS = {"eq": ("Equal", operator.eq), "ne": ("NotEqual", operator.ne),
                "lt": ("Less", operator.lt), "gt": ("Greater", operator.gt),
                "le": ("LessOrEqual", operator.le), "ge": ("GreaterOrEqual", operator.ge)}
for _name, (_op, _py) in _COMPARISONS.items():
    _fn = _comparison(_name, _op, _py)
    pack.symbolic(f"aten::{_name}.int", since=7)(_fn)


def _constant_comparison(name: str, overload: str, py: Callable[[Any, Any], bool],
                         example: str):
    def symbolic(g, a: Value, b: Value) -> Value:
        if not (a.is_const and b.is_const):
            sh._unimplemented(f"aten::{name}.{overload}",
                              f"comparing {overload}s known only at run time")
        return g.python_constant(bool(py(a.const, b.const)))
    symbolic.__name__ = f"{name}_{overload}"
    kind = {"str": "str", "device": "Device"}[overload]
    symbolic.__doc__ = (f"{name}.{overload}({kind} a, {kind} b) -> bool\n\n"
                        f"On constant {overload}s (``{example}``), folded.")
    return symbolic


for _name, _py in (("eq", operator.eq), ("ne", operator.ne)):
    pack.symbolic(f"aten::{_name}.str", since=7)(
        _constant_comparison(_name, "str", _py, "if mode == 'x':"))
    pack.symbolic(f"aten::{_name}.device", since=7)(  # an export runs on the CPU
        _constant_comparison(_name, "device", _py, "if x.device == torch.device('cpu'):"))


# -- arithmetic ------------------------------------------------------------------------
def _arithmetic(name: str, op_type: str, py: Callable[[Any, Any], Any]):
    def symbolic(g, a: Value, b: Value) -> Value:
        ca, cb = _const(a), _const(b)
        if ca is not None and cb is not None:
            return g.python_constant(py(ca, cb))
        dtype = _result_dtype(a, b)
        return _typed(g.op(op_type, _number(g, a, dtype), _number(g, b, dtype)), dtype)
    symbolic.__name__ = f"{name}_number"
    symbolic.__doc__ = (f"{name}.int(int a, int b) -> int\n\n"
                        f"ONNX {op_type} of TorchScript numbers (folded when constant).")
    return symbolic


for _name, (_op, _py) in {"add": ("Add", operator.add), "sub": ("Sub", operator.sub),
                          "mul": ("Mul", operator.mul)}.items():
    _fn = _arithmetic(_name, _op, _py)
    pack.symbolic(f"aten::{_name}.int", since=7)(_fn)


@pack.symbolic("aten::div.int", since=7)
def div_number(g, a: Value, b: Value) -> Value:
    """div.int(int a, int b) -> float

    ``a / b`` on numbers: always a float."""
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None and cb != 0:
        return g.python_constant(ca / cb)
    f = torch.float32
    return _typed(g.op("Div", _number(g, a, f), _number(g, b, f)), f)


@pack.symbolic("aten::floordiv.int", since=7)
def floordiv_number(g, a: Value, b: Value) -> Value:
    """floordiv.int(int a, int b) -> int

    ``a // b`` on numbers, rounding toward minus infinity as Python does."""
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None and cb != 0:
        return g.python_constant(ca // cb)
    dtype = _result_dtype(a, b)
    quotient = g.op("Div", _number(g, a, torch.float64), _number(g, b, torch.float64))
    return _typed(sh.cast_to(g, g.op("Floor", quotient), dtype), dtype)


@pack.symbolic("aten::remainder.int", since=10)
def remainder_number(g, a: Value, b: Value) -> Value:
    """remainder.int(int a, int b) -> int

    ``a % b`` on numbers (the sign of ``b``, as Python)."""
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None and cb != 0:
        return g.python_constant(ca % cb)
    dtype = _result_dtype(a, b)
    x, y = _number(g, a, dtype), _number(g, b, dtype)
    if dtype == torch.int64:
        return _typed(g.op("Mod", x, y, fmod_i=0), dtype)
    floor = g.op("Floor", g.op("Div", x, y))
    return _typed(g.op("Sub", x, g.op("Mul", floor, y)), dtype)


@pack.symbolic("aten::neg.int", since=7)
def neg_number(g, a: Value) -> Value:
    """neg.int(int a) -> int"""
    const = _const(a)
    if const is not None:
        return g.python_constant(-const)
    return _typed(g.op("Neg", a), a.type().dtype() or torch.int64)


def _rounding(name: str, op_type: str, py: Callable[[float], int]):
    def symbolic(g, a: Value) -> Value:
        const = _const(a)
        if const is not None:
            return g.python_constant(py(const))
        rounded = g.op(op_type, _number(g, a, torch.float32))
        return _typed(sh.cast_to(g, rounded, torch.int64), torch.int64)
    symbolic.__name__ = f"{name}_number"
    symbolic.__doc__ = (f"{name}.float(float a) -> int\n\n"
                        f"``math.{name}`` of a float: an int (folded when constant).")
    return symbolic


pack.symbolic("aten::ceil.float", since=7)(_rounding("ceil", "Ceil", math.ceil))
pack.symbolic("aten::floor.float", since=7)(_rounding("floor", "Floor", math.floor))


@pack.symbolic("aten::__range_length", since=7)
def range_length(g, low: Value, high: Value, step: Value) -> Value:
    """__range_length(int lo, int hi, int step) -> int

    How many values ``range(low, high, step)`` yields (the step must be a constant)."""
    lo, hi, st = _const(low), _const(high), _const(step)
    if st is None or st == 0:
        sh._unimplemented("aten::__range_length", "a range step computed at run time")
    if lo is not None and hi is not None:
        return g.python_constant(len(range(lo, hi, st)))
    int64 = torch.int64
    span = g.op("Sub", *((_number(g, high, int64), _number(g, low, int64)) if st > 0
                         else (_number(g, low, int64), _number(g, high, int64))))
    zero = g.constant(torch.tensor(0, dtype=int64))
    compute = torch.float32 if g.opset < 12 else int64  # Max takes integers from opset 12
    span = sh.cast_to(g, g.op("Max", sh.cast_to(g, span, compute), sh.cast_to(g, zero, compute)),
                      int64)
    rounded = g.op("Add", span, g.constant(torch.tensor(abs(st) - 1, dtype=int64)))
    return _typed(g.op("Div", rounded, g.constant(torch.tensor(abs(st), dtype=int64))), int64)


@pack.symbolic("aten::__derive_index", since=7)
def derive_index(g, index: Value, start: Value, step: Value) -> Value:
    """__derive_index(int index, int start, int step) -> int

    The ``index``-th value of ``range(start, ..., step)``: ``start + index * step``."""
    i, a, st = _const(index), _const(start), _const(step)
    if i is not None and a is not None and st is not None:
        return g.python_constant(a + i * st)
    int64 = torch.int64
    scaled = g.op("Mul", _number(g, index, int64), _number(g, step, int64))
    return _typed(g.op("Add", _number(g, start, int64), scaled), int64)


@pack.symbolic("aten::__contains__.int_list", since=7)
def contains(g, values: Value, item: Value) -> Value:
    """__contains__.int_list(int[] l, int item) -> bool

    ``item in [a, b, ...]`` (folded when everything is constant)."""
    const_item = _const(item)
    const_values = sh._maybe_get_const(values, "is")
    if const_item is not None and not isinstance(const_values, Value):
        return g.python_constant(const_item in const_values)
    if sh._is_packed_list(values):
        values = g.graph.materialize(values)
    found = g.op("Equal", sh.cast_to(g, values, torch.int64), _number(g, item, torch.int64))
    hits = sh.reduce_helper(g, "ReduceMax", sh.cast_to(g, found, torch.int64), [0],
                            keepdims_i=0)
    return _typed(sh.cast_to(g, hits, torch.bool), torch.bool)


@pack.symbolic("prim::Uninitialized", since=7)
def uninitialized(g) -> tuple[Value, ...]:
    """Uninitialized() -> Any

    What a path that returns early or raises gives the variables it leaves unset. An `if`
    output gets a placeholder of the other branch's type there (the flag TorchScript adds
    for the early return never picks it); anything else that reads it fails."""
    def materialize(graph: Any) -> Value:
        raise OnnxExporterError(
            f"A value that is not set on every path (one that returns early or raises "
            f"leaves it unset) is used (at {g.source or 'unknown'}); ONNX has no "
            "uninitialized values.")

    return tuple(cf.mark_uninitialized(g.graph.deferred(Type.of(out.type()), materialize))
                 for out in g.original_node.outputs())


def _min_max(op_type: str, py: Callable[..., Any]):
    def symbolic(g, *args: Value) -> Value:
        if len(args) == 1:  # min(list)
            items = sh._unpack_list(args[0]) if sh._is_packed_list(args[0]) else None
            if items is None:
                values = args[0]
                reduced = sh.reduce_helper(g, f"Reduce{op_type}", values, [0], keepdims_i=0)
                return _typed(reduced, values.type().dtype() or torch.int64)
            args = tuple(items)
        consts = [_const(a) for a in args]
        if all(c is not None for c in consts):
            return g.python_constant(py(consts))
        dtype = max((_result_dtype(a, a) for a in args), key=lambda d: d.is_floating_point)
        compute = torch.float32 if g.opset < 12 and dtype == torch.int64 else dtype
        out = g.op(op_type, *(_number(g, a, compute) for a in args))  # ints from opset 12
        return _typed(sh.cast_to(g, out, dtype), dtype)
    symbolic.__name__ = f"prim_{op_type.lower()}"
    name = op_type.lower()
    symbolic.__doc__ = (f"{name}(Scalar a, Scalar b) -> Scalar\n"
                        f"{name}.int(int a, int b) -> int\n"
                        f"{name}.self_int(int[] self) -> int\n"
                        "and the other int/float/bool and list overloads\n\n"
                        f"``{name}(a, b)`` or ``{name}(list)`` on numbers.")
    return symbolic


pack.symbolic("prim::min", since=7)(_min_max("Min", min))
pack.symbolic("prim::max", since=7)(_min_max("Max", max))


# -- bools -------------------------------------------------------------------------------
@pack.symbolic("aten::Bool", since=7)
def to_bool(g, value: Value) -> Value:
    """Bool.Tensor(Tensor a) -> bool

    ``bool(x)`` for a one-element tensor or a number: a 0-d bool."""
    const = _const(value)
    if const is not None:
        return g.python_constant(bool(const))
    out = sh.cast_to(g, value, torch.bool)
    if out.type().dim() != 0:
        out = sh._reshape_helper(g, out, [])
    return _typed(out, torch.bool)


@pack.symbolic("aten::__not__", since=7)
def not_(g, value: Value) -> Value:
    """__not__(bool self) -> bool"""
    const = _const(value)
    if const is not None:
        return g.python_constant(not const)
    return _typed(g.op("Not", sh.cast_to(g, value, torch.bool)), torch.bool)


def _logical(op_type: str, py: Callable[[bool, bool], bool]):
    def symbolic(g, a: Value, b: Value) -> Value:
        ca, cb = _const(a), _const(b)
        if ca is not None and cb is not None:
            return g.python_constant(py(bool(ca), bool(cb)))
        return _typed(g.op(op_type, sh.cast_to(g, a, torch.bool),
                           sh.cast_to(g, b, torch.bool)), torch.bool)
    symbolic.__name__ = f"{op_type.lower()}_bool"
    symbolic.__doc__ = (f"__{op_type.lower()}__.bool(bool a, bool b) -> bool\n\n"
                        f"``a {op_type.lower()} b`` on bools.")
    return symbolic


pack.symbolic("aten::__and__.bool", since=7)(_logical("And", operator.and_))
pack.symbolic("aten::__or__.bool", since=7)(_logical("Or", operator.or_))


# -- conversions and type queries --------------------------------------------------------
@pack.symbolic("aten::ScalarImplicit", since=7)
def scalar_implicit(g, value: Value) -> Value:
    """IntImplicit(Tensor a) -> int
    ScalarImplicit(Tensor a) -> Scalar

    A one-element tensor used where a number is expected (``IntImplicit``: an int)."""
    return value


pack.alias(scalar_implicit, "aten::IntImplicit", since=7)


@pack.symbolic("aten::item", since=7)
def item(g, value: Value) -> Value:
    """item(Tensor self) -> Scalar

    ``x.item()`` in scripted code: the one element as a 0-d tensor."""
    if value.type().dim() == 0:
        return value
    return sh._reshape_helper(g, value, []).setType(Type.tensor(value.type().dtype(), ()))


@pack.symbolic("prim::unchecked_cast", since=7)
def unchecked_cast(g, value: Value) -> Value:
    """unchecked_cast(t x) -> t

    A refinement of an Optional type: the value itself, or the tensor an ONNX Optional
    holds (OptionalGetElement)."""
    if cf.is_runtime_optional(value):
        return g.op("OptionalGetElement", value).setType(Type.tensor(cf.held_dtype(value.type())))
    return value


@pack.symbolic("prim::dtype", since=7)
def dtype_of(g, value: Value) -> Value:
    """dtype(Tensor a) -> int

    ``x.dtype`` as the ScalarType number TorchScript uses (known at export)."""
    dtype = value.type().dtype()
    if dtype is None:
        sh._unimplemented("prim::dtype", "a tensor whose dtype is unknown at export")
    return g.python_constant(int(JitScalarType.from_dtype(dtype)))


@pack.symbolic("prim::device", since=7)
def device_of(g, value: Value) -> Value:
    """device(Tensor a) -> Device

    ``x.device``: an ONNX model has no device; the export runs on the CPU."""
    return g.python_constant(torch.device("cpu"))


@pack.symbolic("aten::dim", since=7)
def dim(g, value: Value) -> Value:
    """dim(Tensor self) -> int

    ``x.dim()``: a constant when the rank is known, else the length of the shape."""
    rank = value.type().dim()
    if rank is not None:
        return g.python_constant(rank)
    return _typed(g.op("Size", g.op("Shape", value)), torch.int64)


def _is_none(value: Value) -> bool | None:
    """Whether a value is None (None when that is unknown at export)."""
    if sh._is_none(value):
        return True
    if value.type().kind() == "OptionalType":
        return None
    return False


def _identical(op: str, a: Value, b: Value) -> bool:
    """``a is b`` at export: None checks, and whether two values are the same graph value
    (distinct values are distinct tensors in the exported model)."""
    none_a, none_b = _is_none(a), _is_none(b)
    if none_a is None or none_b is None:
        sh._unimplemented(op, "an Optional value whose None-ness is known only at run time")
    if none_a or none_b:
        return bool(none_a and none_b)
    return a is b


def _has_element(g, a: Value, b: Value) -> Value | None:
    """Whether the ONNX Optional in ``x is None`` (either way round) holds a tensor; None
    when neither side is such an Optional."""
    for optional, other in ((a, b), (b, a)):
        if cf.is_runtime_optional(optional) and sh._is_none(other):
            return _typed(g.op("OptionalHasElement", optional), torch.bool)
    return None


@pack.symbolic("aten::__is__", since=7)
def is_(g, a: Value, b: Value) -> Value:
    """__is__(t1 self, t2 obj) -> bool

    ``a is b``: ``x is None`` checks and ``query is key`` identity checks fold; on a
    variable None on some paths only, ``not OptionalHasElement``."""
    has = _has_element(g, a, b)
    if has is not None:
        return _typed(g.op("Not", has), torch.bool)
    return g.python_constant(_identical("aten::__is__", a, b))


@pack.symbolic("aten::__isnot__", since=7)
def is_not(g, a: Value, b: Value) -> Value:
    """__isnot__(t1 self, t2 obj) -> bool

    ``a is not b``: ``x is not None`` checks and identity checks fold; on a variable
    None on some paths only, ``OptionalHasElement``."""
    has = _has_element(g, a, b)
    if has is not None:
        return has
    return g.python_constant(not _identical("aten::__isnot__", a, b))


def _known_false(name: str, what: str):
    def symbolic(g, *args: Value) -> Value:
        return g.python_constant(False)
    symbolic.__name__ = name.split("::")[1]
    argument = "" if name.startswith("aten::") else "Tensor a"
    symbolic.__doc__ = (f"{name.split('::')[1]}({argument}) -> bool\n\n"
                        f"``{what}``: False in an exported graph.")
    return symbolic


for _name, _what in {"aten::is_grad_enabled": "torch.is_grad_enabled() (ONNX has no autograd)",
                     "aten::is_autocast_enabled": "torch.is_autocast_enabled()",
                     "prim::requires_grad": "x.requires_grad (ONNX has no autograd)",
                     "prim::is_nested": "x.is_nested (nested tensors have no ONNX form)",
                     "prim::is_cuda": "x.is_cuda (an ONNX model has no device)"}.items():
    pack.symbolic(_name, since=7)(_known_false(_name, _what))


@pack.symbolic("prim::type", since=7)
def device_type(g, device: Value) -> Value:
    """type(Device self) -> str

    ``x.device.type``: ``"cpu"`` (the device an export runs on)."""
    const = device.const if device.is_const else None
    return g.python_constant(const.type if isinstance(const, torch.device) else "cpu")


@pack.symbolic("aten::format", since=7)
def format_(g, template: Value, *args: Value) -> Value:
    """format(str self, ...) -> str

    ``"...{}".format(...)`` on constants (messages in checks that fold away)."""
    if not template.is_const or not all(a.is_const for a in args):
        sh._unimplemented("aten::format", "formatting a string with values known only at run "
                          "time")
    return g.python_constant(template.const.format(*(a.const for a in args)))


@pack.symbolic("aten::add.str", since=7)
def add_str(g, a: Value, b: Value) -> Value:
    """add.str(str a, str b) -> str"""
    if not (a.is_const and b.is_const):
        sh._unimplemented("aten::add.str", "joining strings known only at run time")
    return g.python_constant(a.const + b.const)


@pack.symbolic("aten::__contains__.str_list", since=7)
def contains_str(g, values: Value, item: Value) -> Value:
    """__contains__.str_list(str[] l, str item) -> bool

    ``s in ["a", "b"]`` on constant strings."""
    items = sh._unpack_list(values) if sh._is_packed_list(values) else None
    if not item.is_const or (items is None and not values.is_const) or (
            items is not None and not all(i.is_const for i in items)):
        sh._unimplemented("aten::__contains__.str_list", "strings known only at run time")
    consts = [i.const for i in items] if items is not None else list(values.const)
    return g.python_constant(item.const in consts)


def _all_any(name: str, op_type: str, py: Callable[[list[bool]], bool]):
    def symbolic(g, values: Value) -> Value:
        items = sh._unpack_list(values) if sh._is_packed_list(values) else None
        if items is not None and all(_const(i) is not None for i in items):
            return g.python_constant(py([bool(_const(i)) for i in items]))
        flags = g.graph.materialize(values) if items is not None else values
        as_int = sh.cast_to(g, flags, torch.int64)
        compute = torch.float32 if g.opset < 18 and op_type == "ReduceMin" else torch.int64
        reduced = sh.reduce_helper(g, op_type, sh.cast_to(g, as_int, compute), [0],
                                   keepdims_i=0)
        return _typed(sh.cast_to(g, reduced, torch.bool), torch.bool)
    symbolic.__name__ = f"{name}_bool"
    symbolic.__doc__ = (f"{name}.bool(bool[] self) -> bool\n{name}.int(int[] self) -> bool\n\n"
                        f"``{name}([...])`` over bools or ints.")
    return symbolic


_all = pack.symbolic("aten::all.bool", since=7)(_all_any("all", "ReduceMin", all))
_any = pack.symbolic("aten::any.bool", since=7)(_all_any("any", "ReduceMax", any))
pack.alias(_all, "aten::all.int", since=7)
pack.alias(_any, "aten::any.int", since=7)


@pack.symbolic("aten::warn", since=7)
def warn(g, *args: Value, **attrs: Any) -> None:
    """warn(str message, int stacklevel=2) -> ()

    ``warnings.warn(...)`` in scripted code: no effect on the exported model."""
    return None
