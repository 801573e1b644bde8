"""The encoder tasks (feature-extraction, fill-mask, text-, token- and image-classification,
question-answering): a checkpoint folder written by ``save_pretrained`` (tiny configs, random
weights) exported into a folder, then ONNX Runtime against eager PyTorch at two sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.plugins.hf.tasks import encoders

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install -e .[test])")

VOCAB = 99
_BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 37, "vocab_size": VOCAB, "max_position_embeddings": 64}


def _save(model: torch.nn.Module, folder: Path) -> Path:
    model.save_pretrained(folder)
    return folder


def _bert(head: str, **config: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return getattr(transformers, f"Bert{head}")(transformers.BertConfig(**_BERT, **config))


def _vit() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.ViTForImageClassification(transformers.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        image_size=32, patch_size=8, num_labels=3))


#: task -> (model, the outputs, the input names)
CASES = {
    "feature-extraction": (lambda: _bert("Model"), ["last_hidden_state"],
                           ["input_ids", "attention_mask", "token_type_ids"]),
    "fill-mask": (lambda: _bert("ForMaskedLM"), ["logits"],
                  ["input_ids", "attention_mask", "token_type_ids"]),
    "text-classification": (lambda: _bert("ForSequenceClassification", num_labels=3),
                            ["logits"], ["input_ids", "attention_mask", "token_type_ids"]),
    "token-classification": (lambda: _bert("ForTokenClassification", num_labels=5),
                             ["logits"], ["input_ids", "attention_mask", "token_type_ids"]),
    "question-answering": (lambda: _bert("ForQuestionAnswering"),
                           ["start_logits", "end_logits"],
                           ["input_ids", "attention_mask", "token_type_ids"]),
    "image-classification": (_vit, ["logits"], ["pixel_values"]),
}


def _check(folder: Path, model: torch.nn.Module, task: str) -> None:
    """The file's names, then ONNX Runtime vs eager at the example and a second size."""
    _, outputs, inputs = CASES[task]
    proto = onnx.load(folder / "model.onnx")
    assert [i.name for i in proto.graph.input] == inputs
    assert [o.name for o in proto.graph.output] == outputs
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch_size"
    session = ort.InferenceSession(str(folder / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    spec = oxport.tasks.registered_tasks()[task].task
    for batch, sequence in ((2, 8), (3, 13)):
        example = spec.example(model, batch, sequence)
        with torch.no_grad():
            eager = model(**{n: example[n] for n in inputs}, return_dict=True)
        got = session.run(None, {n: example[n].numpy() for n in inputs})
        for name, value in zip(outputs, got):
            np.testing.assert_allclose(value, eager[name].numpy(), rtol=1e-3, atol=1e-4,
                                       err_msg=f"{task} {name} at {batch}x{sequence}")


@pytest.mark.parametrize("task", list(CASES))
def test_a_checkpoint_folder_exports_for_its_task(task: str, tmp_path: Path):
    model = CASES[task][0]().eval()
    source = _save(model, tmp_path / "ckpt")
    result = oxport.export_task(source, tmp_path / "out", task=task, verify=True)
    assert result.ok, result.verification["report"]
    assert {"model.onnx", "config.json"} <= set(result.files)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == \
        model.config.model_type
    _check(tmp_path / "out", model, task)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["fill-mask", "question-answering", "image-classification"])
def test_the_same_through_torch_export(task: str, tmp_path: Path):
    model = CASES[task][0]().eval()
    result = oxport.export_task(model, tmp_path, task=task, dynamo=True, verify=True)
    assert result.ok, result.verification["report"]
    _check(tmp_path, model, task)


def test_auto_picks_the_task_from_the_config(tmp_path: Path):
    source = _save(_bert("ForTokenClassification", num_labels=5).eval(), tmp_path / "ckpt")
    assert oxport.export_task(source, tmp_path / "out").task == "token-classification"


def test_feature_extraction_of_a_checkpoint_with_a_head_takes_its_base_model(tmp_path: Path):
    """As optimum does: the encoder of a BertForMaskedLM checkpoint, its head left out."""
    model = _bert("ForMaskedLM").eval()
    source = _save(model, tmp_path / "ckpt")
    oxport.export_task(source, tmp_path / "out", task="feature-extraction")
    _check(tmp_path / "out", model.bert, "feature-extraction")


def test_a_model_with_another_head_is_refused_with_the_tasks_to_pick(tmp_path: Path):
    with pytest.raises(InvalidExportArgumentError, match="ForQuestionAnswering"):
        oxport.export_task(_bert("ForMaskedLM"), tmp_path, task="question-answering")


def test_a_distilbert_without_token_type_ids_gets_none(tmp_path: Path):
    torch.manual_seed(0)
    model = transformers.DistilBertForSequenceClassification(transformers.DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=37, num_labels=2)).eval()
    result = oxport.export_task(model, tmp_path, task="text-classification", verify=True)
    assert result.ok, result.verification["report"]
    assert result.details["inputs"] == ["input_ids", "attention_mask"]


def test_the_cli_exports_a_checkpoint_folder(tmp_path: Path):
    source = _save(_bert("ForSequenceClassification", num_labels=3).eval(), tmp_path / "ckpt")
    run = subprocess.run([sys.executable, "-m", "oxport", "export", str(source), "--task",
                          "text-classification", "-o", str(tmp_path / "out")],
                         check=False, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "model.onnx").is_file()


def test_every_encoder_task_is_registered():
    assert {task.name for task in encoders.TASKS} <= set(oxport.tasks.registered_tasks())


def _modernbert() -> torch.nn.Module:
    """Its fused QKV is viewed by run-time sizes, then unbound (aten::unbind)."""
    return transformers.ModernBertForMaskedLM(transformers.ModernBertConfig(
        **_BERT, global_attn_every_n_layers=2, local_attention=8, pad_token_id=0,
        bos_token_id=0, eos_token_id=0, cls_token_id=0, sep_token_id=0))


def _deberta_v2() -> torch.nn.Module:
    """No token types (type_vocab_size 0): the file has no token_type_ids input."""
    return transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config(
        **_BERT, relative_attention=True, pos_att_type=["p2c", "c2p"],
        max_relative_positions=16, position_buckets=8))


@pytest.mark.parametrize(("build", "inputs"), [
    (_modernbert, ["input_ids", "attention_mask"]),
    (_deberta_v2, ["input_ids", "attention_mask"]),
], ids=["modernbert", "deberta_v2"])
def test_fill_mask_of_other_encoders(build, inputs, tmp_path: Path):
    torch.manual_seed(0)
    result = oxport.export_task(build().eval(), tmp_path, task="fill-mask", verify=True)
    assert result.ok, result.verification["report"]
    assert result.details["inputs"] == inputs
