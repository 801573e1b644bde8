"""What the fallback plugins share: TorchScript nodes emitted as ``ATen`` or as they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import onnx
import torch

from oxport.context import ATEN_DOMAIN, GraphContext
from oxport.ir import Type, Value
from oxport.plugins.autograd import python_op_arguments
from oxport.walk import ts_attributes

if TYPE_CHECKING:
    from oxport.frontends.view import SourceNode


def string_constant(g: GraphContext, text: str) -> Value:
    """A ``Constant`` holding a 0-d string tensor (ATen's str arguments, e.g. gelu's)."""
    proto = onnx.helper.make_tensor("", onnx.TensorProto.STRING, [], [text.encode()])
    node = g.graph.add_node("", "Constant", [], 1, {"value": ("t", proto)})
    g.stamp(node)
    return node.output().setType(Type("StringType"))


def onnx_inputs(g: GraphContext, args: Sequence[Any]) -> list[Any]:
    """Arguments ready for ``g.op``: None stays a missing input, strings and devices
    become string constants, everything else (Values, numbers, tensors) is kept."""
    result: list[Any] = []
    for arg in args:
        value = arg.const if isinstance(arg, Value) and arg.is_const else arg
        if value is None:
            result.append(None)
        elif isinstance(value, (str, torch.device)):
            result.append(string_constant(g, str(value)))
        else:
            result.append(arg)
    return result


def overload_name(node: SourceNode) -> str:
    """The ATen overload of a node (``"Tensor"`` for ``aten::mul.Tensor``), or ``""``."""
    schema = node.schema()
    if not schema.startswith("aten::"):
        return ""
    return torch._C.parse_schema(schema).overload_name


def emit_aten(g: GraphContext, node: SourceNode, inputs: Sequence[Value | None]) -> Any:
    """``node`` as ``org.pytorch.aten::ATen[operator=..., overload_name=...]``."""
    op_name = node.kind().partition("::")[2]
    return g.at(op_name, *onnx_inputs(g, inputs), overload_name=overload_name(node),
                outputs=node.outputsSize(), **ts_attributes(node))


def emit_as_is(g: GraphContext, node: SourceNode, inputs: Sequence[Value | None]) -> Any:
    """``node`` unchanged, as a custom op of its own namespace (``foo::bar`` ->
    domain ``foo``, ``aten::x`` -> ``org.pytorch.aten``); an autograd Function stays one
    ``prim::PythonOp`` node carrying its ``name`` and ``module``."""
    namespace, _, op_name = node.kind().partition("::")
    domain = ATEN_DOMAIN if namespace == "aten" else namespace
    attrs = ts_attributes(node)
    args: Sequence[Any] = inputs
    if node.kind() == "prim::PythonOp":
        args, _ = python_op_arguments(node, inputs)
        attrs["name_s"] = node.pyname()
    return g.op(f"{domain}::{op_name}", *onnx_inputs(g, args), outputs=node.outputsSize(),
                **attrs)
