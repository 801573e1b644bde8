"""Helpers for symbolic functions, compatible with torch.onnx's symbolic_helper module.

A symbolic written for torch.onnx keeps working once its imports point here::

    from oxport import symbolic_helper

    @symbolic_helper.parse_args("v", "f")
    def elu(g, input, alpha):
        return g.op("Elu", input, alpha_f=alpha)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from oxport.errors import SymbolicDeclined, SymbolicValueError
from oxport.ir import Type, Value
from oxport.types import JitScalarType

_DESCRIPTORS = ("v", "i", "is", "f", "fs", "b", "s", "t", "none")


def parse_args(*arg_descriptors: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Convert each positional argument after ``g`` by its descriptor.

    ``"v"`` keeps the Value; ``"i"``/``"f"``/``"b"``/``"s"``/``"t"`` read a constant int,
    float, bool, str or tensor; ``"is"``/``"fs"`` a constant list; ``"none"`` passes it as is.
    """
    for desc in arg_descriptors:
        if desc not in _DESCRIPTORS:
            raise ValueError(f"parse_args: unknown descriptor {desc!r}; use one of {_DESCRIPTORS}.")

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        names = fn.__code__.co_varnames[1:fn.__code__.co_argcount]

        @functools.wraps(fn)
        def wrapper(g: Any, *args: Any, **kwargs: Any) -> Any:
            if len(args) > len(arg_descriptors):
                # Trailing extra inputs (e.g. an out= argument) are dropped, as torch.onnx does.
                args = args[:len(arg_descriptors)]
            parsed = [
                _parse_arg(arg, desc, names[i] if i < len(names) else f"arg{i}", fn.__name__)
                for i, (arg, desc) in enumerate(zip(args, arg_descriptors))
            ]
            kwargs.pop("_outputs", None)
            return fn(g, *parsed, **kwargs)

        wrapper._oxport_descriptors = arg_descriptors  # type: ignore[attr-defined]
        return wrapper

    return decorator


