"""The fallback modes (ONNX_ATEN, ONNX_ATEN_FALLBACK, ONNX_FALLTHROUGH) as plugins: the
seeds' example graphs, warnings with source lines, and when a fallback may fire."""

from __future__ import annotations

import warnings

import onnx
import pytest
import torch

import oxport
from oxport import symbolic_helper as sh
from oxport import testing
from oxport.errors import (
    FallbackWarning,
    InvalidExportArgumentError,
    SymbolicError,
    UnsupportedOperatorError,
)
from oxport.types import OperatorExportTypes
from tests.helpers import export_with_result
from tests.torch_ops import define_op

ATEN = "org.pytorch.aten"


define_op("foo_namespace", "bar", "(Tensor a, Tensor b) -> Tensor", lambda a, b: a * b + a)
define_op("oxfallback", "scale", "(Tensor a, float s) -> Tensor", lambda a, s: a * s)


def ops(model: onnx.ModelProto) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in model.graph.node if n.op_type != "Constant"]


def attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def imports(model: onnx.ModelProto) -> dict[str, int]:
    return {o.domain: o.version for o in model.opset_import}


class _Mul(torch.nn.Module):
    def forward(self, x):
        return x * 3


class ExpDiv(torch.nn.Module):
    """The seeds' ONNX / ONNX_ATEN example: ``exp`` then ``div``."""

    def forward(self, x):
        return torch.div(x, torch.exp(x))


# -- ONNX_ATEN --------------------------------------------------------------------------
def test_onnx_aten_exports_every_aten_op_as_aten():
    with pytest.warns(FallbackWarning) as caught:
        model, result = export_with_result(ExpDiv(), (torch.randn(2, 3, 4),),
                               operator_export_type=OperatorExportTypes.ONNX_ATEN)
    nodes = [n for n in model.graph.node]
    assert [(n.domain, n.op_type) for n in nodes] == [(ATEN, "ATen"), (ATEN, "ATen")]
    assert [attrs(n) for n in nodes] == [
        {"operator": b"exp", "overload_name": b""},
        {"operator": b"div", "overload_name": b"Tensor"},
    ]
    assert nodes[1].input == [model.graph.input[0].name, nodes[0].output[0]]
    assert imports(model)[ATEN] == 1
    assert [(u.kind, u.fallback) for u in result.fallback_uses] == [
        ("aten::exp", "aten"), ("aten::div", "aten")]
    messages = [str(w.message) for w in caught]
    assert any("aten::div" in m and "test_fallbacks.py" in m for m in messages), messages


def test_onnx_aten_is_the_aten_fallback_plugin_by_name():
    with pytest.warns(FallbackWarning):
        by_mode, _ = export_with_result(ExpDiv(), (torch.randn(3),),
                            operator_export_type=OperatorExportTypes.ONNX_ATEN)
        by_name, _ = export_with_result(ExpDiv(), (torch.randn(3),), fallbacks=["aten"])
    assert ops(by_mode) == ops(by_name) == [(ATEN, "ATen")] * 2


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh") * 2.5


def test_onnx_aten_arguments_weights_constants_and_strings():
    with pytest.warns(FallbackWarning):
        model, _ = export_with_result(Affine(), (torch.randn(2, 4),),
                          operator_export_type=OperatorExportTypes.ONNX_ATEN)
    graph = model.graph
    # Non-ONNX modes keep initializers as inputs by default (torch.onnx's behaviour).
    assert [i.name for i in graph.input] == ["x", "linear.weight", "linear.bias"]
    assert {i.name for i in graph.initializer} == {"linear.weight", "linear.bias"}
    atens = [n for n in graph.node if n.op_type == "ATen"]
    assert [attrs(n)["operator"] for n in atens] == [b"linear", b"gelu", b"mul"]
    constants = {n.output[0]: onnx.numpy_helper.to_array(attrs(n)["value"])
                 for n in graph.node if n.op_type == "Constant"}
    gelu = atens[1]
    assert constants[gelu.input[1]].item() == "tanh"  # a str argument: a string tensor
    assert constants[atens[2].input[1]].item() == pytest.approx(2.5)


# -- ONNX_ATEN_FALLBACK -----------------------------------------------------------------
class TriuMul(torch.nn.Module):
    """The seeds' ONNX_ATEN_FALLBACK example: ``triu`` (no symbolic) then ``mul``."""

    def forward(self, x):
        return torch.triu(x, 0) * x


def _opset_without_triu() -> int:
    low = testing.registry_view().min_opset("aten::triu")
    if low is not None and low <= oxport.types.MIN_OPSET:
        pytest.skip("a symbolic serves aten::triu at every opset")
    return min(low - 1 if low is not None else 13, 13)


def test_aten_fallback_only_for_ops_without_symbolic():
    opset = _opset_without_triu()
    with pytest.warns(FallbackWarning, match=r"aten::triu .*'aten-fallback'.*test_fallbacks\.py"):
        model, result = export_with_result(TriuMul(), (torch.randn(3, 3),), opset_version=opset,
                               operator_export_type=OperatorExportTypes.ONNX_ATEN_FALLBACK)
    assert ops(model) == [(ATEN, "ATen"), ("", "Mul")]
    triu = next(n for n in model.graph.node if n.op_type == "ATen")
    assert attrs(triu) == {"operator": b"triu", "overload_name": b""}
    (diagonal,) = [n for n in model.graph.node if n.output[0] == triu.input[1]]
    assert onnx.numpy_helper.to_array(attrs(diagonal)["value"]).item() == 0
    assert [(u.kind, u.fallback) for u in result.fallback_uses] == [("aten::triu", "aten-fallback")]
    assert "test_fallbacks.py" in result.fallback_uses[0].source


