"""Custom domains and ops: the seeds' C++ operator example with register_custom_op_symbolic,
custom_opsets and packs' default domain versions, setType, and unconvertible_ops."""

from __future__ import annotations

import sys
import types

import onnx
import pytest
import torch

import oxport
from oxport import plugin_manager
from oxport import symbolic_helper as sh
from oxport.ir import Type
from oxport.walk import Unconvertible
from tests.helpers import export_proto
from tests.torch_ops import define_op

define_op("custom_ops", "foo_forward",
          "(Tensor input1, Tensor input2, float attr1, int attr2) -> Tensor",
          lambda a, b, x, y: a * x + b * y)
for _name in ("alpha", "beta", "gamma"):
    define_op("oxunsupported", _name, "(Tensor a) -> Tensor", lambda a: a + 1)


class FooModel(torch.nn.Module):
    """The seeds' FooModel."""

    def __init__(self, attr1: float, attr2: int) -> None:
        super().__init__()
        self.attr1 = attr1
        self.attr2 = attr2

    def forward(self, input1, input2):
        return torch.ops.custom_ops.foo_forward(input1, input2, self.attr1, self.attr2)


@sh.parse_args("v", "v", "f", "i")
def symbolic_foo_forward(g, input1, input2, attr1, attr2):
    return g.op("custom_domain::Foo", input1, input2, attr1_f=attr1, attr2_i=attr2)


@pytest.fixture
def foo_symbolic():
    """``register(fn)`` registers ``fn`` for custom_ops::foo_forward at opset 9, for the test."""
    def register(fn):
        oxport.register_custom_op_symbolic("custom_ops::foo_forward", fn, 9)
    yield register
    oxport.unregister_custom_op_symbolic("custom_ops::foo_forward", 9)


def imports(model: onnx.ModelProto) -> dict[str, int]:
    return {o.domain: o.version for o in model.opset_import}


ARGS = (torch.randn(2, 3), torch.randn(2, 3))


def test_the_seeds_cpp_operator_example(foo_symbolic):
    foo_symbolic(symbolic_foo_forward)
    model = export_proto(FooModel(1.5, 3), ARGS, custom_opsets={"custom_domain": 2})
    (node,) = model.graph.node
    assert (node.domain, node.op_type) == ("custom_domain", "Foo")
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute} == {
        "attr1": 1.5, "attr2": 3}
    assert list(node.input) == [i.name for i in model.graph.input]
    assert imports(model) == {"": oxport.types.DEFAULT_OPSET, "custom_domain": 2}
    output = model.graph.output[0].type.tensor_type
    assert output.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in output.shape.dim] == [2, 3]


def test_custom_domain_version_defaults_to_1(foo_symbolic):
    foo_symbolic(symbolic_foo_forward)
    assert imports(export_proto(FooModel(1.0, 1), ARGS, opset_version=9))["custom_domain"] == 1


def test_below_the_registered_opset_the_error_names_it(foo_symbolic):
    foo_symbolic(symbolic_foo_forward)
    with pytest.raises(oxport.UnsupportedOperatorError, match="supported from opset 9"):
        oxport.convert(FooModel(1.0, 1), ARGS, opset_version=8)


def test_set_type_on_outputs_is_honoured(foo_symbolic):
    def foo_half(g, input1, input2, attr1, attr2):
        out = g.op("custom_domain::FooHalf", input1, input2)
        return out.setType(Type.tensor(torch.float16))  # the trace says float32

    foo_symbolic(foo_half)
    model = export_proto(FooModel(1.0, 1), ARGS)
    output = model.graph.output[0].type.tensor_type
    assert output.elem_type == onnx.TensorProto.FLOAT16
    assert [d.dim_value for d in output.shape.dim] == [2, 3]  # the shape the trace knows


def test_a_pack_declares_its_domains_default_version(monkeypatch, oxport_plugin_session):
    pack = oxport.OpPack("test-domain-pack", domains={"com.example.test": 3})

    @pack.symbolic("custom_ops::foo_forward", since=9)
    def foo_forward(g, input1, input2, attr1, attr2):
        return g.op("com.example.test::Foo", input1, input2)

    real, declared = plugin_manager.installed_entry_points()
    monkeypatch.setitem(sys.modules, "fake_test_domain_pack", types.SimpleNamespace(pack=pack))
    fake = plugin_manager.FoundEntryPoint(plugin_manager.importlib_metadata.EntryPoint(
        "test-domain-pack", "fake_test_domain_pack:pack", plugin_manager.ENTRY_POINT_GROUP))
    monkeypatch.setattr(plugin_manager, "installed_entry_points",
                        lambda: ([*real, fake], declared))
    assert imports(export_proto(FooModel(1.0, 1), ARGS))["com.example.test"] == 3
    custom = export_proto(FooModel(1.0, 1), ARGS, custom_opsets={"com.example.test": 5})
    assert imports(custom)["com.example.test"] == 5


# -- unconvertible ops ------------------------------------------------------------------
class ThreeUnsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = torch.ops.oxunsupported.alpha(self.linear(x))
        y = torch.ops.oxunsupported.beta(y) + torch.ops.oxunsupported.beta(x)
        return torch.ops.oxunsupported.gamma(y)


def test_three_unsupported_ops_are_reported_at_once():
    model, args = ThreeUnsupported(), (torch.randn(2, 3),)
    graph, kinds = oxport.unconvertible_ops(model, args, opset_version=13)
    assert isinstance(graph, torch._C.Graph)
    expected = {"oxunsupported::alpha", "oxunsupported::beta", "oxunsupported::gamma"}
    assert set(kinds) == expected  # aten::linear and aten::add convert
    assert sorted(kinds).count("oxunsupported::beta") == 2
    with pytest.raises(oxport.UnsupportedOperatorError) as caught:
        oxport.convert(model, args, opset_version=13)
    assert {info.kind for info in caught.value.ops} == expected
    message = str(caught.value)
    assert "3 operators" in message and all(kind in message for kind in expected)


def test_unconvertible_details_name_the_minimum_opset():
    oxport.register_custom_op_symbolic("oxunsupported::gamma", lambda g, a: g.op("Neg", a), 15)
    try:
        details = oxport.unconvertible_op_details(ThreeUnsupported(), (torch.randn(2, 3),),
                                                  opset_version=13)
        assert all(isinstance(info, Unconvertible) for info in details)
        by_kind = {info.kind: info for info in details}
        assert by_kind["oxunsupported::gamma"].min_opset == 15
        assert by_kind["oxunsupported::alpha"].min_opset is None
        assert by_kind["oxunsupported::beta"].count == 2
        assert all("test_custom_ops.py" in info.sources[0] for info in details)
        assert "supported from opset 15" in by_kind["oxunsupported::gamma"].describe(13)
        _, kinds = oxport.unconvertible_ops(ThreeUnsupported(), (torch.randn(2, 3),),
                                            opset_version=15)
        assert set(kinds) == {"oxunsupported::alpha", "oxunsupported::beta"}
    finally:
        oxport.unregister_custom_op_symbolic("oxunsupported::gamma", 15)
