"""Test cases of the quantized pack: small quantized modules built on first use.

Every static case pins its quantized tensors' qparams after conversion: inputs to
scale 0.04 / zero point 128, every quantized op's output to scale ``STEP`` / zero point
64. Its tolerance is one output quantization step (``atol=STEP``, ``rtol=0``): ONNX
Runtime and PyTorch round the same values, up to float rounding at ties.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.ao.nn.intrinsic as nni
import torch.ao.nn.quantized as nnq
import torch.ao.quantization as tq
from torch import nn

from oxport.opsets.quantized import pack

#: The output scale of every static case, and its tolerance (one quantization step).
STEP = 0.05
_OUT = (STEP, 64)
_IN = (0.04, 128)
#: Inputs within 7 bits, as the x86 qconfig's ``reduce_range`` keeps them: without AVX-512
#: VNNI, fbgemm's 3-d convolutions sum pairs of uint8 x int8 products in int16, which
#: saturates on full-range inputs (eager PyTorch then differs from the exact result by
#: several steps).
_IN_7BIT = (0.08, 64)
#: Eager-mode quantized modules hold TorchScript packed-parameter objects and quantized
#: tensors, which torch.export cannot trace.
_EAGER_QUANTIZED = ("eager-mode quantized modules (packed parameters, quantized tensors) "
                    "are not traceable by torch.export")
_STATIC = {"rtol": 0.0, "atol": STEP * 1.001}
#: Dynamic linear: float output, inputs quantized at run time by both sides alike; but
#: ONNX Runtime runs DequantizeLinear + MatMul of N-d inputs as MatMulNBits, which
#: quantizes the activations again (its own accuracy level), hence 0.02.
_DYNAMIC = {"rtol": 1e-4, "atol": 0.02, "not_exportable": _EAGER_QUANTIZED}
#: fp16 weights: float computations on both sides.
_FP16 = {"rtol": 1e-4, "atol": 1e-4, "not_exportable": _EAGER_QUANTIZED}
#: Dynamic int8 RNNs run as float RNNs: PyTorch's per-step activation quantization error
#: (seen up to 0.008 on these cases, 0.01 on the LSTM model's cell state).
_RNN = {"rtol": 0.0, "atol": 0.02, "not_exportable": _EAGER_QUANTIZED}


class Lazy(nn.Module):
    """A model made by ``factory`` on first use (``train``/``eval`` or a call): quantized
    modules pack their weights for the current engine, too slow to do at plugin load."""

    def __init__(self, factory: Callable[[], nn.Module]) -> None:
        super().__init__()
        self._factory = factory

    def build(self) -> nn.Module:
        if "model" not in self._modules:
            self.model = self._factory()
        return self.model

    def train(self, mode: bool = True) -> Lazy:
        self.build()
        return super().train(mode)

    def forward(self, *args: torch.Tensor) -> Any:
        return self.build()(*args)


class Stubbed(nn.Module):
    """``body`` between a QuantStub (for every input) and a DeQuantStub."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.quant = tq.QuantStub()
        self.body = body
        self.dequant = tq.DeQuantStub()

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.dequant(self.body(*(self.quant(x) for x in inputs)))


class Call(nn.Module):
    """Calls ``fn(functional, *inputs)``; ``functional`` is a FloatFunctional (a
    QFunctional once converted) for the ops that need one."""

    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn
        self.functional = nnq.FloatFunctional()

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.fn(self.functional, *inputs)


class QuantizedCall(nn.Module):
    """Quantizes its inputs (scale 0.04, zero point 128), calls ``fn`` on them and
    dequantizes the result: for quantized ops no module calls."""

    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        quantized = [torch.quantize_per_tensor(x, *_IN, torch.quint8) for x in inputs]
        return self.fn(*quantized).dequantize()


@contextlib.contextmanager
def _engine(name: str | None) -> Iterator[None]:
    previous = torch.backends.quantized.engine
    if name:
        torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous


def pin_qparams(model: nn.Module, inputs: tuple[float, int] = _IN) -> nn.Module:
    """Inputs quantized with ``inputs`` (scale 0.04 / zero point 128), every quantized op's
    output with ``STEP`` / 64."""
    for module in model.modules():
        if isinstance(module, nnq.Quantize):
            module.scale = torch.tensor([inputs[0]])
            module.zero_point = torch.tensor([inputs[1]])
        elif isinstance(getattr(module, "scale", None), float) and hasattr(module, "zero_point"):
            module.scale, module.zero_point = _OUT
    return model


