"""Quantized models exported as QDQ ONNX and run in ONNX Runtime against eager PyTorch.

Tolerances:
- the statically quantized ResNet: at most two steps of the output scale (the fc's
  ``scale``) anywhere, and at least 95% of the scores within one step (seen: 99.2% over
  160 images). Each quantized op agrees within one step of its own output scale (an
  off-by-one at ties, in about 0.01% of values: PyTorch's add multiplies by the inverse
  scale, ONNX Runtime's fused integer kernels requantize their own way); such a flip
  early in the network moves a few scores by one more step.
- the dynamically quantized LSTM + Linear: ``atol=0.02``. PyTorch quantizes every step's
  input and hidden state to 7-bit uint8 at run time; ONNX's LSTM cannot, so it runs in
  float with the dequantized int8 weights (max. error seen 0.002 on the scores, 0.01 on c_n).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.ao.quantization as tq
import torch.nn.functional as F
from torch import nn

import oxport
from oxport.errors import UnsupportedOperatorError
from oxport.opsets.cases.quantized import QuantizedCall
from tests.models.quantized import dynamic_lstm, quantized_resnet

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore:.*quantiz.*:UserWarning")


def _run(model: nn.Module, *inputs: torch.Tensor, opset: int,
         example: tuple | None = None) -> tuple[list, onnx.ModelProto]:
    """ONNX Runtime's outputs on ``inputs`` (the feeds; ``example``: the args exported,
    when they differ, as a quantized tensor's three parts)."""
    proto = oxport.convert(model, example or inputs, opset_version=opset).model_proto
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds), proto


@pytest.fixture(scope="module")
def resnet() -> nn.Module:
    return quantized_resnet()


@pytest.mark.slow
@pytest.mark.parametrize("opset", [13, 20])
def test_quantized_resnet_matches_eager(resnet, opset):
    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    (scores,), _ = _run(resnet, x, opset=opset)
    steps = np.abs(scores - resnet(x).numpy()) / resnet.fc.scale
    assert steps.max() <= 2.001, steps.max()
    assert (steps <= 1.001).mean() >= 0.95, (steps > 1.001).mean()


def _producer(proto: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {out: node for node in proto.graph.node for out in node.output}


def test_quantized_resnet_stores_int8_weights_per_channel(resnet):
    x = torch.randn(1, 3, 32, 32)
    _, proto = _run(resnet, x, opset=13)
    initializers = {i.name: i for i in proto.graph.initializer}
    producer = _producer(proto)
    weighted = [n for n in proto.graph.node if n.op_type in ("Conv", "MatMul")]
    assert len(weighted) == 11  # 10 convolutions and the fc
    for node in weighted:
        dequantize = producer[node.input[1]]
        assert dequantize.op_type == "DequantizeLinear"
        assert initializers[dequantize.input[0]].data_type == onnx.TensorProto.INT8
        axis = [a.i for a in dequantize.attribute if a.name == "axis"]
        assert axis == [0 if node.op_type == "Conv" else 1]  # the fc's weight is stored as W.T
    assert not any(i.data_type == onnx.TensorProto.FLOAT and len(i.dims) == 4
                   for i in proto.graph.initializer), "a conv weight was stored as float"


def test_per_channel_weights_need_opset_13(resnet):
    with pytest.raises(UnsupportedOperatorError, match="quantized::conv2d_relu.*13"):
        oxport.convert(resnet, (torch.randn(1, 3, 32, 32),), opset_version=12)


def _per_tensor_model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(tq.QuantStub(), nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(64, 5), tq.DeQuantStub()).eval()
    model.qconfig = tq.default_qconfig
    tq.fuse_modules(model, [["1", "2"]], inplace=True)
    tq.prepare(model, inplace=True)
    for _ in range(4):
        model(torch.randn(2, 3, 6, 6))
    return tq.convert(model, inplace=True)


@pytest.mark.parametrize("opset", [10, 13])
def test_per_tensor_model_from_opset_10(opset):
    """Opset 10 stores biases as int32 (ONNX Runtime's own rewrite needs Round, opset 11)."""
    model = _per_tensor_model()
    x = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(3))
    (out,), proto = _run(model, x, opset=opset)
    assert np.abs(out - model(x).numpy()).max() <= model[4].scale * 1.001
    tensors = [*proto.graph.initializer,
               *(a.t for n in proto.graph.node if n.op_type == "Constant" for a in n.attribute)]
    int32_biases = [t for t in tensors if t.data_type == onnx.TensorProto.INT32 and t.dims]
    assert len(int32_biases) == (2 if opset == 10 else 0)


@pytest.mark.slow
@pytest.mark.parametrize("opset", [13, 20])
def test_dynamic_lstm_matches_eager(opset):
    model = dynamic_lstm()
    x = torch.randn(7, 3, 8, generator=torch.Generator().manual_seed(2))
    outputs, proto = _run(model, x, opset=opset)
    for got, want in zip(outputs, model(x)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=0, atol=0.02)
    ops = {n.op_type for n in proto.graph.node}
    assert "LSTM" in ops and "QuantizeLinear" in ops  # the head quantizes its input at run time


