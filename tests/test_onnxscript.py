"""ONNX-script functions as custom ops: ``g.onnxscript_op`` puts the function into
``ModelProto.functions`` and its domain into the opset imports; onnxscript is optional."""

from __future__ import annotations

import sys

import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper

import oxport
from oxport.errors import OnnxExporterError
from oxport.testing import compare
from tests.helpers import export_proto

onnxscript = pytest.importorskip("onnxscript")
from onnxscript.onnx_opset import opset15 as op  # noqa: E402

opset_version = 15
custom_opset = onnxscript.values.Opset(domain="onnx-script", version=1)


@onnxscript.script(custom_opset)
def Selu(X):  # noqa: N802,N803 - the seeds' example
    alpha = 1.67326  # auto wrapped as Constants
    gamma = 1.0507
    alphaX = op.CastLike(alpha, X)  # noqa: N806
    gammaX = op.CastLike(gamma, X)  # noqa: N806
    neg = gammaX * (alphaX * op.Exp(X) - alphaX)
    pos = gammaX * X
    zero = op.CastLike(0, X)
    return op.Where(X <= zero, neg, pos)


def custom_selu(g, X):  # noqa: N803
    return g.onnxscript_op(Selu, X).setType(X.type())


@pytest.fixture
def selu_symbolic():
    """Register ``fn`` for aten::selu at opset 15 for the test."""
    def register(fn):
        oxport.register_custom_op_symbolic("aten::selu", fn, opset_version)
    yield register
    oxport.unregister_custom_op_symbolic("aten::selu", opset_version)


def run_ort(model: onnx.ModelProto, x: torch.Tensor) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.numpy()})


def test_the_seeds_selu_runs_in_onnxruntime(selu_symbolic):
    selu_symbolic(custom_selu)
    x = torch.randn(1, 2, 3, 4, requires_grad=True)
    model = torch.nn.SELU()
    onnx_model = export_proto(model, x, opset_version=opset_version,
                        custom_opsets={"onnx-script": 2})
    (node,) = onnx_model.graph.node
    assert (node.domain, node.op_type) == ("onnx-script", "Selu")
    (function,) = onnx_model.functions
    assert (function.domain, function.name) == ("onnx-script", "Selu")
    assert {o.domain: o.version for o in onnx_model.opset_import} == {
        "": opset_version, "onnx-script": 2}
    assert onnx_model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    compare(model(x), run_ort(onnx_model, x.detach()), rtol=1e-4, atol=1e-5)


def test_the_domain_version_defaults_to_1(selu_symbolic):
    selu_symbolic(custom_selu)
    onnx_model = export_proto(torch.nn.SELU(), torch.randn(3), opset_version=opset_version)
    assert {o.domain: o.version for o in onnx_model.opset_import}["onnx-script"] == 1


def test_two_uses_add_the_function_once(selu_symbolic):
    selu_symbolic(custom_selu)
    model = torch.nn.Sequential(torch.nn.SELU(), torch.nn.SELU())
    onnx_model = export_proto(model, torch.randn(3), opset_version=opset_version)
    assert [n.op_type for n in onnx_model.graph.node] == ["Selu", "Selu"]
    assert len(onnx_model.functions) == 1


def _double_function() -> onnx.FunctionProto:
    """``com.example.fn::Double(X) = X + X`` built with onnx.helper (no onnxscript)."""
    return helper.make_function(
        "com.example.fn", "Double", ["X"], ["Y"], [helper.make_node("Add", ["X", "X"], ["Y"])],
        [helper.make_opsetid("", opset_version)])


def test_a_function_proto_needs_no_onnxscript(selu_symbolic, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as if it were not installed
    selu_symbolic(lambda g, x: g.onnxscript_op(_double_function(), x))
    x = torch.randn(2, 3)
    onnx_model = export_proto(torch.nn.SELU(), x, opset_version=opset_version)
    assert [f.name for f in onnx_model.functions] == ["Double"]
    compare(x + x, run_ort(onnx_model, x), rtol=0, atol=0)


def test_a_clear_error_without_onnxscript(selu_symbolic, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # `import onnxscript` fails
    selu_symbolic(custom_selu)
    with pytest.raises(OnnxExporterError, match="needs the optional dependency onnxscript"):
        oxport.convert(torch.nn.SELU(), torch.randn(3), opset_version=opset_version)


def test_not_a_function(selu_symbolic):
    selu_symbolic(lambda g, x: g.onnxscript_op(lambda v: v, x))
    with pytest.raises(OnnxExporterError, match=r"@onnxscript\.script"):
        oxport.convert(torch.nn.SELU(), torch.randn(3), opset_version=opset_version)
