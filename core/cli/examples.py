"""Built-in example models for ``oxport export --example NAME``.

Each example builds a randomly initialised model (seeded, so two runs export the same
weights) and example inputs. ``alexnet`` is the quick start's model; ``bert`` needs
the ``transformers`` package and builds a small BERT from a config (no download).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from oxport.cli.common import UsageError


@dataclasses.dataclass(frozen=True)
class Example:
    """A model factory with its example inputs and the names of its inputs and outputs."""

    name: str
    description: str
    build: Callable[[], nn.Module]
    make_inputs: Callable[[], tuple[torch.Tensor, ...]]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]


# -- AlexNet ------------------------------------------------------------------------------
class AlexNet(nn.Module):
    """AlexNet in torchvision's layer layout (61 M parameters)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        conv = [(3, 64, 11, 4, 2), (64, 192, 5, 1, 2), (192, 384, 3, 1, 1),
                (384, 256, 3, 1, 1), (256, 256, 3, 1, 1)]
        layers: list[nn.Module] = []
        for i, (n_in, n_out, kernel, stride, padding) in enumerate(conv):
            layers += [nn.Conv2d(n_in, n_out, kernel, stride, padding), nn.ReLU(inplace=True)]
            if i in (0, 1, 4):
                layers.append(nn.MaxPool2d(kernel_size=3, stride=2))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


# -- ResNet-18 ----------------------------------------------------------------------------
class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection."""

    def __init__(self, n_in: int, n_out: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(n_in, n_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(n_out)
        self.conv2 = nn.Conv2d(n_out, n_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(n_out)
        self.downsample = nn.Sequential()
        if stride != 1 or n_in != n_out:
            self.downsample = nn.Sequential(nn.Conv2d(n_in, n_out, 1, stride, bias=False),
                                            nn.BatchNorm2d(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.downsample(x))


class ResNet18(nn.Module):
    """ResNet-18 in torchvision's layout (11.7 M parameters)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        blocks, n_in = [], 64
        for n_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(n_in, n_out, stride), BasicBlock(n_out, n_out)]
            n_in = n_out
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# -- small models -------------------------------------------------------------------------
def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10), nn.LogSoftmax(dim=-1))


class LSTMTagger(nn.Module):
    """A two-layer LSTM over (batch, sequence, features) with a linear head per step."""

    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 8) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0])


class _BertOutputs(nn.Module):
    """A Hugging Face BertModel returning (last_hidden_state, pooler_output)."""

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state, out.pooler_output


def _bert() -> nn.Module:
    try:
        import transformers
    except ImportError:
        raise UsageError(
            "The bert example needs the transformers package, which is not installed: run "
            "`pip install transformers` (no model is downloaded; the example builds a small "
            "BERT from a config), or pick another example.") from None
    config = transformers.BertConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=128)
    return _BertOutputs(transformers.BertModel(config))


def _images() -> tuple[torch.Tensor, ...]:
    return (torch.randn(1, 3, 224, 224),)


def _tokens() -> tuple[torch.Tensor, ...]:
    return torch.randint(0, 1000, (1, 16)), torch.ones(1, 16, dtype=torch.int64)


EXAMPLES: dict[str, Example] = {e.name: e for e in [
    Example("alexnet", "AlexNet, 1x3x224x224 image -> 1000 class scores (the quick start)",
            AlexNet, _images, ("input",), ("output",)),
    Example("resnet", "ResNet-18, 1x3x224x224 image -> 1000 class scores", ResNet18,
            _images, ("input",), ("output",)),
    Example("mlp", "3-layer perceptron, 1x32 -> 10 log-probabilities", _mlp,
            lambda: (torch.randn(1, 32),), ("input",), ("output",)),
    Example("lstm", "2-layer LSTM tagger, 1x16x32 sequence -> 1x16x8 scores", LSTMTagger,
            lambda: (torch.randn(1, 16, 32),), ("input",), ("output",)),
    Example("bert", "small BERT (2 layers, needs transformers), 1x16 token ids and mask -> "
            "hidden states and pooled output", _bert, _tokens,
            ("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output")),
]}


def get(name: str) -> Example:
    """The example called ``name``; a :class:`UsageError` listing them otherwise."""
    try:
        return EXAMPLES[name]
    except KeyError:
        raise UsageError(
            f"There is no example called {name!r}. Examples: {', '.join(EXAMPLES)}.") from None


def build(example: Example, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...]]:
    """The example's model (in eval mode, weights seeded) and its example inputs."""
    torch.manual_seed(seed)
    model = example.build().eval()
    return model, example.make_inputs()
