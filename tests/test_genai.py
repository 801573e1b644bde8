"""ONNX Runtime GenAI runs a Llama exported by ``text-generation-with-past`` (its
``genai_config.json`` and the file contract) and generates transformers' tokens, for one
prompt and for a batch of prompts of different lengths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import oxport

og = pytest.importorskip("onnxruntime_genai")
transformers = pytest.importorskip("transformers")
NEW_TOKENS = 12
PAD = 0
FRONT_ENDS = pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])


def _llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=97, bos_token_id=1, eos_token_id=2,
        pad_token_id=PAD)).eval()


def _export(model: torch.nn.Module, tmp_path, dynamo: bool) -> str:
    model.save_pretrained(tmp_path / "ckpt")
    oxport.export_task(tmp_path / "ckpt", tmp_path / "onnx", "text-generation-with-past",
                       dynamo=dynamo)
    return str(tmp_path / "onnx")


def _genai_sequences(folder: str, prompts: np.ndarray) -> list[np.ndarray]:
    """onnxruntime_genai's greedy sequences for ``prompts`` (a batch, padded on the right)."""
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompts.shape[1] + NEW_TOKENS, do_sample=False,
                              batch_size=prompts.shape[0])
    generator = og.Generator(model, params)
    generator.append_tokens(prompts)
    while not generator.is_done():
        generator.generate_next_token()
    return [generator.get_sequence(i) for i in range(prompts.shape[0])]


@FRONT_ENDS
def test_onnxruntime_genai_generates_transformers_tokens(tmp_path, dynamo):
    model = _llama()
    folder = _export(model, tmp_path, dynamo)
    prompt = np.array([[5, 17, 33, 8, 61]], dtype=np.int32)
    with torch.no_grad():
        expected = model.generate(torch.from_numpy(prompt).long(), do_sample=False,
                                  max_new_tokens=NEW_TOKENS)[0].numpy()
    np.testing.assert_array_equal(_genai_sequences(folder, prompt)[0], expected)
    assert len(expected) > prompt.shape[1] + 1  # generated more than one token


@FRONT_ENDS
def test_a_batch_of_prompts_of_different_lengths_generates_transformers_tokens(tmp_path,
                                                                             dynamo):
    """onnxruntime_genai takes a batch padded on the right: it masks the pad tokens after
    each prompt and numbers the new tokens on from the prompt's last position (its
    default_position_inputs); transformers pads on the left. Either way each row sees its
    own prompt at positions 0.., so the new tokens are the same."""
    model = _llama()
    folder = _export(model, tmp_path, dynamo)
    prompts = [[5, 17, 33, 8, 61], [44, 9, 70]]
    longest = max(map(len, prompts))
    right = np.array([p + [PAD] * (longest - len(p)) for p in prompts], dtype=np.int32)
    left = torch.tensor([[PAD] * (longest - len(p)) + p for p in prompts])
    with torch.no_grad():
        expected = model.generate(left, attention_mask=(left != PAD).long(), do_sample=False,
                                  max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                  eos_token_id=None, pad_token_id=PAD)[:, longest:].numpy()
    got = np.stack([sequence[longest:] for sequence in _genai_sequences(folder, right)])
    np.testing.assert_array_equal(got, expected)
    assert len(set(map(tuple, expected.tolist()))) == 2  # the rows differ
