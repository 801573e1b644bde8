"""ONNX Runtime GenAI runs a Llama exported by ``text-generation-with-past`` (its
``genai_config.json`` and the file contract) and generates transformers' tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import oxport

og = pytest.importorskip("onnxruntime_genai")
transformers = pytest.importorskip("transformers")
NEW_TOKENS = 12


@pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])
def test_onnxruntime_genai_generates_transformers_tokens(tmp_path, dynamo):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=97, bos_token_id=1, eos_token_id=2,
        pad_token_id=0)).eval()
    model.save_pretrained(tmp_path / "ckpt")
    oxport.export_task(tmp_path / "ckpt", tmp_path / "onnx", "text-generation-with-past",
                       dynamo=dynamo)
    prompt = np.array([[5, 17, 33, 8, 61]], dtype=np.int32)
    with torch.no_grad():
        expected = model.generate(torch.from_numpy(prompt).long(), do_sample=False,
                                  max_new_tokens=NEW_TOKENS)[0].numpy()

    genai_model = og.Model(str(tmp_path / "onnx"))
    params = og.GeneratorParams(genai_model)
    params.set_search_options(max_length=prompt.shape[1] + NEW_TOKENS, do_sample=False)
    generator = og.Generator(genai_model, params)
    generator.append_tokens(prompt)
    while not generator.is_done():
        generator.generate_next_token()
    np.testing.assert_array_equal(generator.get_sequence(0), expected)
    assert len(expected) > prompt.shape[1] + 1  # generated more than one token
