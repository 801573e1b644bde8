"""The ONNX checker on a weightless copy of the model, and errors traced to their node."""

from __future__ import annotations

import re

import onnx

from oxport.errors import CheckerError
from oxport.ir import Node
from oxport.serialize.proto import Serialized, plugin_of
from oxport.serialize.weights import weightless


def check(serialized: Serialized, full_check: bool = True) -> None:
    """Run the ONNX checker on the model with weights as typed inputs (no bytes loaded)."""
    model = weightless(serialized.model, serialized.weights)
    try:
        onnx.checker.check_model(model, full_check=full_check)
    except onnx.checker.ValidationError as exc:
        raise CheckerError(f"The exported model is not valid ONNX: {exc}"
                           f"{blame(serialized, str(exc))}") from exc
    except onnx.shape_inference.InferenceError as exc:
        raise CheckerError(f"ONNX shape inference rejects the exported model: {exc}"
                           f"{blame(serialized, str(exc))}") from exc


_NODE_NAME = re.compile(r"(?:Name: ?'?|node name: )([^\s')]+)")


def named_node(serialized: Serialized, message: str) -> tuple[str, Node] | None:
    """The first node of the model an error message (checker, ONNX Runtime) names."""
    for name in _NODE_NAME.findall(message):
        node = serialized.nodes.get(name)
        if node is not None:
            return name, node
    return None


def blame(serialized: Serialized, message: str) -> str:
    """For an error message that names a node of the model: a new line saying where that
    node came from, e.g. ``(node /Relu_0 was made for aten::relu at m.py(5): forward by
    the symbolic from my-pack (my-dist 1.0))``; ``""`` when no node is named."""
    found = named_node(serialized, message)
    if found is None:
        return ""
    name, node = found
    where = f" at {node.source}" if node.source else ""
    plugin = plugin_of(node)
    by = f" by the symbolic from {plugin}" if plugin else ""
    return f"\n(node {name} was made for {node.origin or 'an unknown op'}{where}{by})"
