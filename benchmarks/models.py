"""The benchmark's model list: each model with example inputs, a second input shape
for its dynamic axes, and whether ``--quick`` and/or only the full run use it.

CNNs and the LSTM language model come from ``tests/models`` (the seeds' list); the
transformers are built from ``transformers`` configs with random weights (no
download). Every model is wrapped so that it takes its inputs positionally and
returns a tuple of tensors: the three exporters then see the same signature.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Positional(nn.Module):
    """Calls ``model`` with named tensors and returns the chosen outputs as a tuple."""

    def __init__(self, model: nn.Module, names: Sequence[str], keys: Sequence[str] = ()) -> None:
        super().__init__()
        self.model = model
        self.names = list(names)
        self.keys = list(keys)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.names, tensors)))
        if self.keys:
            return tuple(getattr(out, key) for key in self.keys)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


@dataclasses.dataclass
class Spec:
    """One benchmark model."""

    name: str
    build: Callable[[], nn.Module]
    #: Example inputs, and inputs at a second size of every dynamic axis.
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    second: Callable[[], tuple[torch.Tensor, ...]]
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict[str, dict[int, str]]
    kind: str  # "cnn", "rnn" or "transformer"
    quick: bool = False
    full_only: bool = False


def _images(n: int, c: int, h: int, w: int | None = None) -> Callable[[], tuple[torch.Tensor]]:
    return lambda: (torch.randn(n, c, h, w or h),)


def _cnn(name: str, build: Callable[[], nn.Module], shape: tuple[int, int, int], *,
         quick: bool = False) -> Spec:
    c, h, w = shape
    return Spec(name, build, _images(2, c, h, w), _images(3, c, h, w), ["input"], ["output"],
                {"input": {0: "batch"}, "output": {0: "batch"}}, "cnn", quick=quick)


def _tokens(vocab: int, batch: int, seq: int, *extra: str) -> Callable[[], tuple[torch.Tensor, ...]]:
    def make() -> tuple[torch.Tensor, ...]:
        ids = torch.randint(0, vocab, (batch, seq))
        ones = [torch.ones(batch, seq, dtype=torch.int64) for _ in extra]
        return (ids, *ones)
    return make


def _hf(name: str, factory: Callable[[], nn.Module], vocab: int, keys: Sequence[str], *,
        quick: bool = False, full_only: bool = False, seq: int = 16) -> Spec:
    names = ["input_ids", "attention_mask"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes[keys[0]] = {0: "batch", 1: "sequence"}
    return Spec(name, lambda: Positional(factory(), names, keys), _tokens(vocab, 2, seq, "mask"),
                _tokens(vocab, 3, seq + 7, "mask"), names, list(keys), axes, "transformer", quick=quick,
                full_only=full_only)


# -- the models ----------------------------------------------------------------------
def _alexnet() -> nn.Module:
    from tests.models.alexnet import alexnet
    return alexnet()


def _vgg16() -> nn.Module:
    from tests.models.vgg import vgg16
    return vgg16()


def _resnet(depth: int) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        from tests.models import resnet
        return getattr(resnet, f"resnet{depth}")()
    return build


def _densenet121() -> nn.Module:
    from tests.models.densenet import densenet121
    return densenet121()


def _inception() -> nn.Module:
    """Inception v3 with batch-norm statistics from two training-mode batches: with the
    default ones its random logits reach 1e8, past what float32 compares at 1e-3. Built
    without the auxiliary classifier, which eval mode never runs (no exporter writes its
    weights, so file ÷ weights would read 0.88)."""
    from tests.models.inception import Inception3
    model = Inception3(aux_logits=False)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.momentum = None  # a plain average of the batches seen
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, 299, 299))
    return model


def _super_resolution() -> nn.Module:
    from tests.models.super_resolution import SuperResolutionNet
    return SuperResolutionNet(upscale_factor=3)


def _dcgan() -> nn.Module:
    from tests.models.dcgan import Generator
    return Generator()


class _LanguageModel(nn.Module):
    """word_language_model's LSTM with its state as inputs and outputs."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int) -> None:
        super().__init__()
        from tests.models.word_language_model import RNNModel
        self.lm = RNNModel("LSTM", ntoken, ninp, nhid, nlayers)

    def forward(self, tokens: torch.Tensor, h: torch.Tensor, c: torch.Tensor
                ) -> tuple[torch.Tensor, ...]:
        out, (h, c) = self.lm(tokens, (h, c))
        return out, h, c


