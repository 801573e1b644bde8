"""Test cases of the ``oxport.nn`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport.opsets.cases import scalar
from oxport.opsets.nn import pack


class _Conv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


pack.case("aten::linear", torch.nn.Linear(4, 5), (3, 4), name="2d")
pack.case("aten::linear", torch.nn.Linear(4, 5, bias=False), (2, 3, 4), name="3d_nobias")
pack.case("aten::matmul", torch.matmul, (2, 3, 4), (4, 5))
pack.case("aten::addmm", lambda a, b, c: torch.addmm(a, b, c, beta=0.5, alpha=2), (5,), (3, 4),
          (4, 5))
pack.case("aten::_convolution", _Conv(), (1, 3, 8, 8), name="conv2d")
pack.case("aten::_convolution", torch.nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 5, 5),
          name="transposed")


def _conv1d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv1d(x, w, padding=1)


def _conv2d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, b, groups=2)


def _conv3d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv3d(x, w, stride=[2, 2, 2])


# Tracing records aten::_convolution; scripted code calls conv1d/2d/3d directly.
pack.case("aten::conv1d", _conv1d, (1, 2, 7), (4, 2, 3), script=True)
pack.case("aten::conv2d", _conv2d, (1, 4, 6, 6), (4, 2, 3, 3), (4,), script=True)
pack.case("aten::conv3d", _conv3d, (1, 2, 5, 5, 5), (3, 2, 3, 3, 3), script=True)
pack.case("aten::dropout", torch.nn.Dropout(0.3), (3, 4))
pack.case("aten::dropout_", torch.nn.Dropout(0.3, inplace=True), (3, 4))
pack.case("aten::feature_dropout", torch.nn.Dropout2d(0.3), (1, 3, 4, 4))
pack.case("aten::feature_dropout_", torch.nn.Dropout1d(0.3, inplace=True), (2, 3, 4))
pack.case("aten::alpha_dropout", torch.nn.AlphaDropout(0.3), (2, 3))
pack.case("aten::alpha_dropout_", lambda x: torch.alpha_dropout_(x, 0.3, False), (2, 3))
pack.case("aten::feature_alpha_dropout", torch.nn.FeatureAlphaDropout(0.3), (1, 2, 3, 3))
pack.case("aten::feature_alpha_dropout_",
          lambda x: torch.feature_alpha_dropout_(x, 0.3, False), (1, 2, 3, 3))
pack.case("aten::softmax", lambda x: torch.softmax(x, -1), (2, 3, 4), name="last")
pack.case("aten::softmax", lambda x: torch.softmax(x, 1), (2, 3, 4), name="middle")
pack.case("aten::log_softmax", lambda x: torch.log_softmax(x, 0), (2, 3, 4))


def _conv_same(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, padding="same", dilation=2)


def _conv_transpose1d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1)


def _conv_transpose2d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose2d(x, w, b, stride=[2, 1], groups=2)


def _conv_transpose3d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose3d(x, w, dilation=2)


pack.case("aten::conv2d", _conv_same, (1, 2, 6, 7), (3, 2, 2, 3), script=True, name="same")
pack.case("aten::conv_transpose1d", _conv_transpose1d, (1, 2, 5), (2, 3, 3), script=True)
pack.case("aten::conv_transpose2d", _conv_transpose2d, (1, 4, 3, 3), (4, 1, 2, 2), (2,),
          script=True)
pack.case("aten::conv_transpose3d", _conv_transpose3d, (1, 2, 3, 3, 3), (2, 1, 2, 2, 2),
          script=True)
pack.case("aten::_convolution_mode", torch.nn.Conv2d(2, 3, 4, padding="same"), (1, 2, 6, 5),
          name="same_even_kernel")
pack.case("aten::_convolution_mode", torch.nn.Conv1d(2, 3, 3, padding="valid"), (1, 2, 6),
          name="valid")


def _indices(high: int, *shape: int):
    return lambda: torch.randint(0, high, shape)


pack.case("aten::embedding", torch.nn.Embedding(10, 4), _indices(10, 2, 3))
pack.case("aten::embedding", torch.nn.Embedding(10, 4, padding_idx=0), _indices(10, 5),
          name="padding_idx")
# The weight is an input: eager renormalizes a module's weight in place before the export.
pack.case("aten::embedding_renorm_", lambda x, w: F.embedding(x, w, max_norm=1.0),
          _indices(10, 2, 5), (10, 4))
pack.case("aten::embedding_renorm_",  # the renormalized weight reused, as by a tied layer
          lambda x, w: F.embedding(x, w, max_norm=2.0, norm_type=1.0) @ w.t(),
          lambda: torch.tensor([[1, 3, 3, 9]]), (10, 4), name="reused_l1")
pack.case("aten::embedding_bag", torch.nn.EmbeddingBag(10, 3, mode="mean"), _indices(10, 6),
          lambda: torch.tensor([0, 4]), name="mean")
pack.case("aten::embedding_bag", torch.nn.EmbeddingBag(10, 3, mode="sum"),
          _indices(10, 7), lambda: torch.tensor([0, 2, 2, 5]), lambda: torch.rand(7),
          name="sum_weights_empty_bag")
pack.case("aten::embedding_bag", torch.nn.EmbeddingBag(10, 3, mode="max", padding_idx=1),
          lambda: torch.tensor([1, 4, 1, 3, 5, 1]), lambda: torch.tensor([0, 2, 3, 6]),
          name="max_padding_idx")
pack.case("aten::embedding_bag",
          torch.nn.EmbeddingBag(10, 3, mode="mean", include_last_offset=True, padding_idx=2),
          lambda: torch.tensor([2, 4, 2, 3, 5]), lambda: torch.tensor([0, 1, 3, 5]),
          name="mean_last_offset_padding_idx")
# Indices past the last offset (its documentation says there are none): eager's sum leaves
# them out, its mean and max do not quite (mean counts them, max takes them); torch.onnx's
# file and oxport's leave them out in every mode.
pack.case("aten::embedding_bag",
          torch.nn.EmbeddingBag(10, 3, mode="sum", include_last_offset=True), _indices(10, 7),
          lambda: torch.tensor([0, 2, 5, 6]), name="sum_past_last_offset")
pack.case("aten::bilinear", torch.nn.Bilinear(3, 4, 5), (2, 3), (2, 4))
pack.case("aten::bilinear", torch.nn.Bilinear(3, 2, 4, bias=False), (2, 3, 3), (2, 3, 2),
          name="3d_no_bias")
pack.case("aten::_weight_norm", torch.nn.utils.parametrizations.weight_norm(
    torch.nn.Linear(3, 4)), (2, 3))
pack.case("aten::_weight_norm", torch.nn.utils.parametrizations.weight_norm(
    torch.nn.Conv1d(2, 3, 2), dim=None), (1, 2, 5), name="whole_tensor")
pack.case("aten::_weight_norm", torch.nn.utils.parametrizations.weight_norm(
    torch.nn.Conv2d(2, 3, 2), dim=1), (1, 2, 4, 4), name="dim1")


def _log_probs(*shape: int):
    return lambda: torch.log_softmax(torch.randn(*shape), 1)


pack.case("aten::nll_loss_nd", lambda x, t: F.nll_loss(x, t), _log_probs(4, 5), _indices(5, 4))
pack.case("aten::nll_loss_nd",
          lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=1, reduction="sum"),
          _log_probs(4, 5), _indices(5, 4), lambda: torch.rand(5), name="weight_ignore_sum")
pack.case("aten::nll_loss_nd", lambda x, t: F.nll_loss(x, t, reduction="none"),
          _log_probs(2, 3, 4, 2), _indices(3, 2, 4, 2), name="spatial_none")
pack.case("aten::nll_loss", lambda x, t: torch.ops.aten.nll_loss(x, t), _log_probs(3, 4),
          _indices(4, 3))
pack.case("aten::nll_loss2d", lambda x, t: torch.ops.aten.nll_loss2d(x, t, None, 2),
          _log_probs(2, 3, 2, 2), _indices(3, 2, 2, 2))
pack.case("aten::cross_entropy_loss", lambda x, t: F.cross_entropy(x, t), (4, 5),
          _indices(5, 4))
pack.case("aten::cross_entropy_loss",
          lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=0, reduction="none"),
          (2, 4, 3), _indices(4, 2, 3), lambda: torch.rand(4), name="spatial_weight_none")
for _reduction in ("mean", "sum", "none"):
    pack.case("aten::cross_entropy_loss",
              lambda x, t, w, r=_reduction: F.cross_entropy(x, t, weight=w, ignore_index=1,
                                                            label_smoothing=0.2, reduction=r),
              (4, 5, 3), _indices(5, 4, 3), lambda: torch.rand(5) + 0.1,
              name=f"smoothing_weight_ignore_{_reduction}")
    pack.case("aten::cross_entropy_loss",
              lambda x, t, r=_reduction: F.cross_entropy(x, t, label_smoothing=0.1, reduction=r),
              (4, 5), lambda: torch.rand(4, 5).softmax(1), name=f"probabilities_{_reduction}")
pack.case("aten::cross_entropy_loss", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.3),
          (4, 5), _indices(5, 4), name="smoothing")
pack.case("aten::cross_entropy_loss", lambda x, t, w: F.cross_entropy(x, t, weight=w),
          (2, 5, 3, 2), lambda: torch.rand(2, 5, 3, 2).softmax(1), lambda: torch.rand(5),
          name="probabilities_spatial_weight")

pack.case("aten::softmax", lambda x: x.softmax(0), scalar, name="0d")
pack.case("aten::log_softmax", lambda x: x.log_softmax(-1), scalar, name="0d")

def _convolution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.convolution(x, w, None, [1, 2], [1, 0], [1, 1], False, [0, 0], 1)


def _convolution_transposed(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.convolution(x, w, b, [2], [1], [1], True, [1], 2)


# Tracing records aten::_convolution; scripted code (and torch.export) aten::convolution.
pack.case("aten::convolution", _convolution, (1, 4, 6, 6), (3, 4, 3, 3), script=True)
pack.case("aten::convolution", _convolution_transposed, (1, 4, 5), (4, 3, 3), (6,),
          name="transposed", script=True)
pack.case("aten::conv_tbc", lambda x, w, b: torch.conv_tbc(x, w, b, 1), (7, 2, 4), (3, 4, 5),
          (5,), input_names=["x", "w", "b"], dynamic_axes={"x": [0, 1]})
pack.case("aten::native_dropout", lambda x: torch.native_dropout(x, 0.3, False), (3, 4),
          name="eval")
pack.case("aten::native_dropout", lambda x: torch.native_dropout(x, 0.3, True), (3, 4),
          name="train", check="shape", min_opset=12)
pack.case("aten::_log_softmax", lambda x: torch._log_softmax(x, 1, False), (2, 3, 4))


# Complex convolutions: real convolutions of the parts.
class _ComplexConv(torch.nn.Module):
    def __init__(self, complex_bias: bool = False) -> None:
        super().__init__()
        self.weight = torch.randn(4, 3, 3, 3, dtype=torch.complex64)
        self.bias = torch.randn(4, dtype=torch.complex64) if complex_bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(F.conv2d(x, self.weight, self.bias, padding=1))


def _complex_image() -> torch.Tensor:
    return torch.randn(1, 3, 5, 5, dtype=torch.complex64)


pack.case("aten::conv2d", _ComplexConv, _complex_image, name="complex", atol=1e-4,
          not_traceable="the tracer records the real convolutions PyTorch computes a complex "
                        "one with, not conv2d")
class _ComplexBias(_ComplexConv):
    def __init__(self) -> None:
        super().__init__(complex_bias=True)


pack.case("aten::conv2d", _ComplexBias, _complex_image, name="complex_bias", atol=1e-4,
          not_traceable="the tracer records the real convolutions, not conv2d")


# -- attention over a KV cache as transformers writes it, which the ort target fuses into
# GroupQueryAttention (plugins/targets/attention.py) --------------------------------------
class TinyRotaryEmbedding(torch.nn.Module):
    """transformers' default rotary embedding: ``(cos, sin)`` of ``position * inv_freq``."""

    rope_type = "default"

    def __init__(self, head_size: int) -> None:
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_size, 2).float() / head_size))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class CachedAttention(torch.nn.Module):
    """Grouped-query attention with rotary embedding and a KV cache (4 heads of 16, 2 KV
    heads):
    returns the output and the present keys and values."""

    def __init__(self, hidden: int = 64, heads: int = 4, kv_heads: int = 2) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.kv_heads, self.size = heads, kv_heads, hidden // heads
        self.q = torch.nn.Linear(hidden, heads * self.size, bias=False)
        self.k = torch.nn.Linear(hidden, kv_heads * self.size, bias=False)
        self.v = torch.nn.Linear(hidden, kv_heads * self.size, bias=False)
        self.o = torch.nn.Linear(heads * self.size, hidden, bias=False)
        self.rotary = TinyRotaryEmbedding(self.size)

    def _heads(self, x: torch.Tensor, count: int) -> torch.Tensor:
        return x.reshape(x.shape[0], x.shape[1], count, self.size).transpose(1, 2)

    def forward(self, x, past_key, past_value):
        batch, seq = x.shape[:2]
        past = past_key.shape[2]
        positions = torch.arange(past, past + seq)[None].expand(batch, seq)
        cos, sin = (t[:, None] for t in self.rotary(x, positions))
        q, k = self._heads(self.q(x), self.heads), self._heads(self.k(x), self.kv_heads)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        keys = torch.cat([past_key, k], dim=2)
        values = torch.cat([past_value, self._heads(self.v(x), self.kv_heads)], dim=2)
        group = self.heads // self.kv_heads
        repeated_k = keys[:, :, None].expand(-1, -1, group, -1, -1).reshape(
            batch, self.heads, keys.shape[2], self.size)
        repeated_v = values[:, :, None].expand(-1, -1, group, -1, -1).reshape(
            batch, self.heads, keys.shape[2], self.size)
        causal = torch.ones(seq, keys.shape[2], dtype=torch.bool).tril(past)
        out = self.attend(q, repeated_k, repeated_v, causal)
        return self.o(out.transpose(1, 2).reshape(batch, seq, -1)), keys, values

    def attend(self, q, k, v, causal):
        scores = q @ k.transpose(2, 3) * self.size ** -0.5
        return scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v


