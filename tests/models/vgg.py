"""VGG-16 (configuration "D") with and without batch norm, in torchvision's layout.

``width`` scales the convolution widths (64, 128, 256, 512 at ``width=64``) and
``hidden`` the two hidden classifier layers (4096 in the real networks), so tests can
export a narrow copy of the same architecture.
"""

from __future__ import annotations

import torch
from torch import nn

#: Configuration "D": channel multiples of ``width``, "M" for a 2x2 max pool.
VGG16_CONFIG: list[int | str] = [1, 1, "M", 2, 2, "M", 4, 4, 4, "M", 8, 8, 8, "M", 8, 8, 8, "M"]


class VGG(nn.Module):
    """Convolution stack, adaptive average pool to 7x7, three-layer classifier."""

    def __init__(self, features: nn.Sequential, n_features: int, num_classes: int = 1000,
                 hidden: int = 4096, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(n_features * 7 * 7, hidden),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def _features(config: list[int | str], width: int, batch_norm: bool) -> tuple[nn.Sequential, int]:
    layers: list[nn.Module] = []
    n_in = 3
    for item in config:
        if item == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        n_out = int(item) * width
        layers.append(nn.Conv2d(n_in, n_out, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(n_out))
        layers.append(nn.ReLU(inplace=True))
        n_in = n_out
    return nn.Sequential(*layers), n_in


def vgg16(num_classes: int = 1000, width: int = 64, hidden: int = 4096,
          batch_norm: bool = False) -> VGG:
    """VGG-16; ``batch_norm=True`` gives VGG-16-BN."""
    features, n_features = _features(VGG16_CONFIG, width, batch_norm)
    return VGG(features, n_features, num_classes, hidden)