# -- float ops on quantized tensors (the requantize pass) -------------------------------
_STEP = 0.04  # QuantizedCall's input scale


@pytest.mark.parametrize("name, fn, rounded", [
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 2), True),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (1, 2)), True),
    ("bilinear", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), True),
    ("hardtanh", lambda x: F.hardtanh(x, -0.51, 0.53), True),
    ("sigmoid", torch.sigmoid, True),
    ("tanh", torch.tanh, True),
    ("relu_maxpool_then_mean", lambda x: F.max_pool2d(torch.relu(x), 2).mean((2, 3)), True),
    ("cat", lambda x: torch.cat([x, torch.relu(x)], 1), True),
    ("nearest", lambda x: F.interpolate(x, scale_factor=2), False),
    ("reshape_permute", lambda x: x.reshape(1, 2, 24).permute(0, 2, 1).flatten(1), False),
])
def test_float_ops_on_quantized_tensors_round_like_pytorch(name, fn, rounded):
    model = QuantizedCall(fn)
    x = torch.randn(1, 2, 4, 6, generator=torch.Generator().manual_seed(0)) * 2
    want = model(x).numpy()
    (got,), proto = _run(model, x, opset=17)
    np.testing.assert_allclose(got, want, rtol=0, atol=_STEP * 1.001)
    # Outputs PyTorch rounds are quantized again (to the input's grid or fixed qparams).
    quantize_nodes = sum(n.op_type == "QuantizeLinear" for n in proto.graph.node)
    assert quantize_nodes == (2 if rounded else 1)