class CachedSdpaAttention(CachedAttention):
    """The same through ``scaled_dot_product_attention`` (opset 23: an ``Attention``)."""

    def attend(self, q, k, v, causal):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal)


pack.case("aten::softmax", CachedAttention, (1, 3, 64), (1, 2, 4, 16), (1, 2, 4, 16),
          name="cached_attention_ort", export_kwargs={"target": "ort"},
          input_names=["x", "past_key", "past_value"], atol=1e-5, min_opset=11,
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                        "past_value": {0: "batch", 2: "past"}})
pack.case("aten::softmax", CachedAttention, (2, 3, 64), (2, 2, 4, 16), (2, 2, 4, 16),
          name="cached_attention_onnx_rotary", export_kwargs={"target": "onnx"},
          input_names=["x", "past_key", "past_value"], atol=1e-5, min_opset=23,
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                        "past_value": {0: "batch", 2: "past"}})


# -- attention without a KV cache or rotary (an encoder's), which the ort target fuses into
# MultiHeadAttention (plugins/targets/mha.py) -----------------------------------------------
class SelfAttention(torch.nn.Module):
    """BERT's self-attention: biased projections, a padding mask over the keys."""

    def __init__(self, hidden: int = 32, heads: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.size = heads, hidden // heads
        self.q, self.k, self.v = (torch.nn.Linear(hidden, hidden) for _ in range(3))

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], x.shape[1], self.heads, self.size).transpose(1, 2)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        mask = keep[:, None, None, :].expand(-1, 1, x.shape[1], -1)
        scores = (q @ k.transpose(2, 3) / self.size ** 0.5).masked_fill(~mask, float("-inf"))
        out = scores.softmax(-1) @ v
        return out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)


