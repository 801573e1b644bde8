"""The ``ort`` and ``onnx`` targets' fusions on the graphs transformers' code makes, on both
front ends: each fused file matches the unfused one (and eager) in ONNX Runtime, and the
fused ops are there. Op-level cases of the same patterns run in the shared runner
(``aten::rsqrt[rms_norm_*]``, ``aten::softmax[cached_attention_ort]``)."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport.opsets.cases.math import _HandRMSNorm, _ResidualRMSNorm
from oxport.opsets.cases.nn import CachedAttention
from tests import tiny_llama
from tests.tiny_llama import FRONT_ENDS

ATTENTION_AXES = {"x": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                  "past_value": {0: "batch", 2: "past"}}


def _export(model, args, **kwargs) -> bytes:
    buffer = io.BytesIO()
    oxport.export(model, args, buffer, **kwargs)
    return buffer.getvalue()


def _run(data: bytes, *arrays: torch.Tensor) -> list[np.ndarray]:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), arrays)})


def _ops(data: bytes) -> list[str]:
    return [n.op_type for n in onnx.load_from_string(data).graph.node]


def _assert_same(fused: bytes, plain: bytes, *arrays: torch.Tensor, atol: float = 1e-5):
    for a, b in zip(_run(fused, *arrays), _run(plain, *arrays), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=atol)


def _matches_unfused_and_eager(fused: bytes, plain: bytes, model: torch.nn.Module) -> None:
    """The fused tiny Llama's outputs equal the unfused file's and eager's at three
    (past, new tokens) sizes."""
    shapes = ((0, 5), (6, 1), (4, 3))
    for past, seq in shapes:
        for got, want in zip(tiny_llama.run(fused, past, seq), tiny_llama.run(plain, past, seq),
                             strict=True):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    tiny_llama.assert_matches_eager(fused, model, shapes=shapes)


@FRONT_ENDS
@pytest.mark.parametrize(("target", "opset", "fused_op"), [
    ("ort", 20, None), ("ort", 23, "RMSNormalization"), ("onnx", 23, "RMSNormalization")])
def test_a_hand_written_rms_norm_fuses(dynamo, target, opset, fused_op):
    x = torch.randn(2, 3, 16)
    model = _HandRMSNorm()
    plain = _export(model, (x,), opset_version=opset, dynamo=dynamo)
    fused = _export(model, (x,), opset_version=opset, dynamo=dynamo, target=target)
    if fused_op is None:  # below 23 ONNX Runtime's SimplifiedLayerNormalization would fail
        assert _ops(fused) == _ops(plain)  # ONNX's checker: left unfused
    else:
        assert _ops(fused) == [fused_op]
    _assert_same(fused, plain, x)


@FRONT_ENDS
def test_a_residual_rms_norm_becomes_skip_simplified_layer_normalization(dynamo):
    a, b = torch.randn(2, 3, 16), torch.randn(2, 3, 16)
    model = _ResidualRMSNorm()
    plain = _export(model, (a, b), dynamo=dynamo)
    fused = _export(model, (a, b), dynamo=dynamo, target="ort")
    assert "SkipSimplifiedLayerNormalization" in _ops(fused) and "Pow" not in _ops(fused)
    _assert_same(fused, plain, a, b)
    _assert_same(fused, plain, torch.randn(2, 3, 16), torch.randn(2, 3, 16))


@FRONT_ENDS
def test_cached_attention_becomes_group_query_attention(dynamo):
    model = CachedAttention().eval()
    example = (torch.randn(2, 3, 64), torch.randn(2, 2, 4, 16), torch.randn(2, 2, 4, 16))
    names = ["x", "past_key", "past_value"]
    plain = _export(model, example, dynamo=dynamo, input_names=names,
                    dynamic_axes=ATTENTION_AXES)
    fused = _export(model, example, dynamo=dynamo, input_names=names,
                    dynamic_axes=ATTENTION_AXES, target="ort")
    assert _ops(fused).count("GroupQueryAttention") == 1
    assert "Softmax" not in _ops(fused) and "Cos" not in _ops(fused)
    # decode steps at any batch, a first prompt, a prompt after a past (batch 1: a limit of
    # ONNX Runtime's kernel)
    for batch, seq, past in ((2, 1, 5), (3, 1, 0), (2, 4, 0), (1, 3, 6)):
        arrays = (torch.randn(batch, seq, 64), torch.randn(batch, 2, past, 16),
                  torch.randn(batch, 2, past, 16))
        _assert_same(fused, plain, *arrays)
        with torch.no_grad():
            eager = model(*arrays)
        for got, want in zip(_run(fused, *arrays), eager, strict=True):
            np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=1e-5)


def test_attention_stays_unfused_where_ort_cannot_run_it():
    example = (torch.randn(1, 3, 64), torch.randn(1, 2, 4, 16), torch.randn(1, 2, 4, 16))
    names = ["x", "past_key", "past_value"]
    old = _export(CachedAttention().eval(), example, input_names=names,
                  dynamic_axes=ATTENTION_AXES, target="ort==1.17")
    assert "GroupQueryAttention" not in _ops(old)

    class Narrow(CachedAttention):  # heads of 8: the kernel's rotary takes multiples of 16
        def __init__(self):
            super().__init__(hidden=32)

    narrow = (torch.randn(1, 3, 32), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8))
    data = _export(Narrow().eval(), narrow, input_names=names, dynamic_axes=ATTENTION_AXES,
                   target="ort")
    assert "GroupQueryAttention" not in _ops(data)
    _assert_same(data, _export(Narrow().eval(), narrow, input_names=names,
                               dynamic_axes=ATTENTION_AXES), *narrow)


@FRONT_ENDS
def test_the_ort_llama_is_fused_and_matches_the_unfused_file(dynamo):
    model = tiny_llama.llama()
    plain, _ = tiny_llama.export(model, dynamo=dynamo)
    fused, result = tiny_llama.export(model, dynamo=dynamo, target="ort")
    ops = tiny_llama.op_types(fused)
    assert ops.count(("com.microsoft", "GroupQueryAttention")) == tiny_llama.LAYERS
    assert ops.count(("com.microsoft", "SkipSimplifiedLayerNormalization")) == \
        2 * tiny_llama.LAYERS
    assert not {"Softmax", "Cos", "Sin", "Where"} & {op for _, op in ops}
    assert ops.count(("", "MatMul")) == 5 * tiny_llama.LAYERS + 1  # q, k, v packed in one
    assert len(ops) <= 35 < len(tiny_llama.op_types(plain)) / 4
    assert result.graph.metadata["oxport.target_passes"].startswith("ort.rms-norm=")
    # a first prompt, a decode step, a prompt after a past
    _matches_unfused_and_eager(fused, plain, model)


def test_the_fused_fp16_and_int4_llama_runs():
    model = tiny_llama.llama()
    data, _ = tiny_llama.export(model, False, torch.float16, target="ort", dtype="fp16")
    assert tiny_llama.op_types(data).count(("com.microsoft", "GroupQueryAttention")) == 2
    tiny_llama.assert_matches_eager(data, model, torch.float16, atol=2e-3,
                                    shapes=((0, 5), (6, 1)))
    data, _ = tiny_llama.export(model, target="ort", quantize="int4")
    ops = tiny_llama.op_types(data)
    assert ops.count(("com.microsoft", "GroupQueryAttention")) == 2
    assert ops.count(("com.microsoft", "MatMulNBits")) == 5 * tiny_llama.LAYERS + 1


def _attention_nodes(data: bytes) -> list[onnx.NodeProto]:
    return [n for n in onnx.load_from_string(data).graph.node if n.op_type == "Attention"]


@FRONT_ENDS
def test_the_onnx_llama_at_opset_23_takes_its_cache_into_attention(dynamo):
    model = tiny_llama.llama()
    plain, _ = tiny_llama.export(model, dynamo=dynamo, opset_version=23)
    fused, result = tiny_llama.export(model, dynamo=dynamo, target="onnx", opset_version=23)
    ops = tiny_llama.op_types(fused)
    attentions = _attention_nodes(fused)
    assert len(attentions) == tiny_llama.LAYERS
    assert all(len(n.input) == 6 and len(n.output) == 3 for n in attentions)
    assert ops.count(("", "RotaryEmbedding")) == 2 * tiny_llama.LAYERS
    assert ops.count(("", "RMSNormalization")) == 2 * tiny_llama.LAYERS + 1
    assert ("", "Expand") not in ops or ops.count(("", "Expand")) < \
        tiny_llama.op_types(plain).count(("", "Expand"))  # KV heads no longer repeated
    assert all(domain == "" for domain, _ in ops)
    _matches_unfused_and_eager(fused, plain, model)
    assert "onnx.attention=2" in result.graph.metadata["oxport.target_passes"]


@FRONT_ENDS
def test_sdpa_over_a_cache_becomes_one_attention_with_past(dynamo):
    from oxport.opsets.cases.nn import CachedSdpaAttention

    model = CachedSdpaAttention().eval()
    example = (torch.randn(2, 3, 64), torch.randn(2, 2, 4, 16), torch.randn(2, 2, 4, 16))
    kwargs = {"input_names": ["x", "past_key", "past_value"], "dynamic_axes": ATTENTION_AXES,
              "opset_version": 23, "dynamo": dynamo}
    plain = _export(model, example, **kwargs)
    fused = _export(model, example, target="onnx", **kwargs)
    (attention,) = _attention_nodes(fused)
    assert (len(attention.input), len(attention.output)) == (6, 3)
    assert _ops(fused).count("RotaryEmbedding") == 2
    for batch, seq, past in ((2, 1, 5), (3, 4, 0), (2, 3, 6)):
        arrays = (torch.randn(batch, seq, 64), torch.randn(batch, 2, past, 16),
                  torch.randn(batch, 2, past, 16))
        _assert_same(fused, plain, *arrays)


@FRONT_ENDS
def test_self_attention_becomes_multi_head_attention(dynamo):
    from oxport.opsets.cases.nn import SelfAttention

    model = SelfAttention().eval()
    keep = torch.ones(2, 5, dtype=torch.bool)
    kwargs = {"input_names": ["x", "keep"], "dynamo": dynamo,
              "dynamic_axes": {"x": {0: "batch", 1: "seq"}, "keep": {0: "batch", 1: "seq"}}}
    plain = _export(model, (torch.randn(2, 5, 32), keep), **kwargs)
    fused = _export(model, (torch.randn(2, 5, 32), keep), target="ort", **kwargs)
    ops = _ops(fused)
    assert ops.count("MultiHeadAttention") == 1 and "Softmax" not in ops
    assert "Add" not in ops  # the projections' biases are the kernel's bias input
    for batch, seq, padded in ((2, 5, 0), (3, 7, 2), (1, 1, 0)):
        keep = torch.ones(batch, seq, dtype=torch.bool)
        keep[0, seq - padded:] = False
        arrays = (torch.randn(batch, seq, 32), keep)
        _assert_same(fused, plain, *arrays)
        with torch.no_grad():
            np.testing.assert_allclose(_run(fused, *arrays)[0], model(*arrays).numpy(), atol=1e-5)


@FRONT_ENDS
def test_a_residual_layer_norm_becomes_skip_layer_normalization(dynamo):
    from oxport.opsets.cases.normalization import _ResidualLayerNorm

    model = _ResidualLayerNorm().eval()
    axes = {"x": {0: "batch", 1: "seq"}, "residual": {0: "batch", 1: "seq"}}
    example = (torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    kwargs = {"input_names": ["x", "residual"], "dynamic_axes": axes, "dynamo": dynamo}
    plain = _export(model, example, **kwargs)
    fused = _export(model, example, target="ort", **kwargs)
    assert "SkipLayerNormalization" in _ops(fused)
    assert "LayerNormalization" not in _ops(fused) and "Add" not in _ops(fused)  # bias in
    _assert_same(fused, plain, *example)
    _assert_same(fused, plain, torch.randn(3, 5, 8), torch.randn(3, 5, 8))


@FRONT_ENDS
@pytest.mark.parametrize("target", ["ort", "ort==1.16"])  # 1.16: opset 19, GELU written out
@pytest.mark.parametrize(("case", "fused_op"), [
    ("_BiasGelu", "BiasGelu"), ("_TanhBiasGelu", "FastGelu"), ("_HandTanhGelu", "FastGelu")])
def test_gelu_fuses(dynamo, target, case, fused_op):
    from oxport.opsets.cases import activations

    model = getattr(activations, case)().eval()
    x = torch.randn(2, 3, 8) * 3
    axes = {"x": {0: "batch", 1: "seq"}}
    opset = 19 if target == "ort==1.16" else 23
    plain = _export(model, (x,), input_names=["x"], dynamic_axes=axes, dynamo=dynamo,
                    opset_version=opset)
    fused = _export(model, (x,), input_names=["x"], dynamic_axes=axes, dynamo=dynamo,
                    target=target)
    ops = _ops(fused)
    assert fused_op in ops and not {"Gelu", "Tanh", "Erf", "Add"} & set(ops)
    _assert_same(fused, plain, x)
    _assert_same(fused, plain, torch.randn(4, 1, 8) * 3)


@FRONT_ENDS
def test_an_exact_gelu_written_out_below_opset_20_is_ort_gelu(dynamo):
    x = torch.randn(2, 3, 8) * 3
    data = _export(torch.nn.GELU(), (x,), dynamo=dynamo, target="ort==1.16")
    (node,) = onnx.load_from_string(data).graph.node
    assert (node.domain, node.op_type) == ("com.microsoft", "Gelu")
    np.testing.assert_allclose(_run(data, x)[0], torch.nn.functional.gelu(x).numpy(),
                               atol=1e-6)


def _transformers_model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "gpt2":
        return tiny_llama.transformers.GPT2Model(tiny_llama.transformers.GPT2Config(
            n_embd=64, n_layer=2, n_head=4, vocab_size=97, n_positions=64, use_cache=False,
            bos_token_id=1, eos_token_id=2)).eval()
    return tiny_llama.transformers.BertModel(tiny_llama.transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=97)).eval()


@FRONT_ENDS
@pytest.mark.parametrize(("name", "gelu"), [("gpt2", "FastGelu"), ("bert", "BiasGelu")])
def test_gpt2_and_bert_fuse_layer_norm_gelu_and_attention(dynamo, name, gelu):
    model = _transformers_model(name)
    ids, mask = torch.randint(0, 97, (2, 5)), torch.ones(2, 5, dtype=torch.long)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    kwargs = {"input_names": ["input_ids", "attention_mask"], "dynamic_axes": axes,
              "dynamo": dynamo}
    plain = _export(model, (ids, {"attention_mask": mask}), **kwargs)
    fused = _export(model, (ids, {"attention_mask": mask}), target="ort", **kwargs)
    ops = _ops(fused)
    assert ops.count("MultiHeadAttention") == 2 and ops.count(gelu) == 2
    assert ops.count("SkipLayerNormalization") == 4 and "Softmax" not in ops
    assert len(ops) < len(_ops(plain)) * 0.7
    ids, mask = torch.randint(0, 97, (3, 7)), torch.ones(3, 7, dtype=torch.long)
    mask[0, 5:] = 0  # padding
    for arrays in ((ids, mask), (ids[:1, :1], mask[:1, :1])):
        _assert_same(fused, plain, *arrays)
        with torch.no_grad():
            eager = model(arrays[0], attention_mask=arrays[1]).last_hidden_state
        np.testing.assert_allclose(_run(fused, *arrays)[0], eager.numpy(), atol=1e-5)


@FRONT_ENDS
def test_gpt2_with_a_cache_takes_it_into_multi_head_attention(dynamo):
    transformers = tiny_llama.transformers
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=97, n_positions=64, bos_token_id=1,
        eos_token_id=2)).eval()
    names = tiny_llama.names()
    axes = {n: ({0: "batch", 1: "seq"} if n == "input_ids" else
                {0: "batch", 1: "total"} if n == "attention_mask" else {0: "batch", 2: "past"})
            for n in names}

    def inputs(past: int, seq: int):
        generator = torch.Generator().manual_seed(past * 10 + seq)
        cache = transformers.DynamicCache()
        for layer in range(2):
            cache.update(*(torch.randn(2, 4, past, 16, generator=generator) for _ in "kv"),
                         layer)
        ids = torch.randint(0, 97, (2, seq), generator=generator)
        return ids, torch.ones(2, past + seq, dtype=torch.long), cache

    def export(**kwargs) -> bytes:
        ids, mask, cache = inputs(4, 3)
        return _export(model, (ids, {"attention_mask": mask, "past_key_values": cache}),
                       input_names=names, dynamic_axes=axes, dynamo=dynamo, **kwargs)

    plain, fused = export(), export(target="ort")
    ops = _ops(fused)
    assert ops.count("MultiHeadAttention") == 2 and "Softmax" not in ops
    for past, seq in ((0, 5), (6, 1), (4, 3)):
        ids, mask, cache = inputs(past, seq)
        arrays = (ids, mask, *(t for layer in cache.layers for t in (layer.keys, layer.values)))
        _assert_same(fused, plain, *arrays)
        with torch.no_grad():
            eager = model(ids, attention_mask=mask, past_key_values=inputs(past, seq)[2])
        got = _run(fused, *arrays)
        np.testing.assert_allclose(got[0], eager.logits.numpy(), atol=1e-5)
        np.testing.assert_allclose(got[-1], eager.past_key_values.layers[-1].values.numpy(),
                                   atol=1e-6)


@FRONT_ENDS
@pytest.mark.parametrize(("hidden", "target"), [(32, "ort"), (64, "ort==1.17")],
                         ids=["head-size-8", "ort-1.17"])
def test_rotary_left_out_of_attention_becomes_rotary_embedding(dynamo, hidden, target):
    """Where GroupQueryAttention cannot take the rotary embedding inside (a head size its
    kernel refuses; ONNX Runtime 1.17, before GroupQueryAttention), it is one op of its own."""
    model = CachedAttention(hidden=hidden).eval()
    size = hidden // 4
    example = (torch.randn(1, 3, hidden), torch.randn(1, 2, 4, size), torch.randn(1, 2, 4, size))
    kwargs = {"input_names": ["x", "past_key", "past_value"], "dynamic_axes": ATTENTION_AXES,
              "dynamo": dynamo}
    plain = _export(model, example, **kwargs)
    fused = _export(model, example, target=target, **kwargs)
    ops = _ops(fused)
    assert ops.count("RotaryEmbedding") == 2 and "Neg" not in ops
    assert "GroupQueryAttention" not in ops
    for batch, seq, past in ((2, 1, 5), (3, 4, 0), (2, 3, 6)):
        arrays = (torch.randn(batch, seq, hidden), torch.randn(batch, 2, past, size),
                  torch.randn(batch, 2, past, size))
        _assert_same(fused, plain, *arrays)


@FRONT_ENDS
def test_a_llama_group_query_attention_refuses_runs_as_multi_head_attention(dynamo,
                                                                            monkeypatch):
    """Heads of 8 (GroupQueryAttention's rotary takes multiples of 16), not grouped: the
    rotary embeddings are RotaryEmbedding, the attention with its cache MultiHeadAttention
    of the rotated projections."""
    torch.manual_seed(0)
    model = tiny_llama.transformers.LlamaForCausalLM(tiny_llama.transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=8, head_dim=8, vocab_size=tiny_llama.VOCAB)).eval()
    monkeypatch.setattr(tiny_llama, "KV_HEADS", 8)
    monkeypatch.setattr(tiny_llama, "HEAD_DIM", 8)
    plain, _ = tiny_llama.export(model, dynamo=dynamo)
    fused, result = tiny_llama.export(model, dynamo=dynamo, target="ort")
    ops = tiny_llama.op_types(fused)
    assert ops.count(("com.microsoft", "MultiHeadAttention")) == tiny_llama.LAYERS
    assert ops.count(("com.microsoft", "RotaryEmbedding")) == 2 * tiny_llama.LAYERS
    assert not {"Softmax", "Neg", "Transpose"} & {op for _, op in ops}
    assert len(ops) < len(tiny_llama.op_types(plain)) / 2
    _matches_unfused_and_eager(fused, plain, model)
    assert "ort.multi-head-attention=2" in result.graph.metadata["oxport.target_passes"]


@pytest.mark.parametrize(("name", "fused_ops"), [
    ("gpt2", {"MultiHeadAttention", "SkipLayerNormalization", "FastGelu"}),
    ("bert", {"MultiHeadAttention", "SkipLayerNormalization", "BiasGelu"})])
def test_fp16_gpt2_and_bert_fuse_and_match(name, fused_ops):
    """fp16 (GPT-2's tanh constants rounded to half precision still match)."""
    model = _transformers_model(name)
    ids, mask = torch.randint(0, 97, (2, 5)), torch.ones(2, 5, dtype=torch.long)
    kwargs = {"input_names": ["input_ids", "attention_mask"], "dtype": "fp16",
              "dynamic_axes": {"input_ids": {0: "batch", 1: "seq"},
                               "attention_mask": {0: "batch", 1: "seq"}}}
    plain = _export(model, (ids, {"attention_mask": mask}), **kwargs)
    fused = _export(model, (ids, {"attention_mask": mask}), target="ort", **kwargs)
    assert fused_ops <= set(_ops(fused)) and "Softmax" not in _ops(fused)
    mask[1, 3:] = 0
    got, want = _run(fused, ids, mask)[0], _run(plain, ids, mask)[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=1e-2)
    with torch.no_grad():
        eager = model(ids, attention_mask=mask).last_hidden_state.numpy()
    np.testing.assert_allclose(got.astype(np.float32), eager, atol=1e-2)


@FRONT_ENDS
def test_an_unmasked_vit_fuses_into_multi_head_attention(dynamo):
    transformers = tiny_llama.transformers
    torch.manual_seed(0)
    model = transformers.ViTModel(transformers.ViTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        image_size=32, patch_size=8)).eval()
    kwargs = {"input_names": ["pixel_values"], "dynamic_axes": {"pixel_values": {0: "batch"}},
              "dynamo": dynamo}
    example = (torch.randn(2, 3, 32, 32),)
    plain, fused = _export(model, example, **kwargs), _export(model, example, target="ort",
                                                              **kwargs)
    ops = _ops(fused)
    assert ops.count("MultiHeadAttention") == 2 and ops.count("SkipLayerNormalization") == 4
    assert ops.count("BiasGelu") == 2 and "Softmax" not in ops
    pixels = torch.randn(3, 3, 32, 32)
    _assert_same(fused, plain, pixels)
    with torch.no_grad():
        eager = model(pixels).last_hidden_state.numpy()
    np.testing.assert_allclose(_run(fused, pixels)[0], eager, atol=1e-5)
