"""Test cases of the ``oxport.attention`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport.opsets.attention import pack

_OP = "aten::scaled_dot_product_attention"


def _bool_mask(*shape: int):
    def make() -> torch.Tensor:
        mask = torch.rand(*shape) > 0.4
        mask[..., 0] = True  # no fully masked rows
        return mask
    return make


def _padded_queries() -> torch.Tensor:
    """A causal mask of a left-padded batch: the padding's query rows see no key."""
    mask = torch.ones(4, 6, dtype=torch.bool).tril(diagonal=2).expand(2, 1, 4, 6).clone()
    mask[1, :, :, :3] = False
    return mask


def _padded_queries_float() -> torch.Tensor:
    """:func:`_padded_queries` as an additive mask of 0 and -inf."""
    return torch.zeros(2, 1, 4, 6).masked_fill(~_padded_queries(), float("-inf"))


# Keys and values with one more batch dim than the query: broadcast, as in eager.
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          (4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8), name="broadcast_batch")
pack.case(_OP, F.scaled_dot_product_attention, (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8),
          name="plain")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), _bool_mask(4, 6), name="bool_mask_2d")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), _bool_mask(2, 3, 4, 6), name="bool_mask_4d")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), (2, 1, 4, 6), name="float_mask")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), _bool_mask(2, 1, 1, 6),
          name="padding_mask_over_queries")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), _padded_queries, name="fully_masked_rows",
          min_opset=11)
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), _padded_queries_float,
          name="fully_masked_rows_float", min_opset=11)
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          (1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 5, 4), name="causal")
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), name="causal_rectangular")
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3),
          (2, 2, 3, 4), (2, 2, 3, 4), (2, 2, 3, 6), name="scale")
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
          (1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 8), name="gqa")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 4, 8), (2, 5, 8), (2, 5, 8), _bool_mask(2, 4, 5), name="3d_mask")
pack.case(_OP, F.scaled_dot_product_attention, (2, 2, 3, 4, 8), (2, 2, 3, 5, 8),
          (2, 2, 3, 5, 8), name="5d")
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          (1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 5, 4), name="causal_dynamic", min_opset=11,
          input_names=["q", "k", "v"], dynamic_axes={n: {0: "batch", 2: "seq"} for n in "qkv"})
pack.case(_OP, F.scaled_dot_product_attention, (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5),
          name="dynamic_head_size", input_names=["q", "k", "v"],
          dynamic_axes={"q": {3: "head"}, "k": {3: "head"}, "v": {3: "value_head"}})
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          lambda: torch.randn(1, 2, 5, 8).half(), lambda: torch.randn(1, 2, 5, 8).half(),
          lambda: torch.randn(1, 2, 5, 8).half(), name="fp16", rtol=1e-2, atol=1e-2)


class _SelfAttention(torch.nn.Module):
    """nn.MultiheadAttention on x as query, key and value (its fast path's condition)."""

    def __init__(self, **options) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.options = options

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        return self.attention(x, x, x, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                              **self.options)


def _padding(*shape: int):
    """A key padding mask (True = padded) that leaves every row a key."""
    def make() -> torch.Tensor:
        mask = torch.rand(*shape) > 0.6
        mask[..., 0] = False
        return mask
    return make


def _encoder_layer(**options) -> torch.nn.TransformerEncoderLayer:
    return torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, **options)


_MHA, _ENCODER = "aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd"
pack.case(_MHA, _SelfAttention(need_weights=False), (2, 5, 8), name="no_weights")
pack.case(_MHA, _SelfAttention(), (2, 5, 8), name="mean_weights")
pack.case(_MHA, _SelfAttention(average_attn_weights=False), (2, 5, 8), _padding(2, 5),
          name="head_weights_padding_mask")
pack.case(_MHA, _SelfAttention(need_weights=False), (2, 5, 8), _padding(2, 5),
          lambda: torch.ones(5, 5, dtype=torch.bool).triu(1), name="both_masks")
pack.case(_MHA, _SelfAttention(need_weights=False), (2, 5, 8), None, _padding(5, 5),
          name="bool_attn_mask")
pack.case(_MHA, _SelfAttention(need_weights=False), (2, 5, 8), _padding(2, 5),
          name="dynamic", input_names=["x", "mask"],
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}})
pack.case(_ENCODER, _encoder_layer(), (2, 5, 8))
pack.case(_ENCODER, _encoder_layer(norm_first=True, activation="gelu"), (2, 5, 8),
          name="norm_first_gelu")
pack.case(_ENCODER, _encoder_layer(), (2, 5, 8), None, _padding(2, 5), name="padding_mask")
pack.case(_ENCODER, _encoder_layer(), (2, 5, 8),
          lambda: torch.nn.Transformer.generate_square_subsequent_mask(5), name="src_mask")
pack.case(_ENCODER, _encoder_layer(), (2, 5, 8),
          lambda: torch.nn.Transformer.generate_square_subsequent_mask(5), _padding(2, 5),
          name="both_masks")
pack.case(_ENCODER, _encoder_layer(), (2, 5, 8), None, _padding(2, 5), name="dynamic",
          input_names=["x", "mask"],
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}})


class _PaddedEncoder(torch.nn.TransformerEncoder):
    """With a key padding mask in eval, it runs its layers on a nested tensor (declared as
    a class: built when its case runs)."""

    def __init__(self) -> None:
        super().__init__(_encoder_layer(), 2, norm=torch.nn.LayerNorm(8))


def _left_padding(batch: int, length: int):
    """A key padding mask with each row's padding at its end (a nested tensor's layout)."""
    return lambda: torch.arange(length) >= torch.randint(1, length + 1, (batch, 1))


_NO_NESTED_PATH = ("torch.export captures nn.TransformerEncoder without its nested-tensor fast "
                   "path (skipped while torch.compiler.is_compiling()): the graph has no "
                   "nested-tensor ops, and its padded positions hold computed values where "
                   "eager's hold zeros")
for _op in ("aten::_nested_tensor_from_mask", "aten::to_padded_tensor"):
    pack.case(_op, _PaddedEncoder, (3, 5, 8), None, _left_padding(3, 5),
              not_exportable=_NO_NESTED_PATH)
    pack.case(_op, _PaddedEncoder, (3, 5, 8), None, _left_padding(3, 5), name="dynamic",
              input_names=["x", "mask"],
              dynamic_axes={"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}},
              not_exportable=_NO_NESTED_PATH)
pack.case("aten::_nested_tensor_from_mask_left_aligned", _PaddedEncoder, (3, 5, 8), None,
          _left_padding(3, 5), script=True)


def _ones_value_dropout(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Dropout over grouped-query attention: random, so the check is of dtype and shape
    (tests/test_dynamo_ops.py checks its statistics)."""
    v = torch.ones(k.shape)
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, dropout_p=0.1)


pack.case(_OP, _ones_value_dropout, (2, 4, 8, 16), (2, 2, 8, 16), name="gqa_dropout",
          check="shape", min_opset=12)


# attention over a KV cache, which the onnx target folds into one Attention (past/present)
def _cached_sdpa():
    from oxport.opsets.cases.nn import CachedSdpaAttention

    return CachedSdpaAttention().eval()


pack.case(_OP, _cached_sdpa(), (2, 3, 64), (2, 2, 4, 16), (2, 2, 4, 16),
          name="cached_attention_onnx", export_kwargs={"target": "onnx"}, min_opset=23,
          input_names=["x", "past_key", "past_value"], atol=1e-5,
          dynamic_axes={"x": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                        "past_value": {0: "batch", 2: "past"}})
