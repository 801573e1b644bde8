"""Attention: ``scaled_dot_product_attention``.

Opsets 9-22 decompose it (MatMul, Softmax, Where for masks); from opset 23 one
ONNX ``Attention`` node does it (verified against PyTorch in ONNX Runtime 1.31
for no mask, 2-D and 4-D boolean masks, broadcast float masks, causal square
and rectangular, an explicit scale, grouped-query heads and 3-D inputs).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value

pack = OpPack("oxport.attention")


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
    return sh._reshape_helper(g, tiled, [0] * (rank - 3) + [heads, -1, head_dim])


def _decomposed(g, query: Value, key: Value, value: Value, attn_mask: Value | None,
                is_causal: bool, scale: float | None, enable_gqa: bool) -> Value:
    rank = _rank(query)
    dtype = query.type().dtype() or torch.float32
    if enable_gqa:
        q_heads, kv_heads = (sh._get_tensor_dim_size(query, -3),
                             sh._get_tensor_dim_size(key, -3))
        if q_heads is None or kv_heads is None:
            sh._unimplemented("aten::scaled_dot_product_attention",
                              "grouped-query attention with a dynamic head count below opset 23")
        if q_heads != kv_heads:
            key = _repeat_heads(g, key, q_heads // kv_heads, q_heads)
            value = _repeat_heads(g, value, q_heads // kv_heads, q_heads)
    if scale is None:
        head_dim = sh._get_tensor_dim_size(query, -1)
        if head_dim is None:
            sh._unimplemented("aten::scaled_dot_product_attention",
                              "a dynamic head size without an explicit scale")
        scale = 1 / math.sqrt(head_dim)
    # Like PyTorch, scale q and k by sqrt(scale) each, for stability in half precision.
    root = g.constant(torch.tensor(math.sqrt(scale), dtype=dtype))
    perm = list(range(rank))
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
    return g.op("MatMul", weights, value)


_SDPA_ARGS = ("v", "v", "v", "v", "f", "b", "f", "b")


@pack.symbolic("aten::scaled_dot_product_attention", since=9)
@sh.parse_args(*_SDPA_ARGS)
def scaled_dot_product_attention(g, query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """MatMul -> (causal / mask) -> Softmax -> MatMul."""
    _check_dropout(dropout_p)
    return _decomposed(g, query, key, value, attn_mask, is_causal, scale, enable_gqa)


@pack.symbolic("aten::scaled_dot_product_attention", since=23)
@sh.parse_args(*_SDPA_ARGS)
def scaled_dot_product_attention_23(g, query, key, value, attn_mask=None, dropout_p=0.0,
                                    is_causal=False, scale=None, enable_gqa=False):
    """One Attention node for 3-D and 4-D inputs; the decomposition otherwise."""
    _check_dropout(dropout_p)
    rank = _rank(query)
    mask_dtype = None if sh._is_none(attn_mask) else attn_mask.type().dtype()
    if rank not in (3, 4) or mask_dtype not in (None, torch.bool, query.type().dtype()):
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


# -- cases ------------------------------------------------------------------------
_OP = "aten::scaled_dot_product_attention"


def _bool_mask(*shape: int):
    def make() -> torch.Tensor:
        mask = torch.rand(*shape) > 0.4
        mask[..., 0] = True  # no fully masked rows
        return mask
    return make


pack.case(_OP, F.scaled_dot_product_attention, (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8),
          name="plain")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), _bool_mask(4, 6), name="bool_mask_2d")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), _bool_mask(2, 3, 4, 6), name="bool_mask_4d")
pack.case(_OP, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
          (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), (2, 1, 4, 6), name="float_mask")
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
pack.case(_OP, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          lambda: torch.randn(1, 2, 5, 8).half(), lambda: torch.randn(1, 2, 5, 8).half(),
          lambda: torch.randn(1, 2, 5, 8).half(), name="fp16", rtol=1e-2, atol=1e-2)
