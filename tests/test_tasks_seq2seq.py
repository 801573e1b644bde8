"""The encoder-decoder tasks: T5 and BART (``text2text-generation(-with-past)``) and Whisper
(``automatic-speech-recognition(-with-past)``) from checkpoint folders (tiny configs, random
weights perturbed so that generation varies), exported in optimum's layout; ONNX Runtime
generates 12 tokens greedily, the presents fed back, as transformers' ``generate`` does (ids
and logits at every step)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.plugins.hf.tasks import seq2seq

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install -e .[test])")

VOCAB = 99


def _perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """Random weights made larger: a tiny model's greedy tokens then vary."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.2)
    return model.eval()


def _t5() -> torch.nn.Module:
    torch.manual_seed(0)
    return _perturbed(transformers.T5ForConditionalGeneration(transformers.T5Config(
        d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2, num_heads=4,
        vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)))


def _bart() -> torch.nn.Module:
    torch.manual_seed(0)
    return _perturbed(transformers.BartForConditionalGeneration(transformers.BartConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=VOCAB,
        max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2, forced_eos_token_id=None)))


def _whisper() -> torch.nn.Module:
    torch.manual_seed(0)
    return _perturbed(transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=VOCAB,
        num_mel_bins=8, max_source_positions=16, max_target_positions=32, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)))


MODELS = {"t5": (_t5, "text2text-generation"), "bart": (_bart, "text2text-generation"),
          "whisper": (_whisper, "automatic-speech-recognition")}
FILES = ["encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"]


def _inputs(name: str, batch: int) -> dict[str, torch.Tensor]:
    """Encoder inputs of another size than the export's example: 3 rows, 9 tokens."""
    generator = torch.Generator().manual_seed(7)
    if name == "whisper":
        return {"input_features": torch.randn(batch, 8, 32, generator=generator)}
    mask = torch.ones(batch, 9, dtype=torch.long)
    mask[1, -3:] = 0
    return {"input_ids": torch.randint(3, VOCAB, (batch, 9), generator=generator),
            "attention_mask": mask}


def _names(path: Path) -> tuple[list[str], list[str]]:
    graph = onnx.load(path, load_external_data=False).graph
    return [i.name for i in graph.input], [o.name for o in graph.output]


FRONT_ENDS = [pytest.param(False, id="trace"),
              pytest.param(True, id="dynamo", marks=pytest.mark.slow)]


@pytest.mark.parametrize("dynamo", FRONT_ENDS)
@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_generation_in_onnx_runtime_is_transformers(name: str, dynamo: bool,
                                                           tmp_path: Path):
    build, task = MODELS[name]
    model = build()
    model.save_pretrained(tmp_path / "ckpt")
    result = oxport.export_task(tmp_path / "ckpt", tmp_path / "out", task=f"{task}-with-past",
                                verify=True, dynamo=dynamo)
    assert result.ok, result.verification["report"]
    assert set(FILES) | {"config.json", "generation_config.json"} <= set(result.files)
    inputs, outputs = _names(tmp_path / "out" / "decoder_with_past_model.onnx")
    text = [] if name == "whisper" else ["encoder_attention_mask"]
    assert inputs[:len(text) + 3] == [*text, "input_ids", "past_key_values.0.decoder.key",
                                      "past_key_values.0.decoder.value"]
    assert outputs == ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(2)
                                    for kv in ("key", "value")]
    # Another batch and encoder length than the export's, 12 tokens.
    check = seq2seq.compare_generation(model, tmp_path / "out", _inputs(name, 3))
    assert check["ok"], check["report"]
    assert len({tuple(row) for row in check["ids"]}) > 1 or len(set(check["ids"][0])) > 1


@pytest.mark.parametrize("name", ["t5", "whisper"])
def test_without_past_the_decoder_gives_the_logits_of_the_whole_sequence(name: str,
                                                                         tmp_path: Path):
    build, task = MODELS[name]
    model = build()
    result = oxport.export_task(model, tmp_path, task=task, verify=True)
    assert result.ok, result.verification["report"]
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == sorted(FILES[:2])
    encoder = _inputs(name, 2)
    with torch.no_grad():
        hidden = model.get_encoder()(**encoder).last_hidden_state
        ids = torch.tensor([[0, 5, 7, 9], [0, 3, 4, 8]])
        kwargs = {} if name == "whisper" else {"attention_mask": encoder["attention_mask"]}
        eager = model(encoder_outputs=(hidden,), decoder_input_ids=ids, use_cache=False,
                      **kwargs).logits.numpy()
    session = ort.InferenceSession(str(tmp_path / "decoder_model.onnx"),
                                   providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids.numpy(), "encoder_hidden_states": hidden.numpy()}
    if name != "whisper":
        feeds["encoder_attention_mask"] = encoder["attention_mask"].numpy()
    np.testing.assert_allclose(session.run(None, feeds)[0], eager, rtol=1e-3, atol=1e-4)


def test_auto_picks_speech_recognition_for_whisper_and_text2text_for_t5(tmp_path: Path):
    tasks = oxport.tasks.registered_tasks()
    assert oxport.tasks.resolve("auto", _whisper(), tasks).name == \
        "automatic-speech-recognition-with-past"
    assert oxport.tasks.resolve("auto", _t5(), tasks).name == "text2text-generation-with-past"


def test_whisper_for_text2text_is_refused_naming_its_task(tmp_path: Path):
    with pytest.raises(InvalidExportArgumentError, match="automatic-speech-recognition"):
        oxport.export_task(_whisper(), tmp_path, task="text2text-generation")


def test_verification_names_the_first_step_that_differs(tmp_path: Path):
    """The files of one model against another whose head (tied to its embeddings) is scaled:
    the first token already differs."""
    model = _t5()
    oxport.export_task(model, tmp_path, task="text2text-generation-with-past")
    check = seq2seq.compare_generation(model, tmp_path, _inputs("t5", 2))
    assert check["ok"], check["report"]
    other = _t5()
    with torch.no_grad():
        other.lm_head.weight.mul_(1.5)
    check = seq2seq.compare_generation(other, tmp_path, _inputs("t5", 2))
    assert not check["ok"] and check["first_differing_step"] == 0
    assert check["report"].startswith("step 0 differs")
