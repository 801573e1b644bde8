"""Inception v3 in torchvision's layout, with the auxiliary classifier.

As in torchvision, the auxiliary logits are computed only in training mode; the
``AuxLogits`` head itself is an ordinary module that tests can export on its own
(it needs the 17x17 grid of a 299x299 image, while the main network runs from 75x75).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BasicConv2d(nn.Module):
    """Convolution without bias, batch norm (eps 1e-3), ReLU."""

    def __init__(self, n_in: int, n_out: int, **kwargs: object) -> None:
        super().__init__()
        self.conv = nn.Conv2d(n_in, n_out, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(n_out, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class InceptionA(nn.Module):
    def __init__(self, n_in: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(n_in, 64, kernel_size=1)
        self.branch5x5_1 = BasicConv2d(n_in, 48, kernel_size=1)
        self.branch5x5_2 = BasicConv2d(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(n_in, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(n_in, pool_features, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch5x5 = self.branch5x5_2(self.branch5x5_1(x))
        branch3x3dbl = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        branch_pool = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([self.branch1x1(x), branch5x5, branch3x3dbl, branch_pool], 1)


class InceptionB(nn.Module):
    def __init__(self, n_in: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(n_in, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(n_in, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch3x3dbl = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        branch_pool = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([self.branch3x3(x), branch3x3dbl, branch_pool], 1)


class InceptionC(nn.Module):
    def __init__(self, n_in: int, channels_7x7: int) -> None:
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(n_in, 192, kernel_size=1)
        self.branch7x7_1 = BasicConv2d(n_in, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(n_in, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(n_in, 192, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch7x7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        branch7x7dbl = self.branch7x7dbl_3(self.branch7x7dbl_2(self.branch7x7dbl_1(x)))
        branch7x7dbl = self.branch7x7dbl_5(self.branch7x7dbl_4(branch7x7dbl))
        branch_pool = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([self.branch1x1(x), branch7x7, branch7x7dbl, branch_pool], 1)


class InceptionD(nn.Module):
    def __init__(self, n_in: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(n_in, 192, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(n_in, 192, kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch3x3 = self.branch3x3_2(self.branch3x3_1(x))
        branch7x7x3 = self.branch7x7x3_2(self.branch7x7x3_1(x))
        branch7x7x3 = self.branch7x7x3_4(self.branch7x7x3_3(branch7x7x3))
        branch_pool = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([branch3x3, branch7x7x3, branch_pool], 1)


class InceptionE(nn.Module):
    def __init__(self, n_in: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(n_in, 320, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(n_in, 384, kernel_size=1)
        self.branch3x3_2a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(n_in, 448, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(n_in, 192, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch3x3 = self.branch3x3_1(x)
        branch3x3 = torch.cat([self.branch3x3_2a(branch3x3), self.branch3x3_2b(branch3x3)], 1)
        branch3x3dbl = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        branch3x3dbl = torch.cat([self.branch3x3dbl_3a(branch3x3dbl),
                                  self.branch3x3dbl_3b(branch3x3dbl)], 1)
        branch_pool = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([self.branch1x1(x), branch3x3, branch3x3dbl, branch_pool], 1)


class InceptionAux(nn.Module):
    """The auxiliary classifier on the 17x17x768 grid."""

    def __init__(self, n_in: int, num_classes: int) -> None:
        super().__init__()
        self.conv0 = BasicConv2d(n_in, 128, kernel_size=1)
        self.conv1 = BasicConv2d(128, 768, kernel_size=5)
        self.fc = nn.Linear(768, num_classes)
        # Initialisation scales as torchvision sets them (Inception3 reads those of Conv2d
        # and Linear modules, so only the fc one takes effect).
        self.conv1.stddev = 0.01
        self.fc.stddev = 0.001

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, kernel_size=5, stride=3)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
        return self.fc(x)


def init_weights(model: nn.Module) -> None:
    """torchvision's initialisation: truncated normal weights (std 0.1 unless the module
    sets ``stddev``), batch norm at its defaults."""
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            std = float(getattr(module, "stddev", 0.1))
            nn.init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2, b=2)


class Inception3(nn.Module):
    """Inception v3: stem, Mixed 5b-7c, global pool, dropout, classifier."""

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True,
                 transform_input: bool = False, dropout: float = 0.5) -> None:
        super().__init__()
        self.transform_input = transform_input
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = InceptionA(192, pool_features=32)
        self.Mixed_5c = InceptionA(256, pool_features=64)
        self.Mixed_5d = InceptionA(288, pool_features=64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, channels_7x7=128)
        self.Mixed_6c = InceptionC(768, channels_7x7=160)
        self.Mixed_6d = InceptionC(768, channels_7x7=160)
        self.Mixed_6e = InceptionC(768, channels_7x7=192)
        self.AuxLogits = InceptionAux(768, num_classes) if aux_logits else None
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(2048, num_classes)
        init_weights(self)

    def _transform_input(self, x: torch.Tensor) -> torch.Tensor:
        """ImageNet normalisation re-expressed for inputs normalised to [-1, 1]."""
        x_ch0 = torch.unsqueeze(x[:, 0], 1) * (0.229 / 0.5) + (0.485 - 0.5) / 0.5
        x_ch1 = torch.unsqueeze(x[:, 1], 1) * (0.224 / 0.5) + (0.456 - 0.5) / 0.5
        x_ch2 = torch.unsqueeze(x[:, 2], 1) * (0.225 / 0.5) + (0.406 - 0.5) / 0.5
        return torch.cat((x_ch0, x_ch1, x_ch2), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if self.transform_input:
            x = self._transform_input(x)
        x = self.maxpool1(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))))
        x = self.maxpool2(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)))
        x = self.Mixed_6a(self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x))))
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(x))))
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = torch.flatten(self.dropout(self.avgpool(x)), 1)
        x = self.fc(x)
        if aux is not None:
            return x, aux
        return x


def inception_v3(num_classes: int = 1000, transform_input: bool = False) -> Inception3:
    """torchvision's ``inception_v3(weights=None)``: auxiliary head included."""
    return Inception3(num_classes=num_classes, aux_logits=True, transform_input=transform_input)
