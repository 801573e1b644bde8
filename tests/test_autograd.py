"""autograd Functions (``prim::PythonOp``): static symbolic methods, a registered
``prim::PythonOp`` symbolic, inlining, and keeping Functions as one node."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport import symbolic_helper as sh
from oxport.errors import FallbackWarning, UnsupportedOperatorError
from oxport.testing import compare
from oxport.types import OperatorExportTypes
from tests.helpers import export_proto


class MyRelu(torch.autograd.Function):
    """The seeds' MyRelu, with a static symbolic method."""

    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def symbolic(g, input):
        return g.op("Clip", input, g.op("Constant", value_t=torch.tensor(0, dtype=torch.float)))


class MyClip(torch.autograd.Function):
    """The seeds' MyClip: no symbolic method, a float argument."""

    @staticmethod
    def forward(ctx, input, min):
        ctx.save_for_backward(input)
        return input.clamp(min=min)


class MyPlainRelu(torch.autograd.Function):
    """The MyRelu of the seeds' PythonOp example: no symbolic method."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)


class MyLogExp(torch.autograd.Function):
    """The seeds' MyLogExp: no symbolic, inlined."""

    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        h = input.exp()
        return h.log().log()


class Apply(torch.nn.Module):
    def __init__(self, function, *extra):
        super().__init__()
        self.function, self.extra = function, extra

    def forward(self, x):
        return self.function.apply(x, *self.extra)


def run_ort(model: onnx.ModelProto, *inputs: torch.Tensor) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {n: x.numpy() for n, x in zip(names, inputs)})


def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node if n.op_type != "Constant"]


def test_static_symbolic_method():
    x = torch.randn(3, 4)
    model = export_proto(Apply(MyRelu), (x,), opset_version=11)
    assert ops(model) == ["Clip"]
    compare(torch.relu(x), run_ort(model, x), rtol=0, atol=0)


class ScaledClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, low, scale):
        return input.clamp(min=low) * scale

    @staticmethod
    def symbolic(g, input, low, scale):
        assert (low, scale) == (0.25, 3.0)  # non-tensor arguments in their places
        return g.op("Mul", g.op("Clip", input, g.constant(torch.tensor(low))), scale)


def test_static_symbolic_gets_non_tensor_arguments_in_place():
    x = torch.randn(5)
    model = export_proto(Apply(ScaledClip, 0.25, 3.0), (x,), opset_version=13)
    assert ops(model) == ["Clip", "Mul"]
    compare(ScaledClip.apply(x, 0.25, 3.0), run_ort(model, x), rtol=1e-6, atol=1e-6)


# -- a registered prim::PythonOp symbolic --------------------------------------------------
class ClipAndRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return MyPlainRelu.apply(MyClip.apply(x, 0.5)) + MyClip.apply(self.weight, -0.5)


@pytest.fixture
def python_op_symbolic():
    def register(fn):
        oxport.register_custom_op_symbolic("prim::PythonOp", fn, 1)
    yield register
    oxport.unregister_custom_op_symbolic("prim::PythonOp", 1)


def test_registered_python_op_symbolic(python_op_symbolic):
    seen = []

    def symbolic_python_op(ctx: oxport.SymbolicContext, g, *args, **kwargs):
        n = ctx.cur_node
        assert n is g.original_node and n.kind() == "prim::PythonOp"
        seen.append((kwargs["name"], [a.requiresGrad() if sh._is_value(a) else a for a in args],
                     [o.requiresGrad() for o in n.outputs()]))
        name = kwargs["name"]
        if name == "MyClip":
            ret = g.op("Clip", args[0], args[1])
        elif name == "MyPlainRelu":
            ret = g.op("Relu", args[0])
        else:
            return sh._unimplemented("prim::PythonOp", "unknown node kind: " + name)
        ret.setType(n.output().type())  # copy type and shape from the original node
        return ret

    python_op_symbolic(symbolic_python_op)
    model, x = ClipAndRelu(), torch.randn(3, 4)
    onnx_model = export_proto(model, (x,), opset_version=13, do_constant_folding=False)
    assert sorted(ops(onnx_model)) == ["Add", "Clip", "Clip", "Relu"]
    assert [name for name, _, _ in seen] == ["MyClip", "MyPlainRelu", "MyClip"]
    # The plain input does not require grad; the parameter does; 0.5 arrives as a float.
    assert seen[0][1] == [False, 0.5] and seen[2][1] == [True, -0.5]
    # Traced in the caller's grad mode, as by torch.onnx: an output requires grad where an
    # input does.
    assert [outputs for _, _, outputs in seen] == [[False], [False], [True]]
    compare(model(x), run_ort(onnx_model, x), rtol=1e-6, atol=1e-6)


