"""The example pack's tests: the shared runner for its cases, and the graph it makes."""

from __future__ import annotations

import onnx
import torch

import oxport
from oxport.testing import op_tests
from oxport_example_pack import scaled_add

# Every declared case, at every opset its symbolics serve, in ONNX Runtime vs PyTorch.
test_example_pack_cases = op_tests("example-pack")


class Model(torch.nn.Module):
    def forward(self, x, y):
        return scaled_add(x, y, alpha=3.0)


ARGS = (torch.randn(2, 3), torch.randn(2, 3))


def test_a_custom_op_in_its_own_domain_with_its_function():
    model = oxport.convert(Model(), ARGS, opset_version=17).model_proto
    (node,) = model.graph.node
    assert (node.domain, node.op_type) == ("com.example", "ScaledAdd")
    assert onnx.helper.get_attribute_value(node.attribute[0]) == 3.0
    (function,) = model.functions
    assert (function.domain, function.name, list(function.attribute)) == (
        "com.example", "ScaledAdd", ["alpha"])
    assert {o.domain: o.version for o in model.opset_import} == {"": 17, "com.example": 1}


def test_custom_opsets_sets_the_domain_version():
    model = oxport.convert(Model(), ARGS, opset_version=17,
                           custom_opsets={"com.example": 3}).model_proto
    assert {o.domain: o.version for o in model.opset_import}["com.example"] == 3


def test_older_opsets_get_standard_ops():
    model = oxport.convert(Model(), ARGS, opset_version=13).model_proto
    assert [n.op_type for n in model.graph.node if n.op_type != "Constant"] == ["Mul", "Add"]
    assert not model.functions
