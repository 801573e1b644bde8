"""Every public ``torch.nn`` layer, exported in eval mode and checked in ONNX Runtime.

``CASES`` instantiates each layer small (variants by name, ``Layer[variant]``); each is
exported at opsets 13 and 20 (and the newest ONNX Runtime runs, where cheap), checked
with ``onnx.checker`` (full) and compared with eager PyTorch. A layer oxport cannot
export is listed in ``EXPECTED_UNSUPPORTED`` with the op and the reason, and its test
asserts the export raises :class:`~oxport.errors.UnsupportedOperatorError` naming that
op, so the list cannot silently rot. ``test_every_layer_is_listed`` fails when a torch
release adds a layer this table does not know. The attention layers are also exported
with dynamic batch and sequence axes and run at a second size.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import onnx
import oxport
import pytest
import torch
from oxport import testing
from oxport.errors import UnsupportedOperatorError
from torch import nn

OPSETS = (13, 20)


@dataclasses.dataclass
class Case:
    """A layer factory and its inputs (shape tuples become seeded random float32)."""

    make: Callable[[], nn.Module]
    inputs: tuple[Any, ...]
    rtol: float = 1e-3
    atol: float = 1e-4
    #: Also export at the newest opset ONNX Runtime runs (cheap layers only).
    newest: bool = True
    min_opset: int = 0


def case(make: Callable[[], nn.Module], *inputs: Any, **options: Any) -> Case:
    return Case(make, inputs, **options)


def ints(high: int, *shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randint(0, high, shape)


def unit(*shape: int) -> Callable[[], torch.Tensor]:
    """Uniform in (0, 1), for probabilities."""
    return lambda: torch.rand(*shape).clamp(0.05, 0.95)


def signs(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randint(0, 2, shape).float() * 2 - 1


def mask(*shape: int) -> Callable[[], torch.Tensor]:
    """A boolean mask with the first column clear (no fully masked rows)."""
    def make() -> torch.Tensor:
        m = torch.rand(*shape) > 0.6
        m[..., 0] = False
        return m
    return make


class Call(nn.Module):
    """Calls ``fn(layer, *inputs)``: for layers taking keyword arguments or states."""

    def __init__(self, layer: nn.Module, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.layer, self.fn = layer, fn

    def forward(self, *inputs: Any) -> Any:
        return self.fn(self.layer, *inputs)


def call(layer: Callable[[], nn.Module], fn: Callable[..., Any]) -> Callable[[], nn.Module]:
    return lambda: Call(layer(), fn)


def lazy(layer: Callable[[], nn.Module], *example: tuple[int, ...]) -> Callable[[], nn.Module]:
    """A lazy layer, materialized by one call."""
    def make() -> nn.Module:
        module = layer()
        module(*(torch.randn(*shape) for shape in example))
        return module
    return make


def pool_unpool(*size: int) -> Callable[[], nn.Module]:
    """MaxPool then MaxUnpool back to ``size``: torch 2.13 traces F.max_unpool*d only with an
    output_size of Python ints (its size check fails on traced sizes)."""
    pool = getattr(nn, f"MaxPool{len(size)}d")(2, return_indices=True)
    return call(lambda: getattr(nn, f"MaxUnpool{len(size)}d")(2),
                lambda unpool, x: unpool(*pool(x), output_size=list(size)))


def _mha(batch_first: bool, **kw: Any) -> nn.MultiheadAttention:
    return nn.MultiheadAttention(8, 2, batch_first=batch_first, **kw)


def _encoder_layer(batch_first: bool = True, **kw: Any) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=batch_first, **kw)


def _decoder_layer(batch_first: bool = True, **kw: Any) -> nn.TransformerDecoderLayer:
    return nn.TransformerDecoderLayer(8, 2, 16, dropout=0.1, batch_first=batch_first, **kw)


def _causal(n: int) -> Callable[[], torch.Tensor]:
    return lambda: nn.Transformer.generate_square_subsequent_mask(n)


T, B, E = 5, 2, 8  # sequence, batch, embedding for the attention layers
X2, X3, X4, X5 = (3, 6), (2, 3, 5), (1, 4, 6, 6), (1, 2, 4, 4, 4)

CASES: dict[str, Case] = {
    # -- activations ---------------------------------------------------------------
    "CELU": case(lambda: nn.CELU(0.7), X3),
    "ELU": case(lambda: nn.ELU(0.5), X3),
    "GELU": case(nn.GELU, X3),
    "GELU[tanh]": case(lambda: nn.GELU("tanh"), X3),
    "GLU": case(nn.GLU, (2, 4, 6)),
    "Hardshrink": case(lambda: nn.Hardshrink(0.3), X3),
    "Hardsigmoid": case(nn.Hardsigmoid, X3),
    "Hardswish": case(nn.Hardswish, X3),
    "Hardtanh": case(lambda: nn.Hardtanh(-0.5, 0.7), X3),
    "LeakyReLU": case(lambda: nn.LeakyReLU(0.2), X3),
    "LogSigmoid": case(nn.LogSigmoid, X3),
    "Mish": case(nn.Mish, X3),
    "PReLU": case(nn.PReLU, X4),
    "PReLU[channels]": case(lambda: nn.PReLU(4, 0.1), X4),
    "RReLU": case(nn.RReLU, X3),
    "ReLU": case(nn.ReLU, X3),
    "ReLU6": case(nn.ReLU6, X3),
    "SELU": case(nn.SELU, X3),
    "SiLU": case(nn.SiLU, X3),
    "Sigmoid": case(nn.Sigmoid, X3),
    "Softplus": case(lambda: nn.Softplus(2.0, 3.0), X3),
    "Softshrink": case(lambda: nn.Softshrink(0.3), X3),
    "Softsign": case(nn.Softsign, X3),
    "Tanh": case(nn.Tanh, X3),
    "Tanhshrink": case(nn.Tanhshrink, X3),
    "Threshold": case(lambda: nn.Threshold(0.1, -2.0), X3),
    "Softmax": case(lambda: nn.Softmax(1), X3),
    "Softmin": case(lambda: nn.Softmin(-1), X3),
    "Softmax2d": case(nn.Softmax2d, X4),
    "LogSoftmax": case(lambda: nn.LogSoftmax(1), X3),
    # -- convolution ---------------------------------------------------------------
    "Conv1d": case(lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    "Conv2d": case(lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2), X4),
    "Conv2d[same_dilated]": case(lambda: nn.Conv2d(4, 2, (3, 2), padding="same", dilation=2),
                                 X4),
    "Conv2d[reflect]": case(lambda: nn.Conv2d(4, 2, 3, padding=1, padding_mode="reflect"), X4),
    "Conv2d[circular]": case(lambda: nn.Conv2d(4, 2, 3, padding=2, padding_mode="circular"),
                             X4),
    "Conv2d[unbatched]": case(lambda: nn.Conv2d(4, 2, 3), (4, 6, 6)),
    "Conv3d": case(lambda: nn.Conv3d(2, 3, 3, padding=(1, 0, 1), bias=False), X5),
    "ConvTranspose1d": case(lambda: nn.ConvTranspose1d(3, 2, 3, stride=2), (2, 3, 5)),
    "ConvTranspose2d": case(lambda: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1,
                                                       output_padding=1), X4),
    "ConvTranspose2d[groups_dilation]": case(
        lambda: nn.ConvTranspose2d(4, 4, 2, groups=2, dilation=2, bias=False), X4),
    "ConvTranspose3d": case(lambda: nn.ConvTranspose3d(2, 2, 2, stride=2), X5),
    "LazyConv1d": case(lazy(lambda: nn.LazyConv1d(4, 3), (1, 3, 5)), (2, 3, 7)),
    "LazyConv2d": case(lazy(lambda: nn.LazyConv2d(2, 3), (1, 4, 6, 6)), X4),
    "LazyConv3d": case(lazy(lambda: nn.LazyConv3d(2, 3), (1, 2, 4, 4, 4)), X5),
    "LazyConvTranspose1d": case(lazy(lambda: nn.LazyConvTranspose1d(2, 3), (1, 3, 5)),
                                (2, 3, 5)),
    "LazyConvTranspose2d": case(lazy(lambda: nn.LazyConvTranspose2d(2, 3), (1, 4, 6, 6)), X4),
    "LazyConvTranspose3d": case(lazy(lambda: nn.LazyConvTranspose3d(2, 3), (1, 2, 4, 4, 4)),
                                X5),
    # -- pooling -------------------------------------------------------------------
    "AvgPool1d": case(lambda: nn.AvgPool1d(3, 2, 1, count_include_pad=False), (2, 3, 8)),
    "AvgPool2d": case(lambda: nn.AvgPool2d(3, 2, ceil_mode=True), X4),
    "AvgPool2d[divisor]": case(lambda: nn.AvgPool2d(2, divisor_override=3), X4),
    "AvgPool2d[unbatched]": case(lambda: nn.AvgPool2d(3, 1, 1), (4, 6, 6)),
    "AvgPool3d": case(lambda: nn.AvgPool3d(2), X5),
    "MaxPool1d": case(lambda: nn.MaxPool1d(3, 2, padding=1), (2, 3, 8)),
    "MaxPool2d": case(lambda: nn.MaxPool2d(3, 2, ceil_mode=True), X4),
    "MaxPool2d[indices_dilation]": case(lambda: nn.MaxPool2d(2, dilation=2,
                                                             return_indices=True), X4),
    "MaxPool2d[unbatched]": case(lambda: nn.MaxPool2d(2), (4, 6, 6)),
    "MaxPool3d": case(lambda: nn.MaxPool3d(2, padding=1), X5),
    "AdaptiveAvgPool1d": case(lambda: nn.AdaptiveAvgPool1d(4), (2, 3, 8)),
    "AdaptiveAvgPool2d": case(lambda: nn.AdaptiveAvgPool2d((1, 3)), X4),
    "AdaptiveAvgPool2d[global]": case(lambda: nn.AdaptiveAvgPool2d(1), X4),
    "AdaptiveAvgPool2d[unbatched]": case(lambda: nn.AdaptiveAvgPool2d(1), (4, 6, 6)),
    "AdaptiveAvgPool3d": case(lambda: nn.AdaptiveAvgPool3d(2), X5),
    "AdaptiveMaxPool1d": case(lambda: nn.AdaptiveMaxPool1d(4), (2, 3, 8)),
    "AdaptiveMaxPool2d": case(lambda: nn.AdaptiveMaxPool2d(3), X4),
    "AdaptiveMaxPool2d[indices]": case(lambda: nn.AdaptiveMaxPool2d(1, return_indices=True),
                                       X4),
    "AdaptiveMaxPool3d": case(lambda: nn.AdaptiveMaxPool3d(2), X5),
    "LPPool1d": case(lambda: nn.LPPool1d(2, 3, 2), (2, 3, 8)),
    "LPPool2d": case(lambda: nn.LPPool2d(3, 2), X4),
    "LPPool3d": case(lambda: nn.LPPool3d(2, 2), X5),
    "FractionalMaxPool2d": case(lambda: nn.FractionalMaxPool2d(2, output_size=3), X4),
    "FractionalMaxPool3d": case(lambda: nn.FractionalMaxPool3d(2, output_size=2), X5),
    "MaxUnpool1d": case(pool_unpool(8), (2, 3, 8)),
    "MaxUnpool2d": case(pool_unpool(6, 6), X4),
    "MaxUnpool3d": case(pool_unpool(4, 4, 4), X5),
    # -- padding -------------------------------------------------------------------
    "ConstantPad1d": case(lambda: nn.ConstantPad1d((1, 2), 0.5), (2, 3, 4)),
    "ConstantPad2d": case(lambda: nn.ConstantPad2d((1, 0, 2, 1), -1.0), X4),
    "ConstantPad3d": case(lambda: nn.ConstantPad3d(1, 2.0), X5),
    "ZeroPad1d": case(lambda: nn.ZeroPad1d(2), (2, 3, 4)),
    "ZeroPad2d": case(lambda: nn.ZeroPad2d((1, 2, 0, 1)), X4),
    "ZeroPad3d": case(lambda: nn.ZeroPad3d(1), X5),
    "ReflectionPad1d": case(lambda: nn.ReflectionPad1d((2, 1)), (2, 3, 4)),
    "ReflectionPad2d": case(lambda: nn.ReflectionPad2d(2), X4),
    "ReflectionPad3d": case(lambda: nn.ReflectionPad3d(1), X5),
    "ReplicationPad1d": case(lambda: nn.ReplicationPad1d((2, 1)), (2, 3, 4)),
    "ReplicationPad2d": case(lambda: nn.ReplicationPad2d(2), X4),
    "ReplicationPad3d": case(lambda: nn.ReplicationPad3d(1), X5),
    "CircularPad1d": case(lambda: nn.CircularPad1d((2, 1)), (2, 3, 4)),
    "CircularPad2d": case(lambda: nn.CircularPad2d(2), X4),
    "CircularPad3d": case(lambda: nn.CircularPad3d(1), X5),
    # -- normalization -------------------------------------------------------------
    "BatchNorm1d": case(lambda: nn.BatchNorm1d(3), (2, 3, 5)),
    "BatchNorm1d[2d_input]": case(lambda: nn.BatchNorm1d(6), X2),
    "BatchNorm2d": case(lambda: nn.BatchNorm2d(4, affine=False), X4),
    "BatchNorm2d[no_running_stats]": case(lambda: nn.BatchNorm2d(4, track_running_stats=False),
                                          X4),
    "BatchNorm3d": case(lambda: nn.BatchNorm3d(2), X5),
    "LazyBatchNorm1d": case(lazy(nn.LazyBatchNorm1d, (2, 3, 5)), (2, 3, 5)),
    "LazyBatchNorm2d": case(lazy(nn.LazyBatchNorm2d, (2, 4, 6, 6)), X4),
    "LazyBatchNorm3d": case(lazy(nn.LazyBatchNorm3d, (1, 2, 4, 4, 4)), X5),
    "SyncBatchNorm": case(lambda: nn.SyncBatchNorm(4), X4),
    "LayerNorm": case(lambda: nn.LayerNorm(5), X3),
    "LayerNorm[2d_no_bias]": case(lambda: nn.LayerNorm((3, 5), bias=False), X3),
    "LayerNorm[no_affine]": case(lambda: nn.LayerNorm(5, elementwise_affine=False), X3),
    "GroupNorm": case(lambda: nn.GroupNorm(2, 4), X4),
    "GroupNorm[no_affine]": case(lambda: nn.GroupNorm(4, 4, affine=False), X4),
    "InstanceNorm1d": case(lambda: nn.InstanceNorm1d(3), (2, 3, 5)),
    "InstanceNorm2d": case(lambda: nn.InstanceNorm2d(4, affine=True), X4),
    "InstanceNorm2d[running_stats]": case(
        lambda: nn.InstanceNorm2d(4, track_running_stats=True), X4),
    "InstanceNorm3d": case(lambda: nn.InstanceNorm3d(2), X5),
    "LazyInstanceNorm1d": case(lazy(lambda: nn.LazyInstanceNorm1d(affine=True), (2, 3, 5)),
                               (2, 3, 5)),
    "LazyInstanceNorm2d": case(lazy(lambda: nn.LazyInstanceNorm2d(affine=True), X4), X4),
    "LazyInstanceNorm3d": case(lazy(lambda: nn.LazyInstanceNorm3d(affine=True), X5), X5),
    "LocalResponseNorm": case(lambda: nn.LocalResponseNorm(3), X4),
    "CrossMapLRN2d": case(lambda: nn.CrossMapLRN2d(3), X4),
    "RMSNorm": case(lambda: nn.RMSNorm(5), X3),
    "RMSNorm[2d_eps]": case(lambda: nn.RMSNorm((3, 5), eps=1e-3), X3),
    # -- dropout (eval: identity) --------------------------------------------------
    "Dropout": case(nn.Dropout, X3),
    "Dropout1d": case(nn.Dropout1d, (2, 3, 5)),
    "Dropout2d": case(nn.Dropout2d, X4),
    "Dropout3d": case(nn.Dropout3d, X5),
    "AlphaDropout": case(nn.AlphaDropout, X3),
    "FeatureAlphaDropout": case(nn.FeatureAlphaDropout, X4),
    # -- embedding -----------------------------------------------------------------
    "Embedding": case(lambda: nn.Embedding(10, 4, padding_idx=0), ints(10, 2, 5)),
    "Embedding[max_norm]": case(lambda: nn.Embedding(10, 4, max_norm=1.0), ints(10, 2, 5)),
    "EmbeddingBag": case(lambda: nn.EmbeddingBag(10, 4), ints(10, 3, 4)),
    "EmbeddingBag[offsets_sum]": case(
        lambda: nn.EmbeddingBag(10, 4, mode="sum"), ints(10, 8),
        lambda: torch.tensor([0, 3, 3, 5])),
    "EmbeddingBag[max]": case(lambda: nn.EmbeddingBag(10, 4, mode="max"), ints(10, 3, 4)),
    "EmbeddingBag[per_sample_weights]": case(
        call(lambda: nn.EmbeddingBag(10, 4, mode="sum"), lambda m, x, w: m(x, per_sample_weights=w)),
        ints(10, 3, 4), (3, 4)),
    # -- linear and shape ----------------------------------------------------------
    "Identity": case(nn.Identity, X3),
    "Linear": case(lambda: nn.Linear(5, 4), X3),
    "Linear[2d_no_bias]": case(lambda: nn.Linear(6, 4, bias=False), X2),
    "LazyLinear": case(lazy(lambda: nn.LazyLinear(4), (1, 5)), X3),
    "Bilinear": case(lambda: nn.Bilinear(5, 3, 4), (2, 5), (2, 3)),
    "Flatten": case(nn.Flatten, X4),
    "Unflatten": case(lambda: nn.Unflatten(1, (2, 2)), X4),
    "PixelShuffle": case(lambda: nn.PixelShuffle(2), X4),
    "PixelUnshuffle": case(lambda: nn.PixelUnshuffle(2), X4),
    "ChannelShuffle": case(lambda: nn.ChannelShuffle(2), X4),
    "Fold": case(lambda: nn.Fold((4, 5), 2), (2, 12, 12)),
    "Unfold": case(lambda: nn.Unfold(2, dilation=1, padding=1, stride=2), X4),
    "Upsample": case(lambda: nn.Upsample(scale_factor=2), X4),
    "Upsample[linear]": case(lambda: nn.Upsample(size=7, mode="linear"), (2, 3, 4)),
    "Upsample[bilinear_aligned]": case(
        lambda: nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=True), X4),
    "Upsample[bicubic]": case(lambda: nn.Upsample(size=(5, 9), mode="bicubic"), X4),
    "Upsample[trilinear]": case(lambda: nn.Upsample(scale_factor=2, mode="trilinear"), X5),
    "UpsamplingNearest2d": case(lambda: nn.UpsamplingNearest2d(scale_factor=2), X4),
    "UpsamplingBilinear2d": case(lambda: nn.UpsamplingBilinear2d(size=(8, 7)), X4),
    "CosineSimilarity": case(nn.CosineSimilarity, (3, 6), (3, 6)),
    "PairwiseDistance": case(lambda: nn.PairwiseDistance(3.0, keepdim=True), (3, 6), (3, 6)),
    # -- recurrent -----------------------------------------------------------------
    "RNN": case(lambda: nn.RNN(4, 5, 2), (3, 2, 4)),
    "RNN[relu_bidirectional_batch_first]": case(
        lambda: nn.RNN(4, 5, nonlinearity="relu", bidirectional=True, batch_first=True),
        (2, 3, 4), (2, 2, 5)),
    "LSTM": case(lambda: nn.LSTM(4, 5), (3, 2, 4)),
    "LSTM[states_bidirectional_2_layers]": case(
        call(lambda: nn.LSTM(4, 5, 2, bidirectional=True), lambda m, x, h, c: m(x, (h, c))),
        (3, 2, 4), (4, 2, 5), (4, 2, 5)),
    "LSTM[proj_size]": case(lambda: nn.LSTM(4, 6, proj_size=3, batch_first=True), (2, 3, 4)),
    "LSTM[unbatched]": case(lambda: nn.LSTM(4, 5), (3, 4)),
    "GRU": case(lambda: nn.GRU(4, 5, batch_first=True), (2, 3, 4)),
    "GRU[bidirectional_states]": case(lambda: nn.GRU(4, 5, bidirectional=True),
                                      (3, 2, 4), (2, 2, 5)),
    "RNNCell": case(lambda: nn.RNNCell(4, 5), (2, 4), (2, 5)),
    "RNNCell[no_state]": case(lambda: nn.RNNCell(4, 5, nonlinearity="relu"), (2, 4)),
    "LSTMCell": case(call(lambda: nn.LSTMCell(4, 5), lambda m, x, h, c: m(x, (h, c))),
                     (2, 4), (2, 5), (2, 5)),
    "LSTMCell[no_state]": case(lambda: nn.LSTMCell(4, 5), (2, 4)),
    "GRUCell": case(lambda: nn.GRUCell(4, 5), (2, 4), (2, 5)),
    "GRUCell[no_state]": case(lambda: nn.GRUCell(4, 5, bias=False), (2, 4)),
    # -- attention and transformers (eval) ------------------------------------------
    "MultiheadAttention": case(
        call(lambda: _mha(False), lambda m, q, k, v: m(q, k, v)), (T, B, E), (4, B, E), (4, B, E)),
    "MultiheadAttention[self_batch_first_no_weights]": case(
        call(lambda: _mha(True), lambda m, x: m(x, x, x, need_weights=False)), (B, T, E)),
    "MultiheadAttention[self_batch_first_padding_mask]": case(
        call(lambda: _mha(True), lambda m, x, p: m(x, x, x, key_padding_mask=p, need_weights=False)),
        (B, T, E), mask(B, T)),
    "MultiheadAttention[self_weights_per_head]": case(
        call(lambda: _mha(True), lambda m, x: m(x, x, x, average_attn_weights=False)), (B, T, E)),
    "MultiheadAttention[causal_mask]": case(
        call(lambda: _mha(False), lambda m, x, a: m(x, x, x, attn_mask=a)), (T, B, E), _causal(T)),
    "MultiheadAttention[bool_masks_batch_first]": case(
        call(lambda: _mha(True), lambda m, q, k, a, p: m(q, k, k, attn_mask=a, key_padding_mask=p)),
        (B, T, E), (B, 4, E), mask(T, 4), mask(B, 4)),
    "MultiheadAttention[seq_first_padding_mask_no_weights]": case(
        call(lambda: _mha(False),
             lambda m, x, p: m(x, x, x, key_padding_mask=p, need_weights=False)),
        (T, B, E), mask(B, T)),
    "MultiheadAttention[unbatched]": case(call(lambda: _mha(True), lambda m, x: m(x, x, x)),
                                          (T, E)),
    "MultiheadAttention[kdim_vdim_bias_kv]": case(
        call(lambda: _mha(False, kdim=6, vdim=3, add_bias_kv=True, add_zero_attn=True),
             lambda m, q, k, v: m(q, k, v)), (T, B, E), (4, B, 6), (4, B, 3)),
    "TransformerEncoderLayer": case(_encoder_layer, (B, T, E), newest=False),
    "TransformerEncoderLayer[padding_mask]": case(
        call(_encoder_layer, lambda m, x, p: m(x, src_key_padding_mask=p)),
        (B, T, E), mask(B, T), newest=False),
    "TransformerEncoderLayer[seq_first_norm_first_gelu]": case(
        lambda: _encoder_layer(False, norm_first=True, activation="gelu"), (T, B, E),
        newest=False),
    "TransformerEncoderLayer[causal]": case(
        call(_encoder_layer, lambda m, x, a: m(x, src_mask=a, is_causal=True)),
        (B, T, E), _causal(T), newest=False),
    "TransformerEncoderLayer[both_masks]": case(
        call(_encoder_layer, lambda m, x, a, p: m(x, src_mask=a, src_key_padding_mask=p)),
        (B, T, E), mask(T, T), mask(B, T), newest=False),
    "TransformerEncoder": case(
        lambda: nn.TransformerEncoder(_encoder_layer(), 2, enable_nested_tensor=False),
        (B, T, E), newest=False),
    "TransformerEncoder[padding_mask]": case(
        call(lambda: nn.TransformerEncoder(_encoder_layer(), 2, norm=nn.LayerNorm(E),
                                   enable_nested_tensor=False),
             lambda m, x, p: m(x, src_key_padding_mask=p)),
        (B, T, E), mask(B, T), newest=False),
    "TransformerEncoder[nested_padding]": case(  # eval + padding mask: a nested tensor
        call(lambda: nn.TransformerEncoder(_encoder_layer(), 2),
             lambda m, x, p: m(x, src_key_padding_mask=p)),
        (B, T, E), lambda: torch.arange(T) >= torch.tensor([[T], [3]]), newest=False),
    "TransformerDecoderLayer": case(
        call(_decoder_layer, lambda m, x, mem: m(x, mem)), (B, T, E), (B, 4, E),
        newest=False),
    "TransformerDecoderLayer[masks_seq_first]": case(
        call(lambda: _decoder_layer(False, norm_first=True),
             lambda m, x, mem, a, p: m(x, mem, tgt_mask=a, memory_key_padding_mask=p)),
        (T, B, E), (4, B, E), _causal(T), mask(B, 4), newest=False),
    "TransformerDecoder": case(
        call(lambda: nn.TransformerDecoder(_decoder_layer(), 2),
             lambda m, x, mem, a: m(x, mem, tgt_mask=a, tgt_is_causal=True)),
        (B, T, E), (B, 4, E), _causal(T), newest=False),
    "Transformer[seq_first_padding_masks]": case(
        call(lambda: nn.Transformer(E, 2, 1, 1, 16),
             lambda m, src, tgt, p, q: m(src, tgt, src_key_padding_mask=p,
                                         tgt_key_padding_mask=q, memory_key_padding_mask=p)),
        (4, B, E), (T, B, E), mask(B, 4), mask(B, T), newest=False),
    "Transformer": case(
        call(lambda: nn.Transformer(E, 2, 1, 1, 16, batch_first=True),
             lambda m, src, tgt, a: m(src, tgt, tgt_mask=a)),
        (B, 4, E), (B, T, E), _causal(T), newest=False),
    # -- losses as outputs -----------------------------------------------------------
    "L1Loss": case(nn.L1Loss, X3, X3),
    "MSELoss": case(lambda: nn.MSELoss(reduction="sum"), X3, X3),
    "SmoothL1Loss": case(lambda: nn.SmoothL1Loss(beta=0.5), X3, X3),
    "HuberLoss": case(lambda: nn.HuberLoss(reduction="none", delta=0.7), X3, X3),
    "BCELoss": case(nn.BCELoss, unit(3, 4), unit(3, 4)),
    "BCELoss[weight]": case(lambda: nn.BCELoss(torch.rand(4), reduction="sum"),
                            unit(3, 4), unit(3, 4)),
    "BCEWithLogitsLoss": case(lambda: nn.BCEWithLogitsLoss(pos_weight=torch.rand(4) + 0.5),
                              (3, 4), unit(3, 4)),
    "CrossEntropyLoss": case(nn.CrossEntropyLoss, (4, 5), ints(5, 4)),
    "CrossEntropyLoss[weight_smoothing_ignore]": case(
        lambda: nn.CrossEntropyLoss(torch.rand(5) + 0.1, ignore_index=1, label_smoothing=0.1),
        (4, 5, 3), ints(5, 4, 3)),
    "CrossEntropyLoss[probabilities]": case(nn.CrossEntropyLoss, (4, 5), unit(4, 5)),
    "NLLLoss": case(lambda: nn.NLLLoss(reduction="none"), (4, 5), ints(5, 4)),
    "NLLLoss[weight]": case(lambda: nn.NLLLoss(torch.rand(5) + 0.1), (4, 5, 2), ints(5, 4, 2)),
    "NLLLoss2d": case(nn.NLLLoss2d, (2, 5, 3, 3), ints(5, 2, 3, 3)),
    "KLDivLoss": case(lambda: nn.KLDivLoss(reduction="batchmean"), (3, 4), unit(3, 4)),
    "KLDivLoss[log_target]": case(lambda: nn.KLDivLoss(reduction="sum", log_target=True),
                                  (3, 4), (3, 4)),
    "PoissonNLLLoss": case(nn.PoissonNLLLoss, (3, 4), unit(3, 4)),
    "PoissonNLLLoss[full]": case(lambda: nn.PoissonNLLLoss(log_input=False, full=True),
                                 unit(3, 4), lambda: torch.rand(3, 4) * 3),
    "GaussianNLLLoss": case(nn.GaussianNLLLoss, (3, 4), (3, 4), unit(3, 4)),
    "CosineEmbeddingLoss": case(lambda: nn.CosineEmbeddingLoss(0.1), (3, 5), (3, 5), signs(3)),
    "HingeEmbeddingLoss": case(nn.HingeEmbeddingLoss, (3, 4), signs(3, 4)),
    "MarginRankingLoss": case(lambda: nn.MarginRankingLoss(0.2), (4,), (4,), signs(4)),
    "MultiLabelMarginLoss": case(nn.MultiLabelMarginLoss, (3, 4),
                                 lambda: torch.tensor([[3, 0, -1, 1], [1, 2, 3, -1],
                                                       [0, -1, 2, 2]])),
    "MultiLabelSoftMarginLoss": case(nn.MultiLabelSoftMarginLoss, (3, 4),
                                     lambda: torch.randint(0, 2, (3, 4)).float()),
    "MultiMarginLoss": case(nn.MultiMarginLoss, (3, 4), ints(4, 3)),
    "SoftMarginLoss": case(nn.SoftMarginLoss, (3, 4), signs(3, 4)),
    "TripletMarginLoss": case(lambda: nn.TripletMarginLoss(0.5), (3, 5), (3, 5), (3, 5)),
    "TripletMarginWithDistanceLoss": case(nn.TripletMarginWithDistanceLoss,
                                          (3, 5), (3, 5), (3, 5)),
    "CTCLoss": case(nn.CTCLoss, lambda: torch.randn(6, 2, 4).log_softmax(2),
                    lambda: torch.randint(1, 4, (2, 3)), lambda: torch.tensor([6, 5]),
                    lambda: torch.tensor([3, 2])),
    "LinearCrossEntropyLoss": case(lambda: nn.LinearCrossEntropyLoss(5, 4), (3, 5), ints(4, 3)),
    "AdaptiveLogSoftmaxWithLoss": case(
        lambda: nn.AdaptiveLogSoftmaxWithLoss(6, 10, [4, 8], div_value=2.0),
        (5, 6), ints(10, 5)),
    "AdaptiveLogSoftmaxWithLoss[log_prob]": case(
        call(lambda: nn.AdaptiveLogSoftmaxWithLoss(6, 10, [4, 8]), lambda m, x: m.log_prob(x)),
        (5, 6)),
}

#: Layers oxport does not export: case name -> (the op the error names, why).
EXPECTED_UNSUPPORTED: dict[str, tuple[str, str]] = {
    "FractionalMaxPool2d": ("aten::fractional_max_pool2d",
                            "pooling regions drawn at random on every call; no ONNX equivalent"),
    "FractionalMaxPool3d": ("aten::fractional_max_pool3d",
                            "pooling regions drawn at random on every call; no ONNX equivalent"),
    "LSTM[proj_size]": ("aten::lstm", ("ONNX LSTM has no projection of the hidden state, "
                                       "and the rnn pack does not unroll one")),
    "CTCLoss": ("aten::ctc_loss", ("a dynamic program over alignments: no ONNX operator, "
                                   "and no Loop decomposition yet")),
}

#: Public ``torch.nn`` Module classes that are not layers to export.
NOT_LAYERS = {
    "Module": "the base class",
    "Container": "deprecated base container",
    "Sequential": "a container; its layers are covered",
    "ModuleList": "a container",
    "ModuleDict": "a container",
    "ParameterList": "a container",
    "ParameterDict": "a container",
    "DataParallel": "multi-device wrapper; export the module it wraps",
    "RNNBase": "base class of RNN/LSTM/GRU",
    "RNNCellBase": "base class of the cells",
}


def _runs() -> list[Any]:
    newest = testing.max_runtime_opset()
    runs = []
    for name, spec in CASES.items():
        opsets = [*OPSETS, newest] if spec.newest and newest not in OPSETS else list(OPSETS)
        runs.extend(pytest.param(name, opset, id=f"{name}-opset{opset}")
                    for opset in opsets if opset >= spec.min_opset)
    return runs


def _inputs(spec: Case) -> tuple[Any, ...]:
    generator = torch.Generator().manual_seed(0)
    made = []
    for item in spec.inputs:
        if callable(item):
            torch.manual_seed(len(made))
            made.append(item())
        else:
            made.append(torch.randn(*item, generator=generator))
    return tuple(made)


def _model(spec: Case) -> nn.Module:
    torch.manual_seed(0)
    return spec.make().eval()


@pytest.mark.parametrize(("name", "opset"), _runs())
def test_layer(name: str, opset: int) -> None:
    spec = CASES[name]
    model, inputs = _model(spec), _inputs(spec)
    if name in EXPECTED_UNSUPPORTED:
        op, _ = EXPECTED_UNSUPPORTED[name]
        with pytest.raises(UnsupportedOperatorError) as info:
            oxport.convert(model, inputs, opset_version=opset)
        assert op in {o.kind for o in info.value.ops}, str(info.value)
        return
    with torch.no_grad():  # eager and the trace in one grad mode: layers choose their path by it
        expected = model(*inputs)
        result = oxport.convert(model, inputs, opset_version=opset)
    proto = result.model_proto
    onnx.checker.check_model(proto, full_check=True)
    import onnxruntime as ort
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: testing.to_numpy(x) for i, x in zip(session.get_inputs(), inputs)}
    testing.compare(expected, session.run(None, feeds), rtol=spec.rtol, atol=spec.atol,
                    where=f"{name} at opset {opset}")


def _input_count(export: Callable[..., Any], model: nn.Module, inputs: tuple[Any, ...]) -> int:
    import io

    buffer = io.BytesIO()
    export(model, inputs, buffer, opset_version=17)
    return len(onnx.load_from_string(buffer.getvalue()).graph.input)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.onnx's TorchScript path
def test_layers_are_traced_in_the_callers_grad_mode() -> None:
    # As torch.onnx does: with grad on (and parameters that require it) the encoder layer
    # takes the unfused path, where is_causal=True leaves the mask unread, so the file has
    # no mask input; under no_grad its inference fast path reads the mask.
    spec = CASES["TransformerEncoderLayer[causal]"]
    model, inputs = _model(spec), _inputs(spec)
    ours = _input_count(oxport.export, model, inputs)
    theirs = _input_count(lambda *a, **k: torch.onnx.export(*a, dynamo=False, **k), model,
                          inputs)
    assert ours == theirs == 1
    with torch.no_grad():
        assert _input_count(oxport.export, model, inputs) == 2


def test_every_layer_is_listed() -> None:
    public = {name for name, cls in vars(nn).items()
              if inspect.isclass(cls) and issubclass(cls, nn.Module) and not name.startswith("_")}
    covered = {name.partition("[")[0] for name in CASES} | set(NOT_LAYERS)
    assert not public - covered, f"torch.nn layers without a case: {sorted(public - covered)}"
    assert not covered - public, f"cases for no torch.nn class: {sorted(covered - public)}"
    assert set(EXPECTED_UNSUPPORTED) <= set(CASES)


# -- attention layers with dynamic batch and sequence axes, run at a second size --------
def _padded(batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and a key padding mask with each row's padding at its end."""
    return (torch.randn(batch, length, E),
            torch.arange(length) >= torch.randint(1, length + 1, (batch, 1)))


