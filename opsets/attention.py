"""Attention: ``scaled_dot_product_attention``.

Opsets 9-22 decompose it (MatMul, Softmax, Where for masks); from opset 23 one
ONNX ``Attention`` node does it (verified against PyTorch in ONNX Runtime 1.31
for no mask, 2-D and 4-D boolean masks, broadcast float masks, causal square
and rectangular, an explicit scale, grouped-query heads and 3-D inputs).
"""

from __future__ import annotations

import math

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value

pack = OpPack("oxport.attention", cases="oxport.opsets.cases.attention")


def _rank(value: Value) -> int:
    rank = sh._get_tensor_rank(value)
    if rank is None:
        sh._unimplemented("aten::scaled_dot_product_attention", "inputs of unknown rank")
    return rank


def _check_dropout(dropout_p: float) -> None:
    if dropout_p:
        sh._unimplemented("aten::scaled_dot_product_attention",
                          f"dropout_p={dropout_p} (attention dropout is random; export in eval "
                          "mode, where models pass dropout_p=0)")


def _negative_infinity(g, dtype: torch.dtype) -> Value:
    return g.constant(torch.tensor(float("-inf"), dtype=dtype))


def _dim(g, value: Value, axis: int) -> Value:
    """``value.shape[axis]`` as a 1-D int64 tensor."""
    return sh._slice_helper(g, g.op("Shape", value), [0], [axis],
                            [axis + 1 if axis != -1 else 2**62])


def _causal_mask(g, query: Value, key: Value) -> Value:
    """A (L, S) boolean mask: query i sees keys j <= i (top-left aligned, as PyTorch)."""
    q_len, k_len = sh._get_tensor_dim_size(query, -2), sh._get_tensor_dim_size(key, -2)
    if g.opset < 11:
        if q_len is None or k_len is None:
            sh._onnx_opset_unsupported_detailed(
                "aten::scaled_dot_product_attention", g.opset, 11,
                "a causal mask over dynamic sequence lengths needs Range")
        return g.constant(torch.ones(q_len, k_len, dtype=torch.bool).tril())
    zero, one = g.constant(torch.tensor(0)), g.constant(torch.tensor(1))
    rows = g.op("Range", zero, sh._squeeze_helper(g, _dim(g, query, -2), [0]), one)
    cols = g.op("Range", zero, sh._squeeze_helper(g, _dim(g, key, -2), [0]), one)
    later = g.op("Greater", sh._unsqueeze_helper(g, cols, [0]), sh._unsqueeze_helper(g, rows, [1]))
    return g.op("Not", later)


def _repeat_heads(g, value: Value, groups: int, heads: int) -> Value:
    """(..., H_kv, S, D) -> (..., H_kv * groups, S, D), each head repeated ``groups`` times."""
    rank = _rank(value)
    head_dim = sh._get_tensor_dim_size(value, -1)
    if head_dim is None:
        sh._unimplemented("aten::scaled_dot_product_attention",
                          "grouped-query attention with a dynamic head size below opset 23")
    expanded = sh._unsqueeze_helper(g, value, [rank - 2])
    tiled = g.op("Concat", *([expanded] * groups), axis_i=rank - 2)
    return sh._reshape_helper(g, tiled, [0] * (rank - 3) + [heads, -1, head_dim]).setType(
        Type.tensor(value.type().dtype(), [None] * rank))


