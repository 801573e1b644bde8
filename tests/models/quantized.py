"""Quantized model fixtures (eager-mode ``torch.ao.quantization``).

``quantized_resnet``: a narrow ResNet (stem conv-bn-relu, max pool, two stages of basic
blocks with a strided projection shortcut, adaptive average pool, linear) with fused
conv-bn(-relu), residuals through ``FloatFunctional.add`` (``quantized::add``) and a
ReLU, post-training statically quantized with the x86 qconfig (per-channel weights) and
calibrated on seeded random batches.

``dynamic_lstm``: a two-layer LSTM and a Linear head, dynamically quantized (int8
weights) with ``quantize_dynamic``.
"""

from __future__ import annotations

import torch
import torch.ao.nn.quantized as nnq
import torch.ao.quantization as tq
from torch import nn


class QuantBlock(nn.Module):
    """Two 3x3 conv-bn (the first with ReLU) and a residual ``FloatFunctional.add``."""

    def __init__(self, n_in: int, n_out: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(n_in, n_out, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(n_out)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(n_out, n_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(n_out)
        self.downsample = None
        if stride != 1 or n_in != n_out:
            self.downsample = nn.Sequential(nn.Conv2d(n_in, n_out, 1, stride, bias=False),
                                            nn.BatchNorm2d(n_out))
        self.skip = nnq.FloatFunctional()
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(self.skip.add(out, identity))

    def fusions(self, prefix: str) -> list[list[str]]:
        groups = [[f"{prefix}.conv1", f"{prefix}.bn1", f"{prefix}.relu1"],
                  [f"{prefix}.conv2", f"{prefix}.bn2"]]
        if self.downsample is not None:
            groups.append([f"{prefix}.downsample.0", f"{prefix}.downsample.1"])
        return groups


class QuantResNet(nn.Module):
    """A narrow ResNet between a QuantStub and a DeQuantStub."""

    def __init__(self, width: int = 8, num_classes: int = 10) -> None:
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = nn.Sequential(QuantBlock(width, width), QuantBlock(width, width))
        self.layer2 = nn.Sequential(QuantBlock(width, 2 * width, stride=2),
                                    QuantBlock(2 * width, 2 * width))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, num_classes)
        self.dequant = tq.DeQuantStub()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(self.quant(x)))))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.dequant(self.fc(x))

    def fusions(self) -> list[list[str]]:
        groups = [["conv1", "bn1", "relu"]]
        for stage in ("layer1", "layer2"):
            for index, block in enumerate(getattr(self, stage)):
                groups += block.fusions(f"{stage}.{index}")
        return groups


def _randomize_batch_norms(model: nn.Module, generator: torch.Generator) -> None:
    """Give every BatchNorm non-trivial statistics and affine, as a trained model has."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                count = module.num_features
                module.running_mean.copy_(torch.rand(count, generator=generator) - 0.5)
                module.running_var.copy_(torch.rand(count, generator=generator) + 0.5)
                module.weight.copy_(torch.rand(count, generator=generator) + 0.5)
                module.bias.copy_(torch.rand(count, generator=generator) - 0.5)


def quantized_resnet(seed: int = 0, input_shape: tuple[int, ...] = (2, 3, 32, 32),
                     batches: int = 8) -> nn.Module:
    """The statically quantized ResNet, calibrated on ``batches`` seeded random batches."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = QuantResNet().eval()
    _randomize_batch_norms(model, generator)
    tq.fuse_modules(model, model.fusions(), inplace=True)
    model.qconfig = tq.get_default_qconfig("x86")
    tq.prepare(model, inplace=True)
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*input_shape, generator=generator))
    return tq.convert(model, inplace=True)


class LSTMHead(nn.Module):
    """A two-layer LSTM and a Linear over its outputs; returns (scores, h_n, c_n)."""

    def __init__(self, n_in: int = 8, hidden: int = 16, n_out: int = 5) -> None:
        super().__init__()
        self.lstm = nn.LSTM(n_in, hidden, num_layers=2)
        self.fc = nn.Linear(hidden, n_out)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y, (h, c) = self.lstm(x)
        return self.fc(y), h, c


def dynamic_lstm(seed: int = 0) -> nn.Module:
    """``LSTMHead`` with int8 dynamically quantized LSTM and Linear weights."""
    torch.manual_seed(seed)
    return tq.quantize_dynamic(LSTMHead().eval(), {nn.LSTM, nn.Linear}, dtype=torch.qint8)
