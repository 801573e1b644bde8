"""DenseNet-121 in torchvision's layout (growth rate 32, blocks 6-12-24-16).

Each dense layer concatenates every earlier feature map of its block (``torch.cat``),
applies BN-ReLU-1x1 conv (``bn_size * growth_rate`` wide) and BN-ReLU-3x3 conv;
transitions halve the channels and the resolution.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _DenseLayer(nn.Module):
    def __init__(self, n_in: int, growth_rate: int, bn_size: int, drop_rate: float) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(n_in)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(n_in, bn_size * growth_rate, kernel_size=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, padding=1,
                               bias=False)
        self.drop_rate = drop_rate

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        bottleneck = self.conv1(self.relu1(self.norm1(torch.cat(features, 1))))
        new = self.conv2(self.relu2(self.norm2(bottleneck)))
        if self.drop_rate > 0:
            new = F.dropout(new, p=self.drop_rate, training=self.training)
        return new


class _DenseBlock(nn.ModuleDict):
    def __init__(self, num_layers: int, n_in: int, bn_size: int, growth_rate: int,
                 drop_rate: float) -> None:
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}",
                            _DenseLayer(n_in + i * growth_rate, growth_rate, bn_size, drop_rate))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(n_in)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(n_in, n_out, kernel_size=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """Stem (7x7 conv, max pool), dense blocks with transitions, BN, global pool, linear."""

    def __init__(self, growth_rate: int = 32, block_config: tuple[int, ...] = (6, 12, 24, 16),
                 num_init_features: int = 64, bn_size: int = 4, drop_rate: float = 0.0,
                 num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential()
        self.features.add_module("conv0", nn.Conv2d(3, num_init_features, kernel_size=7,
                                                    stride=2, padding=3, bias=False))
        self.features.add_module("norm0", nn.BatchNorm2d(num_init_features))
        self.features.add_module("relu0", nn.ReLU(inplace=True))
        self.features.add_module("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        n = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}",
                                     _DenseBlock(num_layers, n, bn_size, growth_rate, drop_rate))
            n += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", _Transition(n, n // 2))
                n //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(n))
        self.classifier = nn.Linear(n, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight)
            elif isinstance(module, nn.Linear):
                nn.init.constant_(module.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.features(x), inplace=True)
        out = torch.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


def densenet121(num_classes: int = 1000) -> DenseNet:
    """DenseNet-121: growth rate 32, blocks (6, 12, 24, 16), 64 initial features."""
    return DenseNet(32, (6, 12, 24, 16), 64, num_classes=num_classes)
