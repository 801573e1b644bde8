"""oxport's own type inference: dtype and shape of ONNX node outputs.

Scripted TorchScript graphs rarely carry dtypes or shapes, yet symbolics need
them (type promotion, ranks). Where the TorchScript type says nothing, the
walker asks ONNX's per-node inference about the node a symbolic emitted.
"""

from __future__ import annotations

import onnx
import torch
from onnx import helper

from oxport.errors import OnnxExporterError
from oxport.ir import Type, Value
from oxport.types import JitScalarType, onnx_shape, torch_shape

#: Constant inputs up to this many elements are passed to ONNX's data propagation.
_DATA_MAX_ELEMENTS = 1024
_MAX_DEPTH = 8


def needs_inference(value: Value) -> bool:
    """Whether ``value`` is a tensor or sequence whose dtype or rank is unknown."""
    t = value.type()
    if t.kind() in ("ListType", "OptionalType"):
        elem = t._elem
        return elem is None or elem.dtype() is None
    return t.kind() == "TensorType" and (t.dtype() is None or t.shape is None)


def infer_value(value: Value, opset: int, depth: int = 0) -> None:
    """Fill in ``value``'s dtype/shape from its producer, if ONNX can tell."""
    node = value.producer
    if node is None or node.domain or depth > _MAX_DEPTH or not needs_inference(value):
        return
    if any(kind in ("g", "gs") for kind, _ in node.attrs.values()):
        return
    for item in node.input_values:
        if item is not None and needs_inference(item):
            infer_value(item, opset, depth + 1)
    types: dict[str, onnx.TypeProto] = {}
    data: dict[str, onnx.TensorProto] = {}
    names = []
    for index, item in enumerate(node.input_values):
        if item is None:
            names.append("")
            continue
        proto = type_proto(item.type())
        if proto is None:
            return
        name = f"in{index}"
        names.append(name)
        types[name] = proto
        const = item.const if item.is_const else None
        if isinstance(const, torch.Tensor) and const.numel() <= _DATA_MAX_ELEMENTS:
            from oxport.serialize import tensor_proto
            data[name] = tensor_proto(name, const)
    outputs = [f"out{i}" for i in range(len(node.output_values))]
    proto_node = helper.make_node(node.op_type, names, outputs)
    for attr_name, (kind, attr_value) in node.attrs.items():
        attribute = _attribute(attr_name, kind, attr_value)
        if attribute is None:
            return
        proto_node.attribute.append(attribute)
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, proto_node, types, data, opset_imports=[helper.make_opsetid("", opset)])
    except (onnx.defs.SchemaError, onnx.shape_inference.InferenceError,
            onnx.checker.ValidationError):
        return  # ONNX cannot tell (or the checker will say what is wrong with the node)
    for name, out in zip(outputs, node.output_values):
        found = inferred.get(name)
        if found is not None and needs_inference(out):
            merged = _merge(out.type(), from_type_proto(found))
            if merged is not None:
                out.setType(merged)


_ATTRIBUTE_TYPES = {"i": onnx.AttributeProto.INT, "f": onnx.AttributeProto.FLOAT,
                    "s": onnx.AttributeProto.STRING, "is": onnx.AttributeProto.INTS,
                    "fs": onnx.AttributeProto.FLOATS, "ss": onnx.AttributeProto.STRINGS}


def _attribute(name: str, kind: str, value: object) -> onnx.AttributeProto | None:
    from oxport.serialize import tensor_proto
    if kind == "t":
        return helper.make_attribute(name, tensor_proto("", value))
    if kind == "ts":
        return helper.make_attribute(name, [tensor_proto("", v) for v in value])
    attr_type = _ATTRIBUTE_TYPES.get(kind)
    return None if attr_type is None else helper.make_attribute(name, value, attr_type=attr_type)


def type_proto(t: Type) -> onnx.TypeProto | None:
    """The ONNX TypeProto for an oxport Type (None when the dtype is unknown)."""
    if t.kind() in ("ListType", "TupleType", "OptionalType"):
        elem = t._elem
        if elem is None or elem.dtype() is None:
            return None
        if t.kind() == "OptionalType":
            return helper.make_optional_type_proto(type_proto(elem))
        shape = None if elem.shape is None or t.kind() != "ListType" else \
            [d if isinstance(d, (int, str)) else None for d in elem.shape]
        tensor = helper.make_tensor_type_proto(_onnx(elem.dtype()), shape)
        return helper.make_sequence_type_proto(tensor)
    if t.dtype() is None:
        return None
    shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None
                                         for d in t.shape]
    if shape is not None:
        try:
            shape = onnx_shape(t.dtype(), shape)
        except OnnxExporterError:
            return None  # a packed dtype's dynamic last dim: ONNX cannot say it
    return helper.make_tensor_type_proto(_onnx(t.dtype()), shape)


def from_type_proto(proto: onnx.TypeProto) -> Type | None:
    """An oxport Type from an ONNX TypeProto (tensors, sequences and optionals of tensors)."""
    for field, kind in (("sequence_type", "ListType"), ("optional_type", "OptionalType")):
        if proto.HasField(field):
            elem = from_type_proto(getattr(proto, field).elem_type)
            return Type(kind, elem=elem) if elem is not None else None
    if not proto.HasField("tensor_type") or not proto.tensor_type.elem_type:
        return None
    tensor = proto.tensor_type
    try:
        dtype = JitScalarType.from_onnx_type(tensor.elem_type).dtype()
    except OnnxExporterError:
        return None
    shape = None
    if tensor.HasField("shape"):
        shape = torch_shape(dtype, [d.dim_value if d.HasField("dim_value")
                                    else (d.dim_param or None) for d in tensor.shape.dim])
    return Type.tensor(dtype, shape)


def _merge(ours: Type, found: Type | None) -> Type | None:
    if found is None:
        return None
    for kind in ("ListType", "OptionalType"):
        if kind in (ours.kind(), found.kind()):
            return found if found.kind() == kind else None
    dtype = ours.dtype() or found.dtype()
    shape = ours.shape if ours.shape is not None else found.shape
    return Type(ours.kind(), dtype, shape, None, ours.requires_grad())


def _onnx(dtype: torch.dtype) -> int:
    return JitScalarType.from_dtype(dtype).onnx_type()