def test_python_op_symbolic_without_context_gets_name(python_op_symbolic):
    def symbolic_python_op(g, *args, name, **kwargs):
        if name != "MyPlainRelu":
            sh._unimplemented("prim::PythonOp", f"unknown Function {name}")
        return g.op("Relu", args[0])

    python_op_symbolic(symbolic_python_op)
    x = torch.randn(4)
    assert ops(export_proto(Apply(MyPlainRelu), (x,))) == ["Relu"]
    # A Function it declines is inlined by the built-in plugin.
    assert ops(export_proto(Apply(MyLogExp), (x,))) == ["Exp", "Log", "Log"]


# -- inlining ----------------------------------------------------------------------------
def test_inlining_the_seeds_mylogexp():
    x = torch.rand(1) + 0.5
    model = export_proto(Apply(MyLogExp), (x,))
    assert [(n.domain, n.op_type) for n in model.graph.node] == [
        ("", "Exp"), ("", "Log"), ("", "Log")]
    compare(MyLogExp.apply(x), run_ort(model, x), rtol=1e-5, atol=1e-6)


class Outer(torch.autograd.Function):
    """Two outputs of one type, returned in another order than computed; a nested Function."""

    @staticmethod
    def forward(ctx, input, scale):
        inner = MyLogExp.apply(input + 2)
        doubled = inner * scale
        return doubled, inner


def test_inlining_multiple_outputs_and_nested_functions():
    x = torch.rand(2, 3)
    model = export_proto(Apply(Outer, 3.0), (x,))
    assert "Exp" in ops(model) and len(model.graph.output) == 2
    compare(Outer.apply(x, 3.0), run_ort(model, x), rtol=1e-5, atol=1e-6)


# -- keeping a Function as one node ---------------------------------------------------------
@pytest.mark.parametrize("mode", [OperatorExportTypes.ONNX_FALLTHROUGH,
                                  OperatorExportTypes.ONNX_ATEN_FALLBACK])
@pytest.mark.parametrize("inlining", [False, True])
def test_fallback_modes_keep_the_function_as_one_node(mode, inlining):
    with pytest.warns(FallbackWarning, match="prim::PythonOp"):
        model = export_proto(Apply(MyLogExp), (torch.rand(3),), operator_export_type=mode,
                       autograd_inlining=inlining)
    (node,) = model.graph.node
    assert (node.domain, node.op_type) == ("prim", "PythonOp")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["name"] == b"MyLogExp" and attrs["module"] == __name__.encode()
    assert list(node.input) == [model.graph.input[0].name]


def test_static_symbolic_wins_in_fallback_modes():
    model = export_proto(Apply(MyRelu), (torch.rand(3),), opset_version=11,
                   operator_export_type=OperatorExportTypes.ONNX_FALLTHROUGH)
    assert ops(model) == ["Clip"]


def test_no_inlining_without_fallback_is_unsupported():
    with pytest.raises(UnsupportedOperatorError, match="MyLogExp .*autograd_inlining=False"):
        oxport.convert(Apply(MyLogExp), (torch.rand(3),), autograd_inlining=False)