def _decomposed(g, query: Value, key: Value, value: Value, attn_mask: Value | None,
                is_causal: bool, scale: float | None, enable_gqa: bool) -> Value:
    if enable_gqa:
        q_heads, kv_heads = (sh._get_tensor_dim_size(query, -3),
                             sh._get_tensor_dim_size(key, -3))
        if q_heads is None or kv_heads is None:
            sh._unimplemented("aten::scaled_dot_product_attention",
                              "grouped-query attention with a dynamic head count below opset 23")
        if q_heads != kv_heads:
            key = _repeat_heads(g, key, q_heads // kv_heads, q_heads)
            value = _repeat_heads(g, value, q_heads // kv_heads, q_heads)
    weights = _attention_weights(g, query, key, attn_mask, is_causal, scale)
    return g.op("MatMul", weights, value)


def _attention_weights(g, query: Value, key: Value, attn_mask: Value | None, is_causal: bool,
                       scale: float | None) -> Value:
    """Softmax of the scaled, masked scores ``q k^T``: a boolean mask keeps where True
    (``key`` may have more batch dims than ``query``: MatMul broadcasts them)."""
    dtype = query.type().dtype() or torch.float32
    # Like PyTorch, scale q and k by sqrt(scale) each, for stability in half precision.
    head_dim = sh._get_tensor_dim_size(query, -1)
    if scale is None and head_dim is None:  # 1 / sqrt(sqrt(E)) from the run-time size
        size = sh.cast_to(g, _dim(g, query, -1), dtype)
        root = g.op("Reciprocal", g.op("Sqrt", g.op("Sqrt", size)))
    else:
        root = g.constant(torch.tensor(math.sqrt(scale or 1 / math.sqrt(head_dim)),
                                       dtype=dtype))
    perm = list(range(_rank(key)))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    scores = g.op("MatMul", g.op("Mul", query, root),
                  g.op("Mul", g.op("Transpose", key, perm_i=perm), root))
    if is_causal:
        scores = g.op("Where", _causal_mask(g, query, key), scores, _negative_infinity(g, dtype))
    if not sh._is_none(attn_mask):
        if attn_mask.type().dtype() == torch.bool:
            scores = g.op("Where", attn_mask, scores, _negative_infinity(g, dtype))
        else:
            scores = g.op("Add", scores, attn_mask)
    weights = g.op("Softmax", scores, axis_i=-1)
    if sh._is_none(attn_mask) or g.opset < 11:
        return weights
    # Like PyTorch's safe softmax: a row the mask hides entirely (a left-padded query) weighs
    # nothing, where a plain Softmax of -inf's gives NaNs that spread to the other rows.
    hidden = g.op("Equal", sh.reduce_helper(g, "ReduceMax", scores, [-1], keepdims_i=1),
                  _negative_infinity(g, dtype))
    return g.op("Where", hidden, g.constant(torch.tensor(0, dtype=dtype)), weights)


_SDPA_ARGS = ("v", "v", "v", "v", "f", "b", "f", "b")


@pack.symbolic("aten::scaled_dot_product_attention", since=9)
@sh.parse_args(*_SDPA_ARGS)
def scaled_dot_product_attention(g, query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor

    MatMul -> (causal / mask) -> Softmax -> MatMul."""
    _check_dropout(dropout_p)
    return _decomposed(g, query, key, value, attn_mask, is_causal, scale, enable_gqa)


@pack.symbolic("aten::scaled_dot_product_attention", since=23)
@sh.parse_args(*_SDPA_ARGS)
def scaled_dot_product_attention_23(g, query, key, value, attn_mask=None, dropout_p=0.0,
                                    is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor

    One Attention node for 3-D and 4-D inputs; the decomposition otherwise, and for masks
    broadcast over the query axis (ONNX Runtime 1.31 refuses them)."""
    _check_dropout(dropout_p)
    rank = _rank(query)
    mask_dtype = None if sh._is_none(attn_mask) else attn_mask.type().dtype()
    if rank not in (3, 4) or _rank(key) != rank or _rank(value) != rank or mask_dtype not in (None, torch.bool, query.type().dtype()) \
            or not _attention_op_takes(attn_mask, (query.type().symbolic_sizes() or [None])[-2]):
        return _decomposed(g, query, key, value, attn_mask, is_causal, scale, enable_gqa)
    inputs = [query, key, value]
    if mask_dtype is not None:
        if rank == 3 and _rank(attn_mask) == 3:
            # ONNX reads 3-D q/k/v as (batch, seq, heads*size) and masks as (.., heads, L, S).
            attn_mask = sh._unsqueeze_helper(g, attn_mask, [1])
        inputs.append(attn_mask)
    heads = {"q_num_heads_i": 1, "kv_num_heads_i": 1} if rank == 3 else {}
    out = g.op("Attention", *inputs, is_causal_i=int(is_causal), scale_f=scale, **heads)
    return out.setType(Type.tensor(query.type().dtype()))


# -- the fused fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer ---------
def _linear(g, x: Value, weight: Value, bias: Value | None) -> Value:
    out = g.op("MatMul", x, g.op("Transpose", weight, perm_i=[1, 0]))
    return out if sh._is_none(bias) else g.op("Add", out, bias)


def _rows(g, tensor: Value, start: int, end: int, axis: int = 0) -> Value:
    return sh._slice_helper(g, tensor, [axis], [start], [end])


def _split_heads(g, x: Value, heads: int, head_dim: int, dtype: torch.dtype) -> Value:
    """(B, L, H*D) -> (B, H, L, D)."""
    out = g.op("Transpose", sh._reshape_helper(g, x, [0, 0, heads, head_dim]),
               perm_i=[0, 2, 1, 3])
    return out.setType(Type.tensor(dtype, (None, heads, None, head_dim)))


def _kernel_mask(g, mask: Value | None, mask_type: int | None) -> Value | None:
    """The fused kernels' mask as a boolean mask that keeps where True: like the kernels,
    any non-zero float masks out (MultiheadAttention's -inf/0 masks mean the same); a key
    padding mask (type 1, (B, S)) gets the head and query axes."""
    if sh._is_none(mask):
        return None
    masked = mask if mask.type().dtype() == torch.bool else sh.cast_to(g, mask, torch.bool)
    sizes = mask.type().symbolic_sizes()
    if mask_type == 1:
        masked = sh._unsqueeze_helper(g, masked, [1, 2])
        sizes = sizes and [sizes[0], 1, 1, sizes[1]]
    return g.op("Not", masked).setType(Type.tensor(torch.bool, sizes))


def _attention_op_takes(mask: Value | None, query_length: int | str | None) -> bool:
    """Whether ONNX Runtime's Attention takes the mask: it does not broadcast a mask over
    the query axis."""
    if sh._is_none(mask):
        return True
    sizes = mask.type().symbolic_sizes()
    if not sizes or len(sizes) < 2 or sizes[-2] is None:
        return False
    return sizes[-2] != 1 or query_length == 1


def _multi_head_attention(g, query: Value, key: Value, value: Value, embed_dim: int,
                          heads: int, qkv_weight: Value, qkv_bias: Value, proj_weight: Value,
                          proj_bias: Value, keep: Value | None,
                          need_weights: bool) -> tuple[Value, Value | None]:
    """Packed in-projection, per-head attention, out-projection; (B, L, E) inputs. Returns
    the output and the per-head weights (B, H, L, S) when ``need_weights``."""
    dtype = query.type().dtype() or torch.float32
    head_dim = embed_dim // heads
    if query is key and key is value:
        packed = _linear(g, query, qkv_weight, qkv_bias)
        q, k, v = (_rows(g, packed, i * embed_dim, (i + 1) * embed_dim, axis=2)
                   for i in range(3))
    else:
        q, k, v = (_linear(g, x, _rows(g, qkv_weight, i * embed_dim, (i + 1) * embed_dim),
                           _rows(g, qkv_bias, i * embed_dim, (i + 1) * embed_dim))
                   for i, x in enumerate((query, key, value)))
    q, k, v = (_split_heads(g, x, heads, head_dim, dtype) for x in (q, k, v))
    weights = None
    length = query.type().symbolic_sizes()[1] if query.type().dim() else None
    if need_weights or g.opset < 23 or not _attention_op_takes(keep, length):
        weights = _attention_weights(g, q, k, keep, False, 1 / math.sqrt(head_dim))
        out = g.op("MatMul", weights, v)
    else:
        out = g.op("Attention", q, k, v, *([] if keep is None else [keep]))
    merged = sh._reshape_helper(g, g.op("Transpose", out, perm_i=[0, 2, 1, 3]),
                                [0, 0, embed_dim])
    result = _linear(g, merged, proj_weight, proj_bias)
    return result.setType(Type.tensor(dtype, query.type().symbolic_sizes())), weights


@pack.symbolic("aten::_native_multi_head_attention", since=9)
@sh.parse_args("v", "v", "v", "i", "i", "v", "v", "v", "v", "v", "b", "b", "i")
def _native_multi_head_attention(g, query, key, value, embed_dim, num_head, qkv_weight,
                                 qkv_bias, proj_weight, proj_bias, mask=None,
                                 need_weights=True, average_attn_weights=True, mask_type=None):
    """_native_multi_head_attention(Tensor query, Tensor key, Tensor value, int embed_dim, int num_head, Tensor qkv_weight, Tensor qkv_bias, Tensor proj_weight, Tensor proj_bias, Tensor? mask=None, bool need_weights=True, bool average_attn_weights=True, int? mask_type=None) -> (Tensor, Tensor)

    nn.MultiheadAttention's eval fast path, decomposed as its slow path computes it."""
    out, weights = _multi_head_attention(
        g, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
        proj_bias, _kernel_mask(g, mask, mask_type), need_weights)
    if weights is not None and need_weights and average_attn_weights:
        weights = sh.reduce_helper(g, "ReduceMean", weights, [1], keepdims_i=0)
    return out, weights if need_weights else None


def _layer_norm(g, x: Value, weight: Value, bias: Value, eps: float, embed_dim: int) -> Value:
    return g.run_symbolic("aten::layer_norm", x, [embed_dim], weight, bias, eps, False,
                          type_=x.type())


@pack.symbolic("aten::_transformer_encoder_layer_fwd", since=9)
@sh.parse_args("v", "i", "i", "v", "v", "v", "v", "b", "b", "f", "v", "v", "v", "v", "v", "v",
               "v", "v", "v", "i")
def _transformer_encoder_layer_fwd(g, src, embed_dim, num_heads, qkv_weight, qkv_bias,
                                   proj_weight, proj_bias, use_gelu, norm_first, eps,
                                   norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                   ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
                                   mask=None, mask_type=None):
    """_transformer_encoder_layer_fwd(Tensor src, int embed_dim, int num_heads, Tensor qkv_weight, Tensor qkv_bias, Tensor proj_weight, Tensor proj_bias, bool use_gelu, bool norm_first, float eps, Tensor norm_weight_1, Tensor norm_bias_1, Tensor norm_weight_2, Tensor norm_bias_2, Tensor ffn_weight_1, Tensor ffn_bias_1, Tensor ffn_weight_2, Tensor ffn_bias_2, Tensor? mask=None, int? mask_type=None) -> Tensor

    nn.TransformerEncoderLayer's eval fast path: self-attention and feed-forward blocks,
    each with its residual and layer norm (before the block when ``norm_first``)."""
    keep = _kernel_mask(g, mask, mask_type)
    nested = _nested_keep(src)
    if nested is not None:
        padding = sh._unsqueeze_helper(g, nested, [1, 2])
        keep = padding if keep is None else g.op("And", keep, padding)
        keep.setType(Type.tensor(torch.bool, None))
    x = _layer_norm(g, src, norm_weight_1, norm_bias_1, eps, embed_dim) if norm_first else src
    attended, _ = _multi_head_attention(g, x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                        proj_weight, proj_bias, keep, False)
    x = g.op("Add", attended, src).setType(src.type())
    if not norm_first:
        x = _layer_norm(g, x, norm_weight_1, norm_bias_1, eps, embed_dim)
    h = _layer_norm(g, x, norm_weight_2, norm_bias_2, eps, embed_dim) if norm_first else x
    hidden = _linear(g, h, ffn_weight_1, ffn_bias_1)
    sizes = src.type().symbolic_sizes()
    hidden.setType(Type.tensor(src.type().dtype(), sizes and (*sizes[:-1], None)))
    hidden = (g.run_symbolic("aten::gelu", hidden, "none", type_=hidden.type()) if use_gelu
              else g.run_symbolic("aten::relu", hidden, type_=hidden.type()))
    x = g.op("Add", _linear(g, hidden, ffn_weight_2, ffn_bias_2), x).setType(src.type())
    out = x if norm_first else _layer_norm(g, x, norm_weight_2, norm_bias_2, eps, embed_dim)
    return _as_nested(g, out, nested) if nested is not None else out


# nn.TransformerEncoder with a key padding mask packs the batch into a nested tensor (the
# first mask.sum() tokens of each row: padding at the end, which mask_check verifies), runs
# the fused layers on it and pads it back. Here a nested tensor is the padded batch with its
# (B, L) keep mask in ``meta``: the fused layers mask the padded keys, padding zeroes the rest.
def _nested_keep(value: Value) -> Value | None:
    return value.meta.get("nested_keep") if value.meta else None


def _as_nested(g, value: Value, keep: Value) -> Value:
    out = g.op("Identity", value).setType(value.type())
    out.meta = {"nested_keep": keep}
    return out


@pack.symbolic("aten::_nested_tensor_from_mask", since=9)
@sh.parse_args("v", "v", "none")
def _nested_tensor_from_mask(g, t, mask, mask_check=None):
    """_nested_tensor_from_mask(Tensor t, Tensor mask, bool mask_check=True) -> Tensor

    The padded batch itself, carrying its keep mask."""
    return _as_nested(g, t, sh.cast_to(g, mask, torch.bool))


@pack.symbolic("aten::_nested_tensor_from_mask_left_aligned", since=9)
def _nested_tensor_from_mask_left_aligned(g, t: Value, mask: Value) -> Value:
    """_nested_tensor_from_mask_left_aligned(Tensor t, Tensor mask) -> bool

    True: whether ``mask`` makes a nested tensor of ``t`` (nn.TransformerEncoder's
    ``mask_check``, scripted). Any mask does here, the nested tensor being the padded batch
    with its mask; eager, with padding not at the end of the rows, takes the unfused path,
    whose padded positions hold values where this path has zeros (docs/scripting.md)."""
    return g.python_constant(True)


@pack.symbolic("aten::to_padded_tensor", since=9)
@sh.parse_args("v", "f", "v")
def to_padded_tensor(g, self, padding, output_size=None):
    """to_padded_tensor(Tensor self, float padding, SymInt[]? output_size=None) -> Tensor

    Where(keep, x, padding) over a nested tensor made by _nested_tensor_from_mask, padded
    to its own length (``output_size`` as nn.TransformerEncoder passes, the input's size)."""
    keep = _nested_keep(self)
    if keep is None:
        sh._unimplemented("aten::to_padded_tensor", "a nested tensor not made from a mask")
    if sh._is_none(output_size):
        sh._unimplemented("aten::to_padded_tensor",
                          "no output_size (the padded length would depend on the data)")
    dtype = self.type().dtype() or torch.float32
    return g.op("Where", sh._unsqueeze_helper(g, keep, [2]), self,
                g.constant(torch.tensor(padding, dtype=dtype)))
