"""What the sweep of transformers' architectures (issue 32) found wrong without a word, each
with its cause, on both front ends (small configs, random weights, ONNX Runtime vs eager):

* ``AfmoeForCausalLM`` differs at the export shape: not a bug but a top-k tie. transformers
  initializes its router's gate at zero, so every expert scores sigmoid(0) and
  ``torch.topk`` picks other experts than ONNX ``TopK`` (lowest index first). The export
  warns; with distinct gate rows it matches.
* ``FunnelForMaskedLM`` keeps its relative positions as Python ints (on purpose, its code
  says), so the file is right only at the traced length: both front ends warn.
* ``SEWModel`` pads its upsampled frames when they are fewer than its input frames; traced at
  an even number of frames the branch is not taken and the file is one frame short at an odd
  number: both front ends warn.
* The state-space family (Mamba and its kin) runs its scan as a Python loop over the
  sequence (``for index in range(seq_len)``): the loop is unrolled at the traced length, on
  both front ends: both warn.

And what the causal-LM sweep (``benchmarks/causal_lm_sweep.py``) found failing through
``text-generation-with-past``, fixed since (docs/transformers.md names each cause): Llama 4's
complex slice, JetMoe's and LongcatFlash's data-dependent experts, Moshi's cache-only
window, and the sweep's own configs of Dory and MiniCPM3; CpmAnt and Zamba are refused with
the reason.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

import oxport

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install -e .[test])")

VOCAB = 99
FRONT_ENDS = pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])


def _export(model: torch.nn.Module, kwargs: dict[str, Any], axes: dict[str, dict[int, str]],
            dynamo: bool) -> tuple[ort.InferenceSession, list[str]]:
    """Export with ``axes`` (inputs first, then outputs); the session and oxport's warnings."""
    inputs = [name for name in axes if name in kwargs]
    buffer = io.BytesIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        oxport.export(model, (kwargs,), buffer, input_names=inputs,
                      output_names=[name for name in axes if name not in kwargs],
                      dynamic_axes=axes, dynamo=dynamo, opset_version=17)
    said = [str(w.message) for w in caught if str(w.message).startswith("oxport:")]
    return ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"]), said


def _run(session: ort.InferenceSession, kwargs: dict[str, Any]) -> np.ndarray:
    feeds = {i.name: kwargs[i.name].numpy() for i in session.get_inputs()}
    return session.run(None, feeds)[0]


def _afmoe() -> torch.nn.Module:
    """One dense layer, then one of 4 experts (top 2) with a shared expert."""
    torch.manual_seed(0)
    return transformers.AfmoeForCausalLM(transformers.AfmoeConfig(
        hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=2,
        num_dense_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_experts=4, num_experts_per_tok=2, num_shared_experts=1, vocab_size=VOCAB,
        max_position_embeddings=64, sliding_window=8, global_attn_every_n_layers=2,
        layer_types=["sliding_attention", "full_attention"], use_cache=False)).eval()


def test_torch_topk_breaks_ties_otherwise_than_onnx():
    """The cause: on equal scores torch.topk does not pick the lowest indices, ONNX TopK
    does (its spec)."""
    scores = torch.full((3, 4), 0.5)
    assert torch.topk(scores, 2, dim=1).indices.tolist() != [[0, 1]] * 3


@pytest.mark.slow
@FRONT_ENDS
def test_afmoe_differs_only_by_its_zero_router_ties_and_warns(dynamo: bool):
    model = _afmoe()
    router = "model.layers.1.mlp.router.gate.weight"
    assert not model.get_parameter(router).any()  # transformers' initialization
    ids = torch.randint(0, VOCAB, (2, 7))
    axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    session, said = _export(model, {"input_ids": ids}, axes, dynamo)
    assert len(said) == 1 and router in said[0] and "tie" in said[0]
    with torch.no_grad():
        eager = model(ids).logits.numpy()
    assert np.abs(_run(session, {"input_ids": ids}) - eager).max() > 1e-2  # routed elsewhere

    with torch.no_grad():  # distinct gate rows: no tie, no warning, the same logits
        model.get_parameter(router).normal_()
        eager = model(ids).logits.numpy()
    session, said = _export(model, {"input_ids": ids}, axes, dynamo)
    assert said == []
    np.testing.assert_allclose(_run(session, {"input_ids": ids}), eager, rtol=1e-3, atol=1e-4)