def static(body: Callable[[], nn.Module], *shapes: tuple[int, ...], per_channel: bool = True,
           fuse: list[list[str]] | None = None, engine: str | None = None,
           inputs: tuple[float, int] = _IN) -> Lazy:
    """Post-training static quantization of ``body`` (x86 qconfig: per-channel weights, or
    per-tensor ones), calibrated on seeded random batches, with pinned qparams (``inputs``
    for the model's inputs); weights packed for ``engine`` (the current one by default)."""
    def build() -> nn.Module:
        with _engine(engine):
            return _static(body, shapes, per_channel, fuse, inputs)
    return Lazy(build)


def _static(body: Callable[[], nn.Module], shapes: tuple[tuple[int, ...], ...],
            per_channel: bool, fuse: list[list[str]] | None, inputs: tuple[float, int]
            ) -> nn.Module:
    """Prepare, calibrate, convert, pin."""
    torch.manual_seed(0)
    model = Stubbed(body()).eval()
    model.qconfig = tq.get_default_qconfig("x86") if per_channel else tq.default_qconfig
    if fuse:
        tq.fuse_modules(model, fuse, inplace=True)
    tq.prepare(model, inplace=True)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(4):
            model(*(torch.randn(*shape, generator=generator) for shape in shapes))
    tq.convert(model, inplace=True)
    return pin_qparams(model, inputs)


def dynamic(body: Callable[[], nn.Module], dtype: torch.dtype = torch.qint8,
            per_channel: bool = False, fuse: list[list[str]] | None = None) -> Lazy:
    """``quantize_dynamic`` of ``body``'s Linear, LinearReLU, LSTM and GRU layers (int8
    weights, per tensor or per channel, or fp16 weights)."""
    def build() -> nn.Module:
        torch.manual_seed(0)
        model = body().eval()
        if fuse:
            tq.fuse_modules(model, fuse, inplace=True)
        if dtype == torch.float16:
            qconfig = tq.float16_dynamic_qconfig
        else:
            qconfig = tq.per_channel_dynamic_qconfig if per_channel else tq.default_dynamic_qconfig
        layers = (nn.Linear, nni.LinearReLU, nn.LSTM, nn.GRU)
        return tq.quantize_dynamic(model, dict.fromkeys(layers, qconfig), dtype=dtype)
    return Lazy(build)


def _running_stats(bn: nn.modules.batchnorm._BatchNorm) -> nn.Module:
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


def _seq(*modules: nn.Module) -> nn.Sequential:
    return nn.Sequential(*modules)


_Q = torch.ops.quantized


def _batch_norm_call(name: str) -> Callable[[], nn.Module]:
    """quantized::<name> called with seeded statistics and affine (3 channels)."""
    def build() -> nn.Module:
        generator = torch.Generator().manual_seed(0)
        mean, bias = (torch.rand(3, generator=generator) - 0.5 for _ in range(2))
        var, weight = (torch.rand(3, generator=generator) + 0.5 for _ in range(2))
        op = getattr(_Q, name)
        return QuantizedCall(lambda x: op(x, weight, bias, mean, var, 1e-5, *_OUT))
    return build


def _prelu() -> nn.Module:
    slope = torch.quantize_per_tensor(torch.tensor([0.25, 0.5, 0.1]), 0.01, 0, torch.quint8)
    return QuantizedCall(lambda x: _Q.prelu(x, slope, *_OUT))


