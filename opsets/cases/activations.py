"""Test cases of the ``oxport.activations`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport.opsets.activations import pack

_X = (2, 3, 4)
_HALF = dict(rtol=1e-2, atol=2e-3)  # fp16 cases: ORT may compute in float32 and round once


def _half(*shape):
    return lambda: torch.randn(*shape).half()


def _wide(*shape):
    return lambda: torch.randn(*shape) * 4


pack.case("aten::relu", torch.relu, _X)
pack.case("aten::relu", torch.relu, lambda: torch.randint(-5, 5, (3, 4)), name="int",
          min_opset=8)
pack.case("aten::relu", torch.relu, _half(3, 4), name="fp16", **_HALF)
pack.case("aten::sigmoid", torch.sigmoid, _X)
pack.case("aten::sigmoid", torch.sigmoid, lambda: torch.randint(-5, 5, (3, 4)), name="int")
pack.case("aten::sigmoid", torch.sigmoid, _half(3, 4), name="fp16", **_HALF)
pack.case("aten::tanh", torch.tanh, _X)
for _name in ("relu_", "sigmoid_", "tanh_"):
    pack.case(f"aten::{_name}", lambda x, n=_name: getattr(x, n)(), _X)
pack.case("aten::relu6", F.relu6, _wide(3, 4))
pack.case("aten::hardtanh", lambda x: F.hardtanh(x, -2.0, 1.5), _wide(3, 4))
pack.case("aten::hardtanh_", torch.nn.ReLU6(inplace=True), _wide(3, 4))
pack.case("aten::leaky_relu", lambda x: F.leaky_relu(x, 0.2), _X)
pack.case("aten::leaky_relu_", torch.nn.LeakyReLU(inplace=True), _X)
pack.case("aten::rrelu", torch.nn.RReLU(0.1, 0.3), _X)
pack.case("aten::rrelu_", torch.nn.RReLU(0.1, 0.3, inplace=True), _X)
pack.case("aten::elu", lambda x: F.elu(x, 0.7), _X)
pack.case("aten::elu", lambda x: torch.ops.aten.elu(x, 0.5, 2.0, 1.5), _X, name="scales",
          min_opset=9)
pack.case("aten::elu_", torch.nn.ELU(inplace=True), _X)
pack.case("aten::celu", lambda x: F.celu(x, 1.5), _X)
pack.case("aten::celu", lambda x: F.celu(x, 0.5), _half(3, 4), name="fp16", **_HALF)
pack.case("aten::celu_", torch.nn.CELU(2.0, inplace=True), _X)
pack.case("aten::selu", F.selu, _X)
pack.case("aten::selu_", torch.nn.SELU(inplace=True), _X)
pack.case("aten::softplus", F.softplus, _wide(3, 4))
pack.case("aten::softplus", lambda x: F.softplus(x, beta=2.0, threshold=1.0), _wide(3, 4),
          name="threshold", min_opset=9)
pack.case("aten::log_sigmoid", F.logsigmoid, _wide(3, 4))
pack.case("aten::hardshrink", lambda x: F.hardshrink(x, 0.7), _X)
pack.case("aten::softshrink", lambda x: F.softshrink(x, 0.7), _X)
pack.case("aten::threshold", lambda x: F.threshold(x, 0.3, -2.0), _X)
pack.case("aten::threshold", lambda x: F.threshold(x, 1, 5), lambda: torch.randint(-3, 3, (3, 4)),
          name="int")
pack.case("aten::threshold_", torch.nn.Threshold(0.1, 0.0, inplace=True), _X)
pack.case("aten::hardsigmoid", F.hardsigmoid, _wide(3, 4))
pack.case("aten::hardsigmoid_", torch.nn.Hardsigmoid(inplace=True), _wide(3, 4))
pack.case("aten::hardswish", F.hardswish, _wide(3, 4))
pack.case("aten::hardswish", F.hardswish, lambda: torch.randn(3, 4).half() * 4, name="fp16",
          **_HALF)
pack.case("aten::hardswish_", torch.nn.Hardswish(inplace=True), _wide(3, 4))
pack.case("aten::silu", F.silu, _X)
pack.case("aten::silu_", torch.nn.SiLU(inplace=True), _X)
pack.case("aten::mish", F.mish, _wide(3, 4))
pack.case("aten::mish_", torch.nn.Mish(inplace=True), _wide(3, 4))
pack.case("aten::gelu", F.gelu, _wide(3, 4), name="exact", min_opset=9)
pack.case("aten::gelu", lambda x: F.gelu(x, approximate="tanh"), _wide(3, 4), name="tanh")
pack.case("aten::gelu", F.gelu, lambda: torch.randn(3, 4).half() * 4, name="fp16", min_opset=9,
          **_HALF)
pack.case("aten::glu", F.glu, (3, 8), name="last")
pack.case("aten::glu", lambda x: F.glu(x, 1), (2, 6, 3), name="dim1")
pack.case("aten::prelu", torch.nn.PReLU(), (2, 3, 4, 5), name="shared")
pack.case("aten::prelu", torch.nn.PReLU(3, 0.1), (2, 3, 4, 5), name="channels_4d")
pack.case("aten::prelu", torch.nn.PReLU(3, 0.2), (2, 3, 5), name="channels_3d")
pack.case("aten::prelu", torch.nn.PReLU(4, 0.2), (5, 4), name="channels_2d")
pack.case("aten::prelu", torch.nn.PReLU(1, 0.3), (6,), name="rank1")
pack.case("aten::prelu", torch.nn.PReLU(1, 0.3), lambda: torch.tensor(-1.5), name="0d")


def _script_gelu_softplus(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh") + F.softplus(x, 2.0, 1.0) * 2


pack.case("aten::gelu", _script_gelu_softplus, _wide(3, 4), name="script", script=True,
          min_opset=9)
pack.case("aten::celu", lambda x: F.celu(x, 1.5), lambda: torch.randn(3, 4, dtype=torch.float64),
          name="float64")  # ONNX Runtime has no float64 Elu: computed in float32
pack.case("aten::rrelu", lambda x: torch.rrelu(x, 0.1, 0.3, training=True), _X,
          name="training", check="shape", min_opset=9, max_opset=21)
pack.case("aten::rrelu", lambda x: torch.rrelu(x.abs(), 0.1, 0.3, training=True), _X,
          name="training_nonnegative", min_opset=9, max_opset=21)  # no slope drawn: exact


# -- GELU that the ort target fuses (plugins/targets/gelu.py) ------------------------------
class _BiasGelu(torch.nn.Module):
    """A projection's bias then GELU (BiasGelu; FastGelu with ``approximate="tanh"``)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear, self.approximate = torch.nn.Linear(8, 16), approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x), approximate=self.approximate)


class _TanhBiasGelu(_BiasGelu):
    def __init__(self) -> None:
        super().__init__("tanh")


class _HandTanhGelu(torch.nn.Module):
    """GPT-2's NewGELUActivation, written out (FastGelu)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


pack.case("aten::gelu", _BiasGelu, (2, 3, 8), name="bias_gelu_ort", export_kwargs={"target": "ort"},
          min_opset=9,
          atol=1e-5)
pack.case("aten::gelu", _TanhBiasGelu, (2, 3, 8), name="fast_gelu_ort",
          export_kwargs={"target": "ort"}, atol=1e-5)
pack.case("aten::tanh", _HandTanhGelu, _wide(2, 3, 8), name="hand_tanh_gelu_ort",
          export_kwargs={"target": "ort"}, atol=1e-5)
