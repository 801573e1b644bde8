"""ResNet builders in torchvision's layout: BasicBlock (ResNet-18/34), Bottleneck (ResNet-50).

``width`` scales every channel count (64 in the real networks) so tests can use a
narrow, fast copy of the same architecture.
"""

from __future__ import annotations

import torch
from torch import nn


def _conv3x3(n_in: int, n_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(n_in, n_out, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(n_in: int, n_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(n_in, n_out, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection."""

    expansion = 1

    def __init__(self, n_in: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv3x3(n_in, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), with a residual connection."""

    expansion = 4

    def __init__(self, n_in: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv1x1(n_in, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """Stem, four stages of residual blocks, global average pool, classifier."""

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: list[int],
                 num_classes: int = 1000, width: int = 64) -> None:
        super().__init__()
        self.n_in = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._stage(block, width, layers[0])
        self.layer2 = self._stage(block, width * 2, layers[1], stride=2)
        self.layer3 = self._stage(block, width * 4, layers[2], stride=2)
        self.layer4 = self._stage(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

    def _stage(self, block: type[BasicBlock] | type[Bottleneck], planes: int, blocks: int,
               stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.n_in != planes * block.expansion:
            downsample = nn.Sequential(_conv1x1(self.n_in, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.n_in, planes, stride, downsample)]
        self.n_in = planes * block.expansion
        layers += [block(self.n_in, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet18(num_classes: int = 1000, width: int = 64) -> ResNet:
    """ResNet-18: BasicBlocks [2, 2, 2, 2]."""
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes, width)


def resnet50(num_classes: int = 1000, width: int = 64) -> ResNet:
    """ResNet-50: Bottlenecks [3, 4, 6, 3]."""
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes, width)