DYNAMIC = {
    "MultiheadAttention[fast_path]": call(lambda: _mha(True),
                                          lambda m, x, p: m(x, x, x, key_padding_mask=p)),
    "MultiheadAttention[cross]": call(lambda: _mha(True), lambda m, x, p: m(
        x[:, :3], x, x, key_padding_mask=p, need_weights=False)[0]),
    "TransformerEncoder[nested_padding]": call(
        lambda: nn.TransformerEncoder(_encoder_layer(), 2),
        lambda m, x, p: m(x, src_key_padding_mask=p)),
    "TransformerDecoderLayer": call(_decoder_layer,
                                    lambda m, x, p: m(x, x, memory_key_padding_mask=p)),
}


@pytest.mark.parametrize("opset", sorted({*OPSETS, testing.max_runtime_opset()}))
@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_attention_layer_at_a_second_size(name: str, opset: int) -> None:
    import onnxruntime as ort

    torch.manual_seed(0)
    model = DYNAMIC[name]().eval()
    axes = {0: "batch", 1: "seq"}
    with torch.no_grad():  # the inference fast paths (nested tensors) need grad off
        data = testing.roundtrip_bytes(model, _padded(2, 5), opset_version=opset,
                                       input_names=["x", "mask"],
                                       dynamic_axes={"x": axes, "mask": axes})
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x, mask = _padded(3, 7)
    with torch.no_grad():
        expected = model(x, mask)
    testing.compare(expected, session.run(None, {"x": x.numpy(), "mask": mask.numpy()}),
                    rtol=1e-3, atol=1e-5, where=f"{name} at opset {opset}")