def _keep_mask() -> torch.Tensor:
    keep = torch.ones(2, 5, dtype=torch.bool)
    keep[1, 3:] = False
    return keep


pack.case("aten::softmax", SelfAttention, (2, 5, 32), _keep_mask, name="self_attention_ort",
          export_kwargs={"target": "ort"}, atol=1e-5, input_names=["x", "keep"], min_opset=11,
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "keep": {0: "batch", 1: "seq"}})


class _NarrowCachedAttention(CachedAttention):
    """Heads of 8, which GroupQueryAttention's rotary refuses: the ort target's rotary
    pass makes the rotations ``com.microsoft::RotaryEmbedding`` (plugins/targets/rotary.py)."""

    def __init__(self) -> None:
        super().__init__(hidden=32)


pack.case("aten::softmax", _NarrowCachedAttention, (2, 3, 32), (2, 2, 4, 8), (2, 2, 4, 8),
          name="cached_attention_ort_rotary", export_kwargs={"target": "ort"},
          input_names=["x", "past_key", "past_value"], atol=1e-5, min_opset=15,
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                        "past_value": {0: "batch", 2: "past"}})


class _CachedPlainAttention(torch.nn.Module):
    """GPT-2's attention with a KV cache: no rotary, heads not grouped, a causal mask
    (the ort target's MultiHeadAttention with past_key/past_value)."""

    def __init__(self, hidden: int = 32, heads: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.size = heads, hidden // heads
        self.qkv, self.o = torch.nn.Linear(hidden, 3 * hidden), torch.nn.Linear(hidden, hidden)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], x.shape[1], self.heads, self.size).transpose(1, 2)

    def forward(self, x, past_key, past_value):
        q, k, v = (self._heads(t) for t in self.qkv(x).split(x.shape[-1], dim=-1))
        keys, values = torch.cat([past_key, k], dim=2), torch.cat([past_value, v], dim=2)
        causal = torch.ones(x.shape[1], keys.shape[2], dtype=torch.bool).tril(past_key.shape[2])
        scores = (q @ keys.transpose(-1, -2)) * self.size ** -0.5
        out = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ values
        return self.o(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)), keys, values


pack.case("aten::softmax", _CachedPlainAttention, (2, 3, 32), (2, 4, 4, 8), (2, 4, 4, 8),
          name="cached_attention_ort_mha", export_kwargs={"target": "ort"},
          input_names=["x", "past_key", "past_value"], atol=1e-5, min_opset=11,
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                        "past_value": {0: "batch", 2: "past"}})