class _DequantizeThenPool(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.quantize_per_tensor(x, 0.04, 128, torch.quint8)
        return F.avg_pool2d(q.dequantize(), 2)


def test_dequantize_ends_the_quantized_region():
    """A float op after dequantize() computes in float: no requantization."""
    model = _DequantizeThenPool()
    x = torch.randn(1, 2, 4, 6, generator=torch.Generator().manual_seed(0))
    (got,), proto = _run(model, x, opset=13)
    np.testing.assert_allclose(got, model(x).numpy(), rtol=0, atol=1e-6)
    assert sum(n.op_type == "QuantizeLinear" for n in proto.graph.node) == 1


def test_qint32_activations_are_declined():
    model = QuantizedCall(lambda x: torch.quantize_per_tensor(x.dequantize(), 0.1, 0,
                                                              torch.qint32))
    with pytest.raises(UnsupportedOperatorError, match="int8 and uint8"):
        oxport.convert(model, (torch.randn(2, 3),), opset_version=21)


def test_a_quantized_argument_loads_the_pack_that_splits_it():
    """A quantized argument that meets no quantized op is still three inputs: it stands for
    ``aten::dequantize``, so the quantized pack loads (on demand, in a manager of its own
    here) and its ``oxport_graph_boundary`` hook splits it; relu's quantized result leaves
    as three outputs, quantized again with the argument's scale and zero point."""
    x = torch.quantize_per_tensor(torch.randn(2, 3), 0.1, 2, torch.quint8)
    proto = oxport.convert(nn.ReLU(), (x,), opset_version=17,
                           disable_plugins=["oxport.signal"]).model_proto
    assert [i.name for i in proto.graph.input] == ["input_value", "input_scale",
                                                  "input_zero_point"]
    assert [n.op_type for n in proto.graph.node] == ["Cast", "Cast", "DequantizeLinear", "Relu",
                                                    "QuantizeLinear"]


# -- quantized tensors at the graph's edges --------------------------------------------------
_U8, _F32 = onnx.TensorProto.UINT8, onnx.TensorProto.FLOAT


class _Call(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def _conv2d() -> nn.Module:
    torch.manual_seed(0)
    conv = torch.ao.nn.quantized.Conv2d(3, 4, 3)
    conv.set_weight_bias(torch.quantize_per_tensor(torch.randn(4, 3, 3, 3), 0.05, 0,
                                                   torch.qint8), torch.randn(4))
    conv.scale, conv.zero_point = 0.2, 100
    return conv


def _linear() -> nn.Module:
    torch.manual_seed(0)
    linear = torch.ao.nn.quantized.Linear(6, 5)
    linear.set_weight_bias(torch.quantize_per_tensor(torch.randn(5, 6), 0.05, 0, torch.qint8),
                           torch.randn(5))
    linear.scale, linear.zero_point = 0.3, 120
    return linear


#: (name, model, input shape, output shape): quantized results of quantized ops (whose
#: QuantizeLinear is made before the output's shape is known) and of float ops on a
#: quantized argument: on its grid (relu, reshapes, selections), rounded onto it (pools,
#: clamps, leaky_relu), or on fixed qparams (sigmoid, tanh, hardsigmoid).
_QUANTIZED_RESULTS = [
    ("conv2d_module", _conv2d, (1, 3, 8, 8), (1, 4, 6, 6)),
    ("linear_module", _linear, (2, 6), (2, 5)),
    ("relu", lambda: nn.ReLU(), (1, 4, 2, 3), (1, 4, 2, 3)),
    ("view", lambda: _Call(lambda x: x.view(1, 4, 6)), (1, 4, 2, 3), (1, 4, 6)),
    ("transpose", lambda: _Call(lambda x: x.transpose(1, 2)), (1, 4, 2, 3), (1, 2, 4, 3)),
    ("select", lambda: _Call(lambda x: x.select(1, 1)), (1, 4, 2, 3), (1, 2, 3)),
    ("expand", lambda: _Call(lambda x: x.expand(2, 4, 2, 3)), (1, 4, 2, 3), (2, 4, 2, 3)),
    ("as_strided", lambda: _Call(lambda x: torch.as_strided(x, (2, 2), (1, 2))), (1, 4, 2, 3),
     (2, 2)),
    ("flatten", lambda: _Call(torch.flatten), (1, 2, 3, 4), (24,)),
    ("adaptive_avg_pool2d", lambda: nn.AdaptiveAvgPool2d((5, 7)), (2, 3, 10, 14), (2, 3, 5, 7)),
    ("hardtanh", lambda: nn.Hardtanh(-0.5, 0.7), (1, 4, 2, 3), (1, 4, 2, 3)),
    ("leaky_relu", lambda: nn.LeakyReLU(), (1, 4, 2, 3), (1, 4, 2, 3)),
    ("sigmoid", lambda: nn.Sigmoid(), (1, 4, 2, 3), (1, 4, 2, 3)),
    ("tanh", lambda: nn.Tanh(), (1, 4, 2, 3), (1, 4, 2, 3)),
    ("hardsigmoid", lambda: nn.Hardsigmoid(), (1, 4, 2, 3), (1, 4, 2, 3)),
]


@pytest.mark.parametrize("name, make, shape, out_shape", _QUANTIZED_RESULTS,
                         ids=[case[0] for case in _QUANTIZED_RESULTS])
def test_a_quantized_result_is_three_outputs(name, make, shape, out_shape):
    """As torch.onnx: a quantized output is its integer value (with its shape), its scale
    (float) and its zero point (in the storage type); ONNX Runtime gives eager's."""
    model = make().eval()
    x = torch.quantize_per_tensor(torch.randn(shape, generator=torch.Generator().manual_seed(1)),
                                  0.26, 128, torch.quint8)
    want = model(x)
    got, proto = _run(model, x.int_repr(), torch.tensor(x.q_scale(), dtype=torch.float64),
                      torch.tensor(x.q_zero_point()), opset=17, example=(x,))
    types = [(o.type.tensor_type.elem_type,
              tuple(d.dim_value for d in o.type.tensor_type.shape.dim))
             for o in proto.graph.output]
    assert types == [(_U8, out_shape), (_F32, ()), (_U8, ())]
    np.testing.assert_array_equal(got[0], want.int_repr().numpy())
    assert got[1] == np.float32(want.q_scale()) and got[2] == want.q_zero_point()


def test_fake_quantize_to_0_127_clips_the_integers():
    """PyTorch's default activation fake-quantization rounds into (0, 127): QuantizeLinear
    into uint8, then an integer Clip (opset 13, as torch.onnx); values above 127 steps
    saturate there."""
    model = _Call(lambda x: torch.fake_quantize_per_tensor_affine(x, 0.5, 3, 0, 127))
    x = torch.tensor([150.0, 127.0, 60.0, -5.0, 1.2, 30.0])
    (got,), proto = _run(model, x, opset=13)
    np.testing.assert_array_equal(got, model(x).numpy())
    assert "Clip" in [n.op_type for n in proto.graph.node]
    with pytest.raises(UnsupportedOperatorError, match="opset 13 would support it"):
        oxport.convert(model, (x,), opset_version=12)


class _QuantizedInterpolate(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.quantize_per_tensor(x, 0.04, 128, torch.quint8)
        return F.interpolate(q, scale_factor=1.5).dequantize()


def test_scripted_interpolate_of_a_quantized_tensor():
    """A scripted graph leaves ``quantize_per_tensor``'s result untyped, so F.interpolate's
    loop over its dims stays a loop and the scale factors are computed at run time: Resize
    takes them from that tensor."""
    model = torch.jit.script(_QuantizedInterpolate())
    x = torch.randn(4, 3, 2, 2, generator=torch.Generator().manual_seed(0))
    (got,), _ = _run(model, x, opset=17)
    np.testing.assert_array_equal(got, model(x).numpy())