def declare(pack: Any) -> None:
    """Declare the pack's cases."""
    def case(op: str | list[str], model: Any, *inputs: Any, **options: Any) -> None:
        quantized = any(name.startswith("quantized::") for name in
                        ([op] if isinstance(op, str) else op))
        pack.case(op, model, *inputs, **{**_STATIC, **options},
                  **({"not_exportable": _EAGER_QUANTIZED} if quantized else {}))

    # quantize / dequantize (atol: one step of the scale used)
    for name, dtype, zero_point in (("quint8", torch.quint8, 64), ("qint8", torch.qint8, -3)):
        case(["aten::quantize_per_tensor", "aten::dequantize"],
             lambda x, d=dtype, z=zero_point: torch.dequantize(
                 torch.quantize_per_tensor(x * 2, STEP, z, d)), (3, 4), name=name)

    # linear and convolutions
    case("quantized::linear", static(lambda: nn.Linear(4, 3), (2, 4), per_channel=False),
         (2, 4), name="per_tensor")
    case("quantized::linear", static(lambda: nn.Linear(4, 3), (2, 5, 4)), (2, 5, 4),
         name="per_channel_3d", min_opset=13)
    case("quantized::linear_relu", static(lambda: _seq(nn.Linear(4, 3), nn.ReLU()), (2, 4),
                                          fuse=[["body.0", "body.1"]]), (2, 4), min_opset=13)
    case("quantized::conv2d", static(lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1),
                                     (1, 3, 6, 6), per_channel=False), (1, 3, 6, 6),
         name="per_tensor")
    case("quantized::conv2d", static(lambda: nn.Conv2d(4, 4, 3, padding=(1, 2), dilation=2,
                                                       groups=2), (1, 4, 7, 7)), (1, 4, 7, 7),
         name="per_channel_groups", min_opset=13)
    case("quantized::conv2d_relu", static(lambda: _seq(nn.Conv2d(3, 4, 3), nn.ReLU()),
                                          (1, 3, 5, 5), fuse=[["body.0", "body.1"]]),
         (1, 3, 5, 5), min_opset=13)
    case("quantized::conv1d", static(lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1),
                                     (2, 3, 9)), (2, 3, 9), min_opset=13)
    case("quantized::conv1d_relu", static(lambda: _seq(nn.Conv1d(3, 4, 3), nn.ReLU()),
                                          (2, 3, 9), per_channel=False,
                                          fuse=[["body.0", "body.1"]]), (2, 3, 9))
    case("quantized::conv3d", static(lambda: nn.Conv3d(2, 4, 3, padding=1), (1, 2, 4, 4, 4),
                                     per_channel=False), (1, 2, 4, 4, 4))
    case("quantized::conv3d_relu", static(lambda: _seq(nn.Conv3d(2, 4, 3), nn.ReLU()),
                                          (1, 2, 4, 4, 4), fuse=[["body.0", "body.1"]],
                                          inputs=_IN_7BIT),
         (1, 2, 4, 4, 4), min_opset=13)
    # The x86 engine's 1-d and 3-d transposed convolutions disagree with their definition
    # (F.conv_transpose on the dequantized tensors); fbgemm's agree.
    case("quantized::conv_transpose1d", static(lambda: nn.ConvTranspose1d(2, 3, 3, stride=2),
                                               (1, 2, 5), per_channel=False, engine="fbgemm"),
         (1, 2, 5))
    case("quantized::conv_transpose2d",
         static(lambda: nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1,
                                           groups=2), (1, 2, 4, 4), per_channel=False),
         (1, 2, 4, 4))
    case("quantized::conv_transpose3d", static(lambda: nn.ConvTranspose3d(2, 3, 2, stride=2),
                                               (1, 2, 2, 3, 3), per_channel=False,
                                               engine="fbgemm", inputs=_IN_7BIT),
         (1, 2, 2, 3, 3))

    # arithmetic and concatenation (FloatFunctional, or the op called directly)
    for op, fn in (("quantized::add", lambda f, a, b: f.add(a, b)),
                   ("quantized::add_relu", lambda f, a, b: f.add_relu(a, b)),
                   ("quantized::mul", lambda f, a, b: f.mul(a, b)),
                   ("quantized::cat", lambda f, a, b: f.cat([a, b], dim=1))):
        case(op, static(lambda fn=fn: Call(fn), (2, 3), (2, 3)), (2, 3), (2, 3))
    case("quantized::matmul", static(lambda: Call(lambda f, a, b: f.matmul(a, b)),
                                     (2, 3, 4), (2, 4, 5)), (2, 3, 4), (2, 4, 5))

    # activations
    case("quantized::relu6", static(lambda: nn.ReLU6(), (2, 5)), lambda: torch.randn(2, 5) * 4)
    case("quantized::hardswish", static(lambda: nn.Hardswish(), (2, 5)), (2, 5))
    case("quantized::mul_relu", QuantizedCall(lambda a, b: _Q.mul_relu(a, b, *_OUT)), (2, 3),
         (2, 3))
    case("quantized::cat_relu", QuantizedCall(lambda a, b: _Q.cat_relu([a, b], 1, *_OUT)),
         (2, 3), (2, 3))
    case("quantized::sigmoid", QuantizedCall(lambda x: _Q.sigmoid(x, *_OUT)), (2, 5))
    case("quantized::leaky_relu", static(lambda: nn.LeakyReLU(0.1), (2, 5)), (2, 5))
    case("quantized::elu", static(lambda: nn.ELU(0.7), (2, 5)), (2, 5))
    case("quantized::celu", QuantizedCall(lambda x: _Q.celu(x, *_OUT, 0.8)), (2, 5))
    case("quantized::softmax", QuantizedCall(lambda x: _Q.softmax(x, 1, *_OUT)), (2, 5))
    # nnq.PReLU itself halves positive inputs in torch 2.13 (weight scale 1/510): call the op.
    case("quantized::prelu", Lazy(_prelu), (1, 3, 4, 4))

    # normalization
    case("quantized::layer_norm", static(lambda: nn.LayerNorm(4), (2, 3, 4)), (2, 3, 4))
    case("quantized::group_norm", static(lambda: nn.GroupNorm(2, 4), (1, 4, 3, 3)),
         (1, 4, 3, 3))
    case("quantized::instance_norm", static(lambda: nn.InstanceNorm2d(3, affine=True),
                                            (1, 3, 4, 4)), (1, 3, 4, 4))
    for dims, bn in ((2, nn.BatchNorm2d), (3, nn.BatchNorm3d)):
        shape = (1, 3) + (4,) * dims
        case(f"quantized::batch_norm{dims}d", static(lambda bn=bn: _running_stats(bn(3)), shape),
             shape)
        case(f"quantized::batch_norm{dims}d_relu",
             static(lambda bn=bn: _seq(_running_stats(bn(3)), nn.ReLU()), shape,
                    fuse=[["body.0", "body.1"]]), shape)

    for name, shape in (("batch_norm", (2, 3, 4, 4)), ("batch_norm1d", (2, 3, 5))):
        for suffix in ("", "_relu"):
            case(f"quantized::{name}{suffix}", Lazy(_batch_norm_call(name + suffix)), shape)

    # dynamic quantization
    pack.case("quantized::linear_dynamic", dynamic(lambda: _seq(nn.Linear(4, 3))), (2, 4),
              name="per_tensor", **_DYNAMIC)
    pack.case("quantized::linear_dynamic", dynamic(lambda: _seq(nn.Linear(4, 3)),
                                                   per_channel=True),
              (2, 5, 4), name="per_channel_3d", min_opset=13, **_DYNAMIC)
    pack.case("quantized::linear_relu_dynamic",
              dynamic(lambda: _seq(nn.Linear(4, 3), nn.ReLU()), fuse=[["0", "1"]]), (2, 4),
              **_DYNAMIC)
    pack.case("quantized::linear_dynamic_fp16",
              dynamic(lambda: _seq(nn.Linear(4, 3)), torch.float16), (2, 4), **_FP16)
    pack.case("quantized::linear_relu_dynamic_fp16",
              dynamic(lambda: _seq(nn.Linear(4, 3), nn.ReLU()), torch.float16, fuse=[["0", "1"]]),
              (2, 4), **_FP16)
    for op, rnn in (("aten::quantized_lstm", nn.LSTM), ("aten::quantized_gru", nn.GRU)):
        pack.case(op, dynamic(lambda rnn=rnn: _seq(rnn(4, 5, num_layers=2, bidirectional=True,
                                                       batch_first=True))),
                  (2, 3, 4), name="int8", min_opset=9, **_RNN)
        pack.case(op, dynamic(lambda rnn=rnn: _seq(rnn(4, 5)), torch.float16), (3, 2, 4),
                  name="fp16", min_opset=9, **_FP16)


