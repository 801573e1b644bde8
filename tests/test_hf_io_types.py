"""transformers' KV caches cross the model boundary (the hf plugin's I/O types): a Llama
decoder takes a DynamicCache and returns the grown one, a BART decoder an
EncoderDecoderCache, on both front ends, and ONNX Runtime gives eager's logits and
presents, at the export's past length and at another one."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import oxport
from tests.helpers import export_proto

transformers = pytest.importorskip("transformers")
FRONT_ENDS = pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])
VOCAB = 97


def _llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB)).eval()


def _cache(layers: int, batch: int, heads: int, past: int, head_dim: int) -> object:
    cache = transformers.DynamicCache()
    for index in range(layers):
        cache.update(torch.randn(batch, heads, past, head_dim),
                     torch.randn(batch, heads, past, head_dim), index)
    return cache


def _flat_cache(cache: object) -> list[torch.Tensor]:
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


def _run(model, feeds: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    outputs = session.run(None, {k: v.numpy() for k, v in feeds.items()})
    return dict(zip([o.name for o in session.get_outputs()], outputs))


def _llama_feeds(batch: int, seq: int, past: int) -> tuple[dict, object]:
    cache = _cache(2, batch, 2, past, 8)
    feeds = {"input_ids": torch.randint(0, VOCAB, (batch, seq)),
             "attention_mask": torch.ones(batch, past + seq, dtype=torch.long)}
    for index, tensor in enumerate(_flat_cache(cache)):
        feeds[f"cache.{index // 2}.{('key', 'value')[index % 2]}"] = tensor
    return feeds, cache


@FRONT_ENDS
def test_a_llama_takes_and_returns_its_dynamic_cache(dynamo):
    model = _llama()
    feeds, cache = _llama_feeds(2, 3, 4)
    axes = {name: ({0: "batch", 1: "seq"} if name == "input_ids" else
                   {0: "batch", 1: "total"} if name == "attention_mask" else {0: "batch", 2: "past"})
            for name in feeds}
    proto = export_proto(model, (feeds["input_ids"], {"attention_mask": feeds["attention_mask"],
                                                      "cache": cache}),
                         dynamic_axes=axes, dynamo=dynamo)
    assert [i.name for i in proto.graph.input] == list(feeds)
    assert [o.name for o in proto.graph.output] == [
        "logits", *(f"present.cache.{i}.{kv}" for i in (0, 1) for kv in ("key", "value"))]
    for batch, seq, past in ((2, 3, 4), (3, 1, 6)):
        feeds, cache = _llama_feeds(batch, seq, past)
        with torch.no_grad():
            expected = model(feeds["input_ids"], attention_mask=feeds["attention_mask"],
                             cache=cache)
        actual = list(_run(proto, feeds).values())
        wanted = [expected.logits, *_flat_cache(expected.cache)]
        assert len(actual) == len(wanted)
        for got, want in zip(actual, wanted):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


def test_an_empty_cache_layer_is_refused_with_the_shape_to_give():
    cache = transformers.DynamicCache(config=_llama().config)
    with pytest.raises(oxport.OnnxExporterError, match=r"\[batch, kv_heads, 0, head_dim\]"):
        export_proto(_llama(), (torch.ones(1, 2, dtype=torch.long),
                                {"cache": cache}))


@FRONT_ENDS
def test_a_bart_decoder_takes_its_encoder_decoder_cache(dynamo):
    torch.manual_seed(0)
    model = transformers.BartForConditionalGeneration(transformers.BartConfig(
        d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=VOCAB,
        max_position_embeddings=64)).eval()
    encoder_out = torch.randn(2, 5, 32)

    def inputs(past: int) -> tuple[torch.Tensor, object]:
        self_cache, cross_cache = transformers.DynamicCache(), transformers.DynamicCache()
        for index in range(2):
            self_cache.update(torch.randn(2, 4, past, 8), torch.randn(2, 4, past, 8), index)
            cross_cache.update(torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8), index)
        return (torch.randint(0, VOCAB, (2, 1)),
                transformers.EncoderDecoderCache(self_cache, cross_cache))

    ids, cache = inputs(3)
    proto = export_proto(model, (None, {"decoder_input_ids": ids, "encoder_outputs": (encoder_out,),
                                        "cache": cache, "use_cache": True}),
                         dynamo=dynamo)
    names = [i.name for i in proto.graph.input]
    assert names[-4:] == ["cache.1.decoder.key", "cache.1.decoder.value",
                          "cache.1.encoder.key", "cache.1.encoder.value"]
    ids, cache = inputs(3)
    flat = [ids, encoder_out] + [t.clone() for d, e in zip(cache.self_attention_cache.layers,
                                                             cache.cross_attention_cache.layers)
                                  for t in (d.keys, d.values, e.keys, e.values)]
    with torch.no_grad():
        expected = model(None, decoder_input_ids=ids, encoder_outputs=(encoder_out,),
                         cache=cache, use_cache=True)
    actual = _run(proto, dict(zip(names, flat)))
    np.testing.assert_allclose(next(iter(actual.values())), expected.logits.numpy(),
                               rtol=1e-4, atol=1e-4)
