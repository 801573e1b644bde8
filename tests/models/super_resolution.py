"""The sub-pixel CNN of the ONNX super-resolution tutorial (Shi et al., 2016).

Four convolutions on the luminance channel, then ``pixel_shuffle`` to upscale.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import init


class SuperResolutionNet(nn.Module):
    """``(N, 1, H, W)`` to ``(N, 1, H * r, W * r)`` with ``r = upscale_factor``."""

    def __init__(self, upscale_factor: int = 3) -> None:
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(1, 64, 5, 1, 2)
        self.conv2 = nn.Conv2d(64, 64, 3, 1, 1)
        self.conv3 = nn.Conv2d(64, 32, 3, 1, 1)
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, 3, 1, 1)
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))
