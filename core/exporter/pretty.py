"""The seed's readable text form of an exported model (what ``export_to_pretty_string``
returns and ``verbose=True`` prints)."""

from __future__ import annotations

from typing import Any

import onnx

from oxport import serialize
from oxport.errors import OnnxExporterError
from oxport.types import JitScalarType


def pretty(serialized: serialize.Serialized) -> str:
    """The seed's readable graph form: ``%y : Float(2, 3) = onnx::Relu(%x), scope: ...``."""
    return _Printer(serialized).text()


class _Printer:
    def __init__(self, serialized: serialize.Serialized) -> None:
        model = serialized.model
        self.model = model
        self.types = {name: str(type_) for name, type_ in serialized.types.items()}
        for weight in serialized.weights:
            header = serialize.tensor_header(weight.name, weight.tensor)
            self.types[weight.name] = _tensor_text(header.data_type, list(header.dims))
        self.types.update({vi.name: _type_text(vi.type) for vi in
                           [*model.graph.input, *model.graph.output, *model.graph.value_info]})
        self.weights = [w.name for w in serialized.weights]

    def text(self) -> str:
        g = self.model.graph
        declared = [i.name for i in g.input]
        params = declared + [w for w in self.weights if w not in declared]
        lines = ["graph(" + ",\n      ".join(
            f"%{name} : {self.types.get(name, 'Tensor')}" for name in params) + ") {"]
        lines += self.nodes(g, "  ")
        lines.append("  return (" + ", ".join(f"%{o.name}" for o in g.output) + ")")
        lines.append("}")
        return "\n".join(lines)

    def nodes(self, graph: onnx.GraphProto, indent: str) -> list[str]:
        lines = []
        for node in graph.node:
            attrs = []
            subgraphs = []
            for attr in node.attribute:
                value = onnx.helper.get_attribute_value(attr)
                if isinstance(value, onnx.GraphProto):
                    subgraphs.append((attr.name, value))
                    continue
                if isinstance(value, onnx.TensorProto):
                    value = _tensor_value_text(value)
                elif isinstance(value, bytes):
                    value = repr(value.decode())
                attrs.append(f"{attr.name}={value}")
            outputs = ", ".join(f"%{o} : {self.types.get(o, 'Tensor')}" for o in node.output)
            domain = node.domain or "onnx"
            attr_text = f"[{', '.join(attrs)}]" if attrs else ""
            inputs = ", ".join(f"%{i}" if i else "None" for i in node.input)
            doc = f", {node.doc_string}" if node.doc_string else ""
            lines.append(f"{indent}{outputs} = {domain}::{node.op_type}{attr_text}({inputs}){doc}")
            for name, sub in subgraphs:
                lines.append(f"{indent}  block {name}({', '.join('%' + i.name for i in sub.input)}):")
                lines += self.nodes(sub, indent + "    ")
                lines.append(f"{indent}    -> ({', '.join('%' + o.name for o in sub.output)})")
        return lines


def _type_text(type_proto: onnx.TypeProto) -> str:
    if type_proto.HasField("tensor_type"):
        tensor = type_proto.tensor_type
        dims = [d.dim_param if d.dim_param else (d.dim_value if d.HasField("dim_value") else "?")
                for d in tensor.shape.dim] if tensor.HasField("shape") else None
        return _tensor_text(tensor.elem_type, dims)
    if type_proto.HasField("sequence_type"):
        return _type_text(type_proto.sequence_type.elem_type) + "[]"
    return "Dynamic"


def _tensor_text(elem_type: int, dims: list[Any] | None) -> str:
    try:
        name = JitScalarType.from_onnx_type(elem_type).scalar_name()
    except OnnxExporterError:
        name = "Tensor"
    if dims is None:
        return name
    return f"{name}({', '.join(str(d) for d in dims)})"


def _tensor_value_text(proto: onnx.TensorProto) -> str:
    array = onnx.numpy_helper.to_array(proto)
    if array.size <= 8:
        return "{" + ", ".join(str(x) for x in array.reshape(-1).tolist()) + "}"
    return f"<Tensor {list(array.shape)}>"
