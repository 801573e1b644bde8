"""TorchScript's structural ops: constants, lists, tuples, and scalar conversions."""

from __future__ import annotations

from typing import Any

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.errors import SymbolicDeclined
from oxport.ir import Type, Value
from oxport.opsets import lists

pack = OpPack("oxport.prim", cases="oxport.opsets.cases.prim")


@pack.symbolic("prim::Constant", since=7)
def prim_constant(g, **attrs: Any) -> Value:
    """Constant() -> t

    No schema in torch: the value is the node's attribute. A constant stays Python data
    until an ONNX node consumes it."""
    output = g.original_node.output()
    value = output.toIValue()
    if isinstance(value, torch.Tensor) and value.is_complex():  # ONNX holds its real pairs
        return sh.mark_complex_pairs(g.constant(torch.view_as_real(value.resolve_conj())))
    if isinstance(value, torch.Tensor):
        return g.constant(value)
    if isinstance(value, list) and any(isinstance(v, torch.Tensor) for v in value):
        # A constant list of tensors (freezing folds lists of weights, index lists...):
        # a packed list of constants, so ops see its items as they see a built list's.
        items = [g.constant(v) if isinstance(v, torch.Tensor) else g.python_constant(v)
                 for v in value]
        return lists.packed_list(g, items, Type.of(output.type()))
    return g.python_constant(value, Type.of(output.type()))


@pack.symbolic("prim::ListConstruct", since=7)
def prim_list_construct(g, *items: Value) -> Value:
    """ListConstruct(t... items) -> t[]

    No schema in torch. A list: constant if its items are; materialized as Concat
    (numbers) or a Sequence."""
    return lists.packed_list(g, list(items), Type.of(g.original_node.output().type()))


@pack.symbolic("prim::ListUnpack", since=7)
def prim_list_unpack(g, packed: Value) -> tuple[Value, ...] | Value:
    """ListUnpack(t[] list) -> t...

    No schema in torch. Unpack a list built in the graph, a constant list, or a split's
    outputs."""
    count = g.original_node.outputsSize()
    if sh._is_packed_list(packed):
        return tuple(sh._unpack_list(packed))
    if packed.is_const and isinstance(packed.const, (list, tuple)):
        return tuple(g.python_constant(v) for v in packed.const)
    if packed.type().kind() == "TensorType":  # a 1-D int tensor such as x.size()
        items = tuple(sh._squeeze_helper(
            g, sh._slice_helper(g, packed, [0], [i], [i + 1]), [0]) for i in range(count))
        return items if count != 1 else items[0]
    if g.opset < 11:
        raise SymbolicDeclined("prim::ListUnpack", "unpacking a dynamic list needs opset 11")
    outs = tuple(g.op("SequenceAt", packed, g.constant(torch.tensor(i))) for i in range(count))
    return outs if count != 1 else outs[0]


@pack.symbolic("prim::NumToTensor", since=7)
def prim_num_to_tensor(g, number: Value) -> Value:
    """NumToTensor.Scalar(Scalar a) -> Tensor
    NumToTensor.bool(bool a) -> Tensor

    A TorchScript number as a 0-d tensor (it already is one in ONNX)."""
    if number.is_const:
        return g.constant(torch.tensor(number.const))
    return number


def _scalar_cast(dtype: torch.dtype):
    def convert(g, value: Value) -> Value:
        if value.is_const:
            const = value.const
            item = const.item() if isinstance(const, torch.Tensor) else const
            return g.python_constant(int(item) if dtype == torch.int64 else float(item))
        out = sh.cast_to(g, value, dtype)
        if out.type().dim() != 0:  # a one-element tensor's number is 0-d
            out = sh._reshape_helper(g, out, []).setType(Type.tensor(dtype, ()))
        return out
    return convert


aten_int = _scalar_cast(torch.int64)
aten_int.__name__ = "aten_int"
aten_int.__doc__ = ("Int.Tensor(Tensor a) -> int\n"
                    "and its Scalar, bool, float, str overloads\n\n"
                    "A cast to int64 (0-d), folded when constant.")
pack.symbolic("aten::Int", since=7)(aten_int)
aten_float = _scalar_cast(torch.float32)
aten_float.__name__ = "aten_float"
aten_float.__doc__ = ("Float.Tensor(Tensor a) -> float\n"
                      "and its Scalar, int, bool, str overloads\n\n"
                      "A cast to float32 (0-d), folded when constant.")
pack.symbolic("aten::Float", since=7)(aten_float)


# -- what TorchScript asks of a tensor that an export knows ------------------------------
@pack.symbolic("prim::data", since=7)
def prim_data(g, self: Value) -> Value:
    """data(Tensor(a) a) -> Tensor(a)

    ``x.data``: the tensor itself."""
    return self


@pack.symbolic("prim::layout", since=7)
def prim_layout(g, self: Value) -> Value:
    """layout(Tensor a) -> Layout

    ``x.layout``: always ``torch.strided`` (TorchScript encodes it as 0)."""
    return g.python_constant(0)


@pack.symbolic("aten::is_floating_point", since=7)
def is_floating_point(g, self: Value) -> Value:
    """is_floating_point(Tensor self) -> bool

    A constant from the traced dtype."""
    dtype = self.type().dtype()
    if dtype is None:
        sh._unimplemented("aten::is_floating_point", "an input of unknown dtype")
    return g.python_constant(dtype.is_floating_point)


@pack.symbolic("aten::is_pinned", since=7)
def is_pinned(g, self: Value, device: Value | None = None) -> Value:
    """is_pinned(Tensor self, Device? device=None) -> bool

    False: an ONNX graph's tensors are never in pinned host memory."""
    return g.python_constant(False)


@pack.symbolic("prim::tolist", since=7)
def prim_tolist(g, self: Value, dim: Value, elem_type: Value) -> Value:
    """tolist(...) -> ...

    ``x.tolist()`` of a 0-d or 1-D tensor: the tensor itself, as oxport holds lists of
    numbers (int64, float32 or bool)."""
    rank = sh._get_const(dim, "i", "dim")
    if rank > 1:
        sh._unimplemented("prim::tolist", f"a {rank}-D tensor (a list of lists)")
    kind = g.original_node.output().type()
    while kind.kind() == "ListType":
        kind = kind.getElementType()
    dtype = {"IntType": torch.int64, "FloatType": torch.float32, "BoolType": torch.bool}.get(
        kind.kind(), self.type().dtype())
    return sh.cast_to(g, self, dtype)


@pack.symbolic("prim::Print", since=7)
def prim_print(g, *values: Value) -> None:
    """Print(...) -> ()

    ``print(...)`` in scripted code prints nothing in an ONNX graph."""
    return None