def _sew() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.SEWModel(transformers.SEWConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, squeeze_factor=2)).eval()


@pytest.mark.slow
@FRONT_ENDS
def test_sew_traced_at_an_even_frame_count_warns_of_its_padding_branch(dynamo: bool):
    """430 samples: 42 frames, upsampled to 42, no padding; 440 samples: 43 frames, but the
    file still gives 42 (the padding branch was not captured)."""
    model = _sew()
    axes = {"input_values": {0: "batch", 1: "samples"},
            "last_hidden_state": {0: "batch", 1: "frames"}}
    session, said = _export(model, {"input_values": torch.randn(2, 430), "return_dict": False},
                            axes, dynamo)
    assert len(said) == 1, said
    assert ("modeling_sew.py(471)" if not dynamo else "input_values.shape[1]") in said[0]
    second = {"input_values": torch.randn(3, 440)}
    with torch.no_grad():
        eager = model(**second).last_hidden_state
    assert _run(session, second).shape[1] == eager.shape[1] - 1  # the warning is right


class PadsWhenShorter(torch.nn.Module):
    """SEW's way without transformers: frames from a strided convolution, pooled in pairs
    and repeated back, padded when their count was odd."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(2, 4, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = self.conv(x)
        up = torch.nn.functional.avg_pool1d(frames, 2).repeat_interleave(2, dim=2)
        if up.shape[2] < frames.shape[2]:
            up = torch.nn.functional.pad(up, (0, frames.shape[2] - up.shape[2]))
        return up


@FRONT_ENDS
def test_a_branch_on_two_sizes_equal_when_traced_warns(dynamo: bool):
    """13 samples: 6 frames, no padding when traced; 15 samples: 7 frames, one short."""
    model = PadsWhenShorter().eval()
    axes = {"x": {0: "batch", 2: "samples"}, "y": {0: "batch", 2: "frames"}}
    session, said = _export(model, {"x": torch.randn(2, 2, 13)}, axes, dynamo)
    assert len(said) == 1, said
    assert ("test_transformers_sweep_findings.py" if not dynamo else "x.shape[2]") in said[0]
    second = torch.randn(3, 2, 15)
    assert _run(session, {"x": second}).shape[2] == model(second).shape[2] - 1


def _funnel() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.FunnelForMaskedLM(transformers.FunnelConfig(
        vocab_size=VOCAB, block_sizes=[1, 1], num_decoder_layers=1, d_model=32, n_head=2,
        d_head=8, d_inner=37, max_position_embeddings=64)).eval()


def _mamba() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.MambaForCausalLM(transformers.MambaConfig(
        vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
        conv_kernel=4, use_cache=False)).eval()


#: model, the line of its code that fixes the sequence length (the trace's warning names it)
STATIC_SEQUENCE = {
    # pos = list(range(seq_len)): "Python ints ... so the sizes stay static for export"
    "funnel": (_funnel, "modeling_funnel.py(152)"),
    # the selective scan's reference loop: for index in range(seq_len)
    "mamba": (_mamba, "modeling_mamba.py(261)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(STATIC_SEQUENCE))
@FRONT_ENDS
def test_a_sequence_length_fixed_by_the_models_code_warns(name: str, dynamo: bool):
    """Right at the traced length, wrong (or refused by ONNX Runtime) at another: the export
    said so."""
    build, line = STATIC_SEQUENCE[name]
    model = build()
    axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    traced = {"input_ids": torch.randint(0, VOCAB, (2, 7))}
    session, said = _export(model, {**traced, "return_dict": False}, axes, dynamo)
    assert said, "no warning"
    if dynamo:
        assert any("'seq') = 7" in message or "input_ids.shape[1] == 7" in message
                   for message in said), said
    else:
        assert any(line in message and "(seq" in message for message in said), said
    with torch.no_grad():
        np.testing.assert_allclose(_run(session, traced), model(**traced).logits.numpy(),
                                   rtol=1e-3, atol=1e-4)
        second = {"input_ids": torch.randint(0, VOCAB, (3, 11))}
        eager = model(**second).logits.numpy()
    try:
        got = _run(session, second)
    except Exception:  # noqa: BLE001 - ONNX Runtime refuses the fixed length
        return
    assert got.shape != eager.shape or not np.allclose(got, eager, atol=1e-3)


# -- the causal-LM sweep's failures, fixed ------------------------------------------------
#: (model type, class) of each failure of the sweep's first run that generates now.
FIXED_IN_THE_SWEEP = [
    ("llama4_text", "Llama4ForCausalLM"), ("jetmoe", "JetMoeForCausalLM"),
    ("longcat_flash", "LongcatFlashForCausalLM"), ("moshi", "MoshiForCausalLM"),
    ("dory", "DoryForCausalLM"), ("minicpm3", "MiniCPM3ForCausalLM")]


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "name"), FIXED_IN_THE_SWEEP)
@pytest.mark.parametrize("front_end", ["trace", "dynamo"])
def test_the_sweeps_failures_generate_transformers_tokens(model_type: str, name: str,
                                                          front_end: str):
    """12 greedy tokens for 2 prompts in ONNX Runtime, the presents fed back, against
    transformers' generate: the same ids, and each step's logits within 1e-3."""
    from benchmarks.causal_lm_sweep import run_one

    row = run_one(model_type, name, front_end)
    assert row["status"] == "ok", row.get("reason")
    assert row["max_logit_difference"] < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "name", "reason"), [
    ("cpmant", "CpmAntForCausalLM", "re-reads the whole sequence at every step"),
    ("zamba", "ZambaForCausalLM", "LinearAttentionAndFullAttentionLayer")])
def test_a_model_without_a_key_value_past_is_refused_saying_why(model_type: str, name: str,
                                                                reason: str):
    from benchmarks.causal_lm_sweep import run_one

    row = run_one(model_type, name, "trace")
    assert row["status"] == "export failed" and reason in row["reason"], row.get("reason")


def test_the_moshi_mask_sees_what_a_sliding_window_cache_keeps():
    """Past 5 positions and a window of 3, the last 2 past positions and the new ones
    (causally); a prefill sees every earlier position, as eager's returns all of them; a
    padded position none."""
    from oxport.plugins.hf.architectures import window_mask

    mask = torch.ones(1, 7, dtype=torch.long)
    seen = window_mask(mask, 2, 3, torch.float32)[0, 0] == 0
    assert seen.tolist() == [[False, False, False, True, True, True, False],
                             [False, False, False, True, True, True, True]]
    mask[0, 0] = 0
    seen = window_mask(mask[:, :4], 4, 3, torch.float32)[0, 0] == 0
    assert seen.tolist() == [[False, False, False, False], [False, True, False, False],
                             [False, True, True, False], [False, True, True, True]]


def _sweep_model(model_type: str, name: str) -> torch.nn.Module:
    from benchmarks.causal_lm_sweep import build

    return build(name, model_type)


@pytest.mark.parametrize(("model_type", "name"), [
    ("jetmoe", "JetMoeForCausalLM"), ("longcat_flash", "LongcatFlashForCausalLM"),
    ("moshi", "MoshiForCausalLM")])
def test_the_quirks_leave_eager_pytorch_to_transformers(model_type: str, name: str):
    """A quirk changes the model only while oxport captures it: eager logits, and so
    --verify's reference, are transformers' own, bit for bit, with the model's own cache and
    with a full-length one as oxport rebuilds it; a model prepared twice is patched once."""
    from oxport.plugins.hf import quirks
    from oxport.plugins.hf.io_types import flatten_dynamic_cache, unflatten_dynamic_cache

    plain, prepared = _sweep_model(model_type, name), _sweep_model(model_type, name)
    for _ in range(2):
        prepared = quirks.apply(quirks.for_architecture(name), "prepare_model", prepared)
    patched = [m for m in prepared.modules() if "forward" in vars(m)]
    assert patched and all(
        vars(m)["forward"].__func__.__kwdefaults__["_original"].__func__ is type(m).forward
        for m in patched)
    ids = torch.randint(3, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 0] = 0
    longer = torch.cat([mask, mask[:, :1]], 1)
    with torch.no_grad():
        first = [m(input_ids=ids, attention_mask=mask, use_cache=True) for m in (plain, prepared)]
        assert torch.equal(first[0].logits, first[1].logits)
        caches = [getattr(out, "cache", None) or out.past_key_values for out in first]
        tensors, layers = flatten_dynamic_cache(caches[0])
        full = [unflatten_dynamic_cache([t for _, t in tensors], layers) for _ in range(2)]
        for past in (caches, full):
            step = [m(input_ids=ids[:, :1], attention_mask=longer, cache=c).logits
                    for m, c in zip((plain, prepared), past)]
            assert torch.equal(step[0], step[1])