declare(pack)
pack.case("aten::fake_quantize_per_tensor_affine",
          lambda x: torch.fake_quantize_per_tensor_affine(x, 0.05, 3, -128, 127), (2, 3, 4))
pack.case("aten::fake_quantize_per_tensor_affine",
          lambda x, s, z: torch.fake_quantize_per_tensor_affine(x, s, z, 0, 255), (2, 6),
          lambda: torch.tensor([0.02]), lambda: torch.tensor([100], dtype=torch.int32),
          name="tensor_qparams", min_opset=13)
pack.case("aten::fake_quantize_per_tensor_affine",
          lambda x: torch.fake_quantize_per_tensor_affine(x * 40, 0.5, 3, 0, 127), (2, 6),
          name="range_0_127", min_opset=13)
pack.case("aten::fake_quantize_per_channel_affine",
          lambda x: torch.fake_quantize_per_channel_affine(
              x * 40, torch.tensor([0.5, 0.25]), torch.tensor([3, 0], dtype=torch.int32), 0,
              0, 127), (2, 6), name="range_0_127")
pack.case("aten::fake_quantize_per_channel_affine",
          lambda x: torch.fake_quantize_per_channel_affine(
              x, torch.tensor([0.01, 0.05, 0.1]), torch.tensor([0, 10, -5], dtype=torch.int32), 1,
              -128, 127), (2, 3, 4), input_names=["x"], dynamic_axes={"x": [0, 2]})
