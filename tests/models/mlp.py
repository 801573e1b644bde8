"""Multi-layer perceptrons: a small classifier and a deep stack for depth benchmarks."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """Linear layers with ReLU between them and a log-softmax head."""

    def __init__(self, sizes: tuple[int, ...] = (32, 64, 64, 10), dropout: float = 0.1) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
                layers.append(nn.Dropout(dropout))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.layers(x), dim=-1)


def mlp_stack(depth: int, width: int = 16) -> nn.Sequential:
    """``depth`` Linear+ReLU blocks of the same width (export time should be linear in it)."""
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)