def test_aten_fallback_leaves_converted_models_alone():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        model, result = export_with_result(_Mul(), (torch.randn(2, 3),),
                               operator_export_type=OperatorExportTypes.ONNX_ATEN_FALLBACK)
    assert ops(model) == [("", "Mul")] and not result.fallback_uses


# -- ONNX_FALLTHROUGH -------------------------------------------------------------------
class BarDiv(torch.nn.Module):
    """The seeds' ONNX_FALLTHROUGH example: the custom op ``foo_namespace::bar``, then div."""

    def forward(self, x, y):
        return torch.ops.foo_namespace.bar(x, y) / x


def test_fallthrough_keeps_a_custom_op_in_its_namespace():
    args = (torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    with pytest.raises(UnsupportedOperatorError, match="foo_namespace::bar"):
        oxport.convert(BarDiv(), args)
    with pytest.warns(FallbackWarning, match="foo_namespace::bar"):
        model, result = export_with_result(BarDiv(), args,
                               operator_export_type=OperatorExportTypes.ONNX_FALLTHROUGH)
    assert ops(model) == [("foo_namespace", "bar"), ("", "Div")]
    bar, div = model.graph.node
    assert list(bar.input) == [i.name for i in model.graph.input]
    assert div.input[0] == bar.output[0]
    assert imports(model)["foo_namespace"] == 1
    assert [(u.kind, u.fallback) for u in result.fallback_uses] == [
        ("foo_namespace::bar", "fallthrough")]
    with pytest.warns(FallbackWarning):
        model, _ = export_with_result(BarDiv(), args, custom_opsets={"foo_namespace": 4},
                          operator_export_type=OperatorExportTypes.ONNX_FALLTHROUGH)
    assert imports(model)["foo_namespace"] == 4


def test_fallthrough_aten_op_without_symbolic():
    # Only the prim pack and the fallthrough plugin: aten::mul has no symbolic.
    with pytest.warns(FallbackWarning, match="aten::mul"):
        model, _ = export_with_result(_Mul(), (torch.randn(2),),
                          plugins=["oxport.prim", "oxport.fallback.fallthrough"],
                          fallbacks=["fallthrough"])
    (node,) = [n for n in model.graph.node if n.op_type != "Constant"]
    assert (node.domain, node.op_type) == (ATEN, "mul")


def test_fallbacks_in_order_and_unknown_names():
    with pytest.warns(FallbackWarning):
        model, result = export_with_result(BarDiv(), (torch.randn(2), torch.randn(2)),
                               fallbacks=["aten-fallback", "fallthrough"])
    assert ops(model)[0] == ("foo_namespace", "bar")  # aten-fallback claims only aten ops
    with pytest.raises(InvalidExportArgumentError, match="no-such-mode"):
        oxport.convert(BarDiv(), (torch.randn(2), torch.randn(2)), fallbacks=["no-such-mode"])


# -- when a fallback may fire -------------------------------------------------------------
class Scale(torch.nn.Module):
    def forward(self, x):
        return torch.ops.oxfallback.scale(x, 2.0) + 1


@pytest.fixture
def scale_symbolic():
    """Register a runtime symbolic for ``oxfallback::scale``; removed afterwards."""
    def register(fn):
        oxport.register_custom_op_symbolic("oxfallback::scale", fn, 9)
    yield register
    oxport.unregister_custom_op_symbolic("oxfallback::scale", 9)


def test_a_declining_symbolic_lets_the_fallback_take_over(scale_symbolic):
    @sh.parse_args("v", "f")
    def scale(g, x, s):
        if s != 1.0:
            sh._unimplemented("oxfallback::scale", "only s == 1")
        return x

    scale_symbolic(scale)
    with pytest.raises(UnsupportedOperatorError, match="declined: only s == 1"):
        oxport.convert(Scale(), (torch.randn(3),))
    with pytest.warns(FallbackWarning):
        model, _ = export_with_result(Scale(), (torch.randn(3),),
                          operator_export_type=OperatorExportTypes.ONNX_FALLTHROUGH)
    assert ops(model) == [("oxfallback", "scale"), ("", "Add")]


def test_an_error_in_a_symbolic_is_never_a_fallback(scale_symbolic):
    def scale(g, x, s):
        raise ValueError("a bug in the symbolic")

    scale_symbolic(scale)
    with pytest.raises(SymbolicError, match="a bug in the symbolic"):
        oxport.convert(Scale(), (torch.randn(3),),
                       operator_export_type=OperatorExportTypes.ONNX_FALLTHROUGH)


def test_a_declining_symbolic_hands_over_to_the_one_it_shadows():
    def mul(g, a, b):
        sh._unimplemented("aten::mul", "this override handles nothing")

    oxport.register_custom_op_symbolic("aten::mul", mul, 7)
    try:
        model = oxport.convert(_Mul(), (torch.randn(3),)).model_proto
    finally:
        oxport.unregister_custom_op_symbolic("aten::mul", 7)
    assert ops(model) == [("", "Mul")]