def quantized_args(*arg_q_descriptors: bool, **_: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Accepted for compatibility; quantized tensors are handled by the quantized pack."""
    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn
    return decorator


def _parse_arg(value: Any, desc: str, arg_name: str = "", node_name: str = "") -> Any:
    if desc in ("v", "none"):
        return value
    if not isinstance(value, Value):
        return _convert(value, desc, arg_name, node_name)
    if value.is_const:
        return _convert(value.const, desc, arg_name, node_name)
    if _is_packed_list(value):
        items = []
        for item in _unpack_list(value):
            if not (isinstance(item, Value) and item.is_const):
                raise SymbolicValueError(
                    f"{node_name}: argument {arg_name!r} must be a constant list, but element "
                    f"{item!r} is computed at run time.", value)
            items.append(item.const)
        return _convert(items, desc, arg_name, node_name)
    raise SymbolicValueError(
        f"{node_name}: argument {arg_name!r} (descriptor {desc!r}) must be a constant, "
        "but it is computed at run time.", value)


def _convert(obj: Any, desc: str, arg_name: str, node_name: str) -> Any:
    if obj is None:
        return None
    if desc == "t":
        return obj if isinstance(obj, torch.Tensor) else torch.tensor(obj)
    if isinstance(obj, torch.Tensor):
        obj = obj.tolist()
    if desc in ("is", "fs"):
        if not isinstance(obj, (list, tuple)):
            obj = [obj]
        cast = int if desc == "is" else float
        return [cast(constant_item(x)) for x in obj]
    if isinstance(obj, (list, tuple)):
        if len(obj) != 1:
            raise SymbolicValueError(
                f"{node_name}: argument {arg_name!r} must be a scalar, got {obj!r}.")
        obj = obj[0]
    cast = {"i": int, "f": float, "b": bool, "s": str}[desc]
    return cast(constant_item(obj))


def constant_item(x: Any) -> Any:
    """The Python value of ``x``: a Value's constant, a tensor's item, else ``x`` itself."""
    if isinstance(x, Value):
        return x.const
    return x.item() if isinstance(x, torch.Tensor) else x


# -- questions about values -----------------------------------------------------
def _is_value(x: Any) -> bool:
    return isinstance(x, Value)


def _is_constant(value: Any) -> bool:
    return not _is_value(value) or value.is_const


def _is_none(x: Any) -> bool:
    if x is None:
        return True
    if isinstance(x, Value):
        return (x.is_const and x.const is None) or x.type().kind() == "NoneType"
    return False


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Value) and x.type().kind() == "TensorType"


def _is_list(x: Any) -> bool:
    return isinstance(x, Value) and x.type().kind() == "ListType"


def _is_tensor_list(x: Any) -> bool:
    return _is_list(x) and x.type().getElementType().kind() == "TensorType"


def _is_scalar_list(x: Any) -> bool:
    return _is_list(x) and x.type().getElementType().kind() in ("IntType", "FloatType", "BoolType")


def _is_packed_list(x: Any) -> bool:
    return isinstance(x, Value) and x.node().kind() == "prim::ListConstruct"


def _unpack_list(list_value: Value) -> list[Value]:
    if not _is_packed_list(list_value):
        raise SymbolicValueError(f"Expected a list built with prim::ListConstruct, got "
                                 f"{list_value.node().kind()}.", list_value)
    return list_value.node().inputs()


def _maybe_get_const(value: Any, desc: str) -> Any:
    """The constant in ``value`` converted by ``desc``, or ``value`` itself."""
    if isinstance(value, Value) and (value.is_const or (
            _is_packed_list(value) and all(v.is_const for v in _unpack_list(value)))):
        return _parse_arg(value, desc)
    return value


def _get_const(value: Any, desc: str, arg_name: str) -> Any:
    if not _is_constant(value) and not _is_packed_list(value):
        raise SymbolicValueError(f"{arg_name} must be a constant.", value)
    return _parse_arg(value, desc, arg_name)


def _maybe_get_scalar(value: Any) -> Any:
    const = _maybe_get_const(value, "t")
    if isinstance(const, torch.Tensor) and const.numel() == 1:
        return const
    return value


def _scalar(x: Any) -> Any:
    """The Python number in a one-element tensor (or constant Value), else None."""
    if isinstance(x, Value):
        x = x.const if x.is_const else None
    if isinstance(x, torch.Tensor):
        return x.item() if x.numel() == 1 else None
    if isinstance(x, (int, float, bool)):
        return x
    return None


def _if_scalar_type_as(self: Any, tensor: Value) -> Any:
    """A Python scalar as a tensor of ``tensor``'s dtype; Values pass through."""
    if isinstance(self, Value):
        return self
    dtype = tensor.type().dtype()
    if dtype is None:
        return self
    return torch.tensor(self, dtype=dtype)


def _get_tensor_rank(x: Value) -> int | None:
    return x.type().dim() if _is_value(x) and _is_tensor(x) else None


def _get_tensor_sizes(x: Value, allow_nonstatic: bool = True) -> list[int | None] | None:
    if not _is_tensor(x):
        return None
    sizes = x.type().varyingSizes()
    if sizes is not None and not allow_nonstatic and any(d is None for d in sizes):
        return None
    return sizes


def _get_tensor_dim_size(x: Value, dim: int) -> int | None:
    sizes = _get_tensor_sizes(x)
    return sizes[dim] if sizes is not None and -len(sizes) <= dim < len(sizes) else None


def _try_get_scalar_type(*args: Any) -> JitScalarType | None:
    for arg in args:
        if isinstance(arg, Value) and arg.type().dtype() is not None:
            return JitScalarType.from_dtype(arg.type().dtype())
    return None


def _type_name(x: Value) -> str | None:
    return x.type().scalarType() if isinstance(x, Value) else None


# -- complex tensors -------------------------------------------------------------
def mark_complex_pairs(value: Any) -> Any:
    """Record that ``value`` carries a complex tensor as real pairs, so the walker can type
    the source value complex where the front end left its dtype unknown (scripted code)."""
    value.meta = {**(value.meta or {}), "complex_pairs": True}
    return value


def carries_complex_pairs(value: Any) -> bool:
    """Whether a symbolic marked ``value`` with :func:`mark_complex_pairs`."""
    return bool(getattr(value, "meta", None) and value.meta.get("complex_pairs"))


def has_complex_input(node: Any) -> bool:
    """Whether a TorchScript node reads a complex tensor."""
    for value in node.inputs():
        source_type = value.type()
        if is_tensor_type(source_type):
            dtype = source_type.dtype()
            if dtype is not None and dtype.is_complex:
                return True
    return False


def traced_sizes(source_value: Any) -> list[int | None] | None:
    """The sizes a source graph's tensor value had in the run the front end captured: a
    TorchScript trace's sizes, or the example sizes of torch.export's symbolic dims (None
    for a dim neither knows, or for a value that is not a tensor)."""
    read = getattr(source_value, "traced_sizes", None)
    if read is not None:
        return read()
    source_type = source_value.type()
    return source_type.varyingSizes() if is_tensor_type(source_type) else None


def is_tensor_type(source_type: Any) -> bool:
    """Whether a source graph's value type (TorchScript's, or the torch.export front end's
    :class:`oxport.ir.Type`) is a tensor type."""
    return source_type.kind() == "TensorType"


# -- declining -----------------------------------------------------------------
def _unimplemented(op: str, msg: str, value: Any = None) -> None:
    """Decline: this symbolic cannot convert these arguments (a fallback may)."""
    raise SymbolicDeclined(op, msg)


def _onnx_unsupported(op_name: str, value: Any = None) -> None:
    raise SymbolicDeclined(op_name, "not supported in ONNX")


def _onnx_opset_unsupported(op_name: str, current_opset: int, supported_opset: int,
                            value: Any = None) -> None:
    raise SymbolicDeclined(
        op_name, f"unsupported in opset {current_opset}; use opset_version >= {supported_opset}")


def _onnx_opset_unsupported_detailed(op_name: str, current_opset: int, supported_opset: int,
                                     reason: str, value: Any = None) -> None:
    raise SymbolicDeclined(
        op_name, f"{reason} (opset {current_opset}; opset {supported_opset} would support it)")


def args_have_same_dtype(args: Sequence[Value]) -> bool:
    dtypes = {a.type().dtype() for a in args if isinstance(a, Value)}
    return len(dtypes) <= 1


# -- opset-aware building blocks shared by packs ------------------------------------
def _axes_input(g: Any, axes: Sequence[int]) -> Value:
    return g.constant(torch.tensor(list(axes), dtype=torch.int64))


def _unsqueeze_helper(g: Any, input: Value, axes_i: Sequence[int]) -> Value:
    """Unsqueeze with ``axes`` as an attribute below opset 13 and an input from 13."""
    if g.opset < 13:
        return g.op("Unsqueeze", input, axes_i=list(axes_i))
    return g.op("Unsqueeze", input, _axes_input(g, axes_i))


def _squeeze_helper(g: Any, input: Value, axes_i: Sequence[int] | None) -> Value:
    """Squeeze; ``axes_i=None`` squeezes every dimension of size 1."""
    if axes_i is None:
        return g.op("Squeeze", input)
    if g.opset < 13:
        return g.op("Squeeze", input, axes_i=list(axes_i))
    return g.op("Squeeze", input, _axes_input(g, axes_i))


def reduce_helper(g: Any, op_type: str, input: Value, axes_i: Sequence[int] | None,
                  keepdims_i: int = 1, noop_with_empty_axes: bool = False) -> Value:
    """A Reduce* node with axes as an attribute or, where ONNX moved them, an input."""
    axes_as_input_since = 13 if op_type == "ReduceSum" else 18
    if axes_i is None:
        return g.op(op_type, input, keepdims_i=keepdims_i)
    if g.opset < axes_as_input_since:
        return g.op(op_type, input, axes_i=list(axes_i), keepdims_i=keepdims_i)
    return g.op(op_type, input, _axes_input(g, axes_i), keepdims_i=keepdims_i)


def _reducesum_helper(g: Any, input: Value, axes_i: Sequence[int] | None = None,
                      keepdims_i: int = 1, noop_with_empty_axes_i: int = 0) -> Value:
    return reduce_helper(g, "ReduceSum", input, axes_i, keepdims_i)


def _slice_helper(g: Any, input: Value, axes: Sequence[int], starts: Sequence[Any],
                  ends: Sequence[Any], steps: Sequence[Any] | None = None) -> Value:
    """Slice with attributes below opset 10, inputs from 10 (starts, ends and steps may be
    Values)."""
    dynamic = any(isinstance(v, Value) and not v.is_const for v in [*starts, *ends])
    strided = bool(steps) and any(isinstance(s, Value) and not s.is_const
                                  or int(constant_item(s)) != 1 for s in steps)
    if g.opset < 10:
        if dynamic or strided:
            _onnx_opset_unsupported("Slice with dynamic bounds or steps", g.opset, 10)
        return g.op("Slice", input, axes_i=list(axes),
                    starts_i=[int(constant_item(s)) for s in starts],
                    ends_i=[int(constant_item(e)) for e in ends])

    def as_1d(items: Sequence[Any]) -> Value:
        if all(not isinstance(v, Value) or v.is_const for v in items):
            return g.constant(torch.tensor([int(constant_item(v)) for v in items],
                                           dtype=torch.int64))
        parts = [
            _unsqueeze_helper(g, cast_to(g, v, torch.int64), [0])
            if isinstance(v, Value) and not v.is_const
            else g.constant(torch.tensor([int(constant_item(v))], dtype=torch.int64))
            for v in items
        ]
        return g.op("Concat", *parts, axis_i=0)

    inputs = [input, as_1d(starts), as_1d(ends), g.constant(torch.tensor(list(axes)))]
    if strided:
        inputs.append(as_1d(steps))
    return g.op("Slice", *inputs)


def cast_to(g: Any, value: Value, dtype: torch.dtype) -> Value:
    """Cast ``value`` to ``dtype`` unless it already has it."""
    if isinstance(value, Value) and value.type().dtype() == dtype:
        return value
    if isinstance(value, Value) and value.is_const and isinstance(value.const, (int, float, bool)):
        return g.constant(torch.tensor(value.const, dtype=dtype))
    if isinstance(value, Value) and value.is_const and isinstance(value.const, torch.Tensor):
        return g.constant(value.const.to(dtype))
    out = g.op("Cast", value, to_i=JitScalarType.from_dtype(dtype).onnx_type())
    return out.setType(value.type().with_dtype(dtype))


def _reshape_helper(g: Any, input: Value, shape: Any, allowzero: int = 0) -> Value:
    shape_value = shape if isinstance(shape, Value) else g.constant(
        torch.tensor(list(shape), dtype=torch.int64))
    if g.opset < 5:
        _onnx_opset_unsupported("Reshape with a shape input", g.opset, 5)
    if allowzero and g.opset >= 14:
        return g.op("Reshape", input, shape_value, allowzero_i=1)
    return g.op("Reshape", input, shape_value)


def _size_helper(g: Any, self: Value, dim: Value) -> Value:
    """``self.size(dim)`` as a 1-D int64 tensor."""
    full_shape = g.op("Shape", self)
    return g.op("Gather", full_shape, dim, axis_i=0)


# -- type promotion ----------------------------------------------------------------
def _probe(value: Any) -> torch.Tensor | None:
    """A tiny tensor with ``value``'s dtype and rank class (0-d or not), for result_type."""
    if isinstance(value, Value):
        if value.is_const and isinstance(value.const, torch.Tensor):
            return torch.empty((1,) * min(value.const.dim(), 1), dtype=value.const.dtype)
        if value.is_const and isinstance(value.const, (bool, int, float)):
            return None
        dtype = value.type().dtype()
        if dtype is None:
            return None
        rank = value.type().dim()
        return torch.empty((1,) if rank is None or rank > 0 else (), dtype=dtype)
    if isinstance(value, torch.Tensor):
        return torch.empty((1,) * min(value.dim(), 1), dtype=value.dtype)
    return None


def _scalar_of(value: Any) -> Any:
    if isinstance(value, Value) and value.is_const and isinstance(value.const, (bool, int, float)):
        return value.const
    if isinstance(value, (bool, int, float)):
        return value
    return None


def result_dtype(*operands: Any) -> torch.dtype | None:
    """The dtype PyTorch's type promotion gives ``operands`` (None when unknown)."""
    probes = [p for p in (_probe(o) for o in operands) if p is not None]
    if not probes:  # Python numbers only (scripted ``int ** float``): as 0-d tensors
        scalars = [_scalar_of(operand) for operand in operands if operand is not None]
        if not scalars or None in scalars:  # a tensor of unknown dtype among them
            return None
        probes = [torch.tensor(scalar) for scalar in scalars]
    out = probes[0]
    for probe in probes[1:]:
        out = torch.empty(out.shape if out.dim() >= probe.dim() else probe.shape,
                          dtype=torch.result_type(out, probe))
    for operand in operands:
        scalar = _scalar_of(operand)
        if scalar is not None:
            out = torch.empty(out.shape, dtype=torch.result_type(out, scalar))
    return out.dtype


def promote(g: Any, *operands: Any) -> list[Value]:
    """Cast ``operands`` to their common dtype under PyTorch's promotion rules."""
    dtype = result_dtype(*operands)
    values = []
    for operand in operands:
        if dtype is None:
            values.append(g.as_value(operand))
        elif isinstance(operand, Value):
            values.append(cast_to(g, operand, dtype))
        else:
            values.append(g.constant(torch.tensor(operand, dtype=dtype)))
    return values


def traced_dtype(g: Any, *kinds: str) -> torch.dtype | None:
    """The output dtype TorchScript recorded for the node being converted, if it is one of
    ``kinds`` (an in-place ``kind_`` counts); None in scripted graphs that lack it.

    A traced graph holds Python scalars as 0-d Long/Double tensors, which promotion cannot
    tell from real 0-d tensors (``int_tensor * 2.5`` is Float, not Double); the recorded
    dtype settles it. Naming the kinds keeps a symbolic reused inside another op's
    symbolic from picking up that op's output dtype.
    """
    node = getattr(g, "original_node", None)
    if node is None or node.outputsSize() != 1:
        return None
    kind = node.kind()
    if kind not in kinds and kind.removesuffix("_") not in kinds:
        return None
    out_type = node.output().type()
    # Through oxport's Type, a quantized dtype reads as float32 (the QDQ form).
    return Type.of(out_type).dtype() if is_tensor_type(out_type) else None


def bakeable_tensor(g: Any, value: Any) -> torch.Tensor | None:
    """The tensor in ``value`` when a symbolic may compute new constants from it at export
    time (e.g. reordered weights); None for run-time values and for parameters the user
    feeds at run time (``export_params=False``, ``keep_initializers_as_inputs``)."""
    if not isinstance(value, Value) or not isinstance(value.const, torch.Tensor):
        return None
    if value.is_parameter and g.params_are_inputs:
        return None
    return value.const