def _lstm_spec(name: str, ntoken: int, size: int, *, quick: bool = False) -> Spec:
    def inputs(seq: int, batch: int) -> Callable[[], tuple[torch.Tensor, ...]]:
        return lambda: (torch.randint(0, ntoken, (seq, batch)), torch.zeros(2, batch, size),
                        torch.zeros(2, batch, size))
    axes = {"tokens": {0: "sequence", 1: "batch"}, "h": {1: "batch"}, "c": {1: "batch"},
            "output": {0: "tokens"}, "h_n": {1: "batch"}, "c_n": {1: "batch"}}
    return Spec(name, lambda: _LanguageModel(ntoken, size, size, 2), inputs(35, 20),
                inputs(21, 7), ["tokens", "h", "c"], ["output", "h_n", "c_n"], axes, "rnn", quick=quick)


def _gpt2(**config: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        from transformers import GPT2Config, GPT2LMHeadModel
        return GPT2LMHeadModel(GPT2Config(use_cache=False, **config))
    return build


def _bert(**config: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        from transformers import BertConfig, BertModel
        return BertModel(BertConfig(**config), add_pooling_layer=False)
    return build


def _llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
        num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048,
        use_cache=False))


def _t5_small() -> nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration
    return T5ForConditionalGeneration(T5Config(
        vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
        use_cache=False))


def _t5_spec() -> Spec:
    names = ["input_ids", "attention_mask", "decoder_input_ids"]

    def inputs(batch: int, seq: int) -> Callable[[], tuple[torch.Tensor, ...]]:
        return lambda: (torch.randint(0, 32128, (batch, seq)),
                        torch.ones(batch, seq, dtype=torch.int64),
                        torch.randint(0, 32128, (batch, seq - 4)))
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "decoder_input_ids": {0: "batch", 1: "target"}, "logits": {0: "batch", 1: "target"}}
    return Spec("t5-small", lambda: Positional(_t5_small(), names, ["logits"]), inputs(2, 16),
                inputs(3, 23), names, ["logits"], axes, "transformer")


def _vit() -> nn.Module:
    from transformers import ViTConfig, ViTModel
    return ViTModel(ViTConfig(), add_pooling_layer=False)


def _vit_spec() -> Spec:
    axes = {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}}
    return Spec("vit-base", lambda: Positional(_vit(), ["pixel_values"], ["last_hidden_state"]),
                _images(2, 3, 224), _images(3, 3, 224), ["pixel_values"], ["last_hidden_state"],
                axes, "transformer")


MODELS: list[Spec] = [
    _cnn("super-resolution", _super_resolution, (1, 224, 224), quick=True),
    _cnn("dcgan-generator", _dcgan, (100, 1, 1), quick=True),
    _cnn("resnet-18", _resnet(18), (3, 224, 224), quick=True),
    _cnn("alexnet", _alexnet, (3, 224, 224)),
    _cnn("vgg-16", _vgg16, (3, 224, 224)),
    _cnn("resnet-50", _resnet(50), (3, 224, 224)),
    _cnn("densenet-121", _densenet121, (3, 224, 224)),
    _cnn("inception-v3", _inception, (3, 299, 299)),
    _lstm_spec("lstm-lm-small", 1000, 64, quick=True),
    _lstm_spec("lstm-lm", 33278, 200),
    _hf("bert-tiny", _bert(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=512), 30522, ["last_hidden_state"], quick=True),
    _hf("gpt2-tiny", _gpt2(n_layer=2, n_embd=128, n_head=2), 50257, ["logits"], quick=True),
    _hf("bert-base", _bert(), 30522, ["last_hidden_state"]),
    _hf("gpt2-small", _gpt2(), 50257, ["logits"]),
    _t5_spec(),
    _hf("llama-style", _llama, 32000, ["logits"]),
    _vit_spec(),
    _hf("gpt2-2.1GB", _gpt2(n_layer=24, n_embd=1280, n_head=20), 50257, ["logits"],
        full_only=True),
]
BY_NAME = {spec.name: spec for spec in MODELS}


def unique_weight_bytes(model: nn.Module) -> int:
    """The bytes of the model's parameters and buffers, each storage region once."""
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    total = 0
    for tensor in model.state_dict(keep_vars=True).values():
        if not isinstance(tensor, torch.Tensor):
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            total += tensor.numel() * tensor.element_size()
    return total
