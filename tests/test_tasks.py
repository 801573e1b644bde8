"""Tasks (oxport.export_task, ``oxport export CKPT --task``): the decoder-only generation
tasks write optimum's file contract, and ONNX Runtime generates transformers' tokens from it,
on both front ends; the task API takes third-party tasks and refuses bad requests clearly."""

from __future__ import annotations

import json
import shutil
import sys
import types

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport import plugin_manager
from oxport.cli.main import main
from oxport.errors import InvalidExportArgumentError
from oxport.registry import RegistryError
from oxport.tasks import TaskResult

transformers = pytest.importorskip("transformers")
FRONT_ENDS = pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])
VOCAB = 97
LAYERS = 2


def _save(tmp_path_factory, name: str, model: torch.nn.Module) -> str:
    folder = tmp_path_factory.mktemp(name)
    model.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> str:
    torch.manual_seed(0)
    return _save(tmp_path_factory, "llama", transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=LAYERS, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, bos_token_id=1, eos_token_id=2,
        pad_token_id=0)))


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> str:
    torch.manual_seed(0)
    return _save(tmp_path_factory, "gpt2", transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=32, n_layer=LAYERS, n_head=4, vocab_size=VOCAB, n_positions=64,
        bos_token_id=1, eos_token_id=2)))


@pytest.fixture(scope="module")
def mistral_dir(tmp_path_factory) -> str:
    """A sliding window (4) shorter than prompt plus new tokens (17)."""
    torch.manual_seed(0)
    return _save(tmp_path_factory, "mistral", transformers.MistralForCausalLM(
        transformers.MistralConfig(hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=LAYERS, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=VOCAB, sliding_window=4)))


def _shape(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _assert_with_past_contract(folder, kv_heads: int, head_dim: int, position_ids: bool) -> None:
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    inputs = {i.name: _shape(i) for i in model.graph.input}
    outputs = {o.name: _shape(o) for o in model.graph.output}
    past = {f"past_key_values.{i}.{kv}": ["batch_size", kv_heads, "past_sequence_length",
                                          head_dim]
            for i in range(LAYERS) for kv in ("key", "value")}
    assert inputs == {"input_ids": ["batch_size", "sequence_length"],
                      "attention_mask": ["batch_size", "past_sequence_length + sequence_length"],
                      **({"position_ids": ["batch_size", "sequence_length"]}
                         if position_ids else {}), **past}
    assert list(inputs)[:2] == ["input_ids", "attention_mask"]
    assert outputs == {"logits": ["batch_size", "sequence_length", VOCAB], **{
        name.replace("past_key_values.", "present."):
            [*shape[:2], "past_sequence_length + sequence_length", shape[3]]
        for name, shape in past.items()}}


@FRONT_ENDS
def test_a_llama_checkpoint_generates_transformers_tokens(llama_dir, tmp_path, dynamo):
    result = oxport.export_task(llama_dir, tmp_path, "text-generation-with-past",
                                dynamo=dynamo, verify=True)
    assert result.verification["ok"], result.verification["report"]
    assert result.verification["first_differing_step"] is None
    assert result.verification["max_logit_difference"] < 1e-4
    assert result.files == ["model.onnx", "config.json", "generation_config.json",
                            "genai_config.json"]
    _assert_with_past_contract(tmp_path, kv_heads=2, head_dim=8, position_ids=True)
    genai = json.loads((tmp_path / "genai_config.json").read_text())
    decoder = genai["model"]["decoder"]
    assert (decoder["num_key_value_heads"], decoder["head_size"],
            decoder["num_hidden_layers"]) == (2, 8, LAYERS)
    assert decoder["inputs"]["past_key_names"] == "past_key_values.%d.key"
    assert genai["model"]["type"] == "llama" and genai["model"]["eos_token_id"] == 2


def test_a_left_padded_batch_matches_eager_at_prefill_and_decode(llama_dir, tmp_path):
    oxport.export_task(llama_dir, tmp_path, "text-generation-with-past")
    model = transformers.LlamaForCausalLM.from_pretrained(llama_dir).eval()
    session = ort.InferenceSession(str(tmp_path / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    ids = torch.randint(3, VOCAB, (3, 6))
    mask = torch.ones(3, 6, dtype=torch.long)
    mask[1, :2] = 0
    mask[2, :1] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    empty = np.zeros((3, 2, 0, 8), np.float32)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
             "position_ids": positions.numpy(),
             **{f"past_key_values.{i}.{kv}": empty for i in range(LAYERS)
                for kv in ("key", "value")}}
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, feeds)))
    with torch.no_grad():
        want = model(ids, attention_mask=mask, position_ids=positions, use_cache=True)
    real = mask.bool().numpy()
    np.testing.assert_allclose(got["logits"][real], want.logits.numpy()[real], atol=1e-4)
    step = torch.randint(3, VOCAB, (3, 1))
    mask2 = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], 1)
    feeds = {"input_ids": step.numpy(), "attention_mask": mask2.numpy(),
             "position_ids": positions[:, -1:].numpy() + 1,
             **{f"past_key_values.{i}.{kv}": got[f"present.{i}.{kv}"] for i in range(LAYERS)
                for kv in ("key", "value")}}
    logits = session.run(["logits"], feeds)[0]
    with torch.no_grad():
        want = model(step, attention_mask=mask2, position_ids=positions[:, -1:] + 1,
                     cache=want.cache)
    np.testing.assert_allclose(logits, want.logits.numpy(), atol=1e-4)


@FRONT_ENDS
def test_gpt2_generates_transformers_tokens(gpt2_dir, tmp_path, dynamo):
    result = oxport.export_task(gpt2_dir, tmp_path, "text-generation-with-past", dynamo=dynamo,
                                verify=True)
    assert result.verification["ok"], result.verification["report"]
    _assert_with_past_contract(tmp_path, kv_heads=4, head_dim=8, position_ids=True)


@FRONT_ENDS
def test_a_sliding_window_model_generates_past_its_window(mistral_dir, tmp_path, dynamo):
    result = oxport.export_task(mistral_dir, tmp_path, "text-generation-with-past",
                                dynamo=dynamo, verify=True)
    assert result.verification["ok"], result.verification["report"]
    _assert_with_past_contract(tmp_path, kv_heads=2, head_dim=8, position_ids=True)


def test_text_generation_without_past_reruns_the_sequence(llama_dir, tmp_path):
    result = oxport.export_task(llama_dir, tmp_path, "text-generation", verify=True)
    assert result.verification["ok"], result.verification["report"]
    model = onnx.load(str(tmp_path / "model.onnx"))
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask",
                                                   "position_ids"]
    assert [o.name for o in model.graph.output] == ["logits"]
    assert "genai_config.json" not in result.files


def test_auto_picks_the_with_past_task_and_a_model_object_is_a_source(tmp_path):
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=16, n_layer=1, n_head=2, vocab_size=VOCAB, n_positions=32)).eval()
    result = oxport.export_task(model, tmp_path, verify=True)
    assert result.task == "text-generation-with-past" and result.ok
    assert {"config.json", "generation_config.json"} <= set(result.files)
    assert (tmp_path / "config.json").is_file()


def test_the_tokenizer_files_are_copied(llama_dir, tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(llama_dir, folder)
    (folder / "tokenizer.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text("{}")
    result = oxport.export_task(folder, tmp_path / "out", "text-generation")
    assert {"tokenizer.json", "tokenizer_config.json"} <= set(result.files)
    assert (tmp_path / "out" / "tokenizer.json").read_text() == "{}"


# -- bad requests -------------------------------------------------------------------------
def test_an_unknown_task_names_the_registered_ones(llama_dir, tmp_path):
    with pytest.raises(InvalidExportArgumentError, match="text-generation-with-past"):
        oxport.export_task(llama_dir, tmp_path, "text-generatoin")


def test_a_folder_without_config_is_refused(tmp_path):
    with pytest.raises(InvalidExportArgumentError, match="no config.json"):
        oxport.export_task(tmp_path, tmp_path / "out", "text-generation")
    with pytest.raises(InvalidExportArgumentError, match="No registered task recognizes"):
        oxport.export_task(tmp_path, tmp_path / "out")


def test_a_model_of_another_kind_is_refused_by_the_decoder_task(tmp_path):
    model = transformers.BertModel(transformers.BertConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
        vocab_size=VOCAB))
    with pytest.raises(InvalidExportArgumentError, match=r"takes a \*ForCausalLM"):
        oxport.export_task(model, tmp_path, "text-generation-with-past")


def test_an_unknown_task_option_is_refused(llama_dir, tmp_path):
    with pytest.raises(InvalidExportArgumentError, match="takes no option max_tokens"):
        oxport.export_task(llama_dir, tmp_path, "text-generation", max_tokens=3)


# -- third-party tasks --------------------------------------------------------------------
class _Echo:
    """A task that writes the source's text to a file."""

    name = "echo"
    description = "writes the source"

    def match(self, source):
        return 100 if source == "echo me" else 0

    def export(self, source, output_dir, options):
        (output_dir / "echo.txt").write_text(f"{source} dynamo={options.dynamo}")
        return TaskResult(self.name, output_dir, ["echo.txt"])


@pytest.fixture
def install(monkeypatch, oxport_plugin_session):
    """``install(name, module)``: a fake installed entry point for a plugin module."""
    real, declared = plugin_manager.installed_entry_points()
    fakes: list = []
    monkeypatch.setattr(plugin_manager, "installed_entry_points",
                        lambda: ([*fakes, *real], declared))

    def install_one(name: str, module: types.ModuleType) -> None:
        monkeypatch.setitem(sys.modules, module.__name__, module)
        fakes.append(plugin_manager.FoundEntryPoint(plugin_manager.importlib_metadata.EntryPoint(
            name, module.__name__, plugin_manager.ENTRY_POINT_GROUP), "echo-dist", "1.0"))

    return install_one


def _plugin(task) -> types.ModuleType:
    module = types.ModuleType(f"fake_tasks_{id(task)}")

    @oxport.hookimpl
    def oxport_register_tasks(registry):
        registry.register_task(task)

    module.oxport_register_tasks = oxport_register_tasks
    return module


def test_a_third_party_task_is_listed_and_picked_by_auto(install, tmp_path, capsys):
    install("echo-tasks", _plugin(_Echo()))
    result = oxport.export_task("echo me", tmp_path, dynamo=True)
    assert result.task == "echo" and (tmp_path / "echo.txt").read_text() == "echo me dynamo=True"
    assert main(["tasks"]) == 0
    listing = capsys.readouterr().out
    assert "echo" in listing and "writes the source" in listing
    assert "text-generation-with-past" in listing


def test_a_task_registered_twice_is_a_conflict(install):
    install("echo-a", _plugin(_Echo()))
    install("echo-b", _plugin(_Echo()))
    with pytest.raises(RegistryError, match="'echo' is registered by both"):
        plugin_manager.load(strict=True)


def test_a_malformed_task_is_refused(install):
    bad = _Echo()
    bad.name = "Echo Me"
    install("echo-bad", _plugin(bad))
    with pytest.raises(RegistryError, match="lower-case words"):
        plugin_manager.load(strict=True)


def test_dynamo_loads_a_model_that_cannot_be_captured_without_its_weights(llama_dir, tmp_path,
                                                                         monkeypatch):
    from oxport.plugins.hf.tasks import decoder

    real, streamed = decoder.TextGenerationWithPast.export, []

    def export(self, source, folder, options):  # as a model reading its weights' values
        streamed.append(options.stream_weights)
        if options.stream_weights:
            raise RuntimeError("a data-dependent size\nand more lines")
        return real(self, source, folder, options)

    monkeypatch.setattr(decoder.TextGenerationWithPast, "export", export)
    with pytest.warns(UserWarning, match=r"without its weights failed \(RuntimeError: a "
                                         r"data-dependent size\); exported with the model loaded"):
        result = oxport.export_task(llama_dir, tmp_path, "text-generation-with-past",
                                    dynamo=True, verify=True)
    assert streamed == [True, False] and result.verification["ok"]


def test_dynamo_does_not_retry_a_wrong_request_with_the_model_loaded(llama_dir, tmp_path,
                                                                    monkeypatch):
    from oxport.plugins.hf.tasks import decoder

    attempts = []

    def export(self, source, folder, options):
        attempts.append(options.stream_weights)
        raise InvalidExportArgumentError("no such option")

    monkeypatch.setattr(decoder.TextGenerationWithPast, "export", export)
    with pytest.raises(InvalidExportArgumentError, match="no such option"):
        oxport.export_task(llama_dir, tmp_path, "text-generation-with-past", dynamo=True)
    assert attempts == [True]


# -- the command line ---------------------------------------------------------------------
def test_the_command_line_exports_a_checkpoint_folder(llama_dir, tmp_path, capsys):
    out = tmp_path / "onnx"
    assert main(["export", llama_dir, "-o", str(out), "--verify", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["task"] == "text-generation-with-past"
    assert summary["verification"]["ok"]
    assert (out / "model.onnx").is_file() and (out / "genai_config.json").is_file()


@pytest.mark.parametrize("flags", [["--target", "ort"], ["--target", "ort", "--quantize", "int4"],
                                   ["--dtype", "fp16"]], ids=["ort", "ort-int4", "fp16"])
def test_the_command_line_task_takes_the_target_dtype_and_quantization(tmp_path_factory,
                                                                       tmp_path, flags):
    torch.manual_seed(0)
    llama_dir = _save(tmp_path_factory, "llama-head16", transformers.LlamaForCausalLM(
        transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                 bos_token_id=1, eos_token_id=2, pad_token_id=0)))
    out = tmp_path / "onnx"
    assert main(["export", llama_dir, "--task", "text-generation-with-past", "-o", str(out),
                 "--json", *flags]) == 0
    model = onnx.load(out / "model.onnx")
    ops = {n.op_type for n in model.graph.node}
    past = next(i for i in model.graph.input if i.name.startswith("past_key_values."))
    if "ort" in flags:  # head size 16: GroupQueryAttention takes the rotary inside
        assert "GroupQueryAttention" in ops
    assert ("MatMulNBits" in ops) == ("int4" in flags)
    assert past.type.tensor_type.elem_type == (
        onnx.TensorProto.FLOAT16 if "fp16" in flags else onnx.TensorProto.FLOAT)
    genai = json.loads((out / "genai_config.json").read_text())
    assert genai["search"].get("past_present_share_buffer", False) == ("ort" in flags)
    # the file runs: greedy ids of ONNX Runtime against eager's (fp32 files)
    if "fp16" not in flags and "int4" not in flags:
        result = oxport.export_task(llama_dir, tmp_path / "again", "text-generation-with-past",
                                    target="ort", verify=True)
        assert result.verification["ok"], result.verification["report"]


def test_the_command_line_refuses_inputs_with_a_task(llama_dir, tmp_path, capsys):
    status = main(["export", llama_dir, "--task", "text-generation", "-o", str(tmp_path),
                   "--input", "1x3:int64"])
    assert status == 2
    assert "--input cannot be combined with a task" in capsys.readouterr().err
    assert main(["export", llama_dir, "--task", "text-generation"]) == 2
    assert "-o OUT_DIR" in capsys.readouterr().err


# -- a sample of the causal-LM sweep (benchmarks/causal_lm_sweep.py) ----------------------
@pytest.mark.parametrize(("model_type", "name", "front_end"), [
    ("qwen2", "Qwen2ForCausalLM", "trace"), ("phi", "PhiForCausalLM", "trace"),
    ("gemma2", "Gemma2ForCausalLM", "trace"), ("gemma2", "Gemma2ForCausalLM", "dynamo"),
    ("bloom", "BloomForCausalLM", "trace"), ("bloom", "BloomForCausalLM", "dynamo")])
def test_a_sample_of_the_causal_lm_sweep_generates_transformers_tokens(model_type, name,
                                                                       front_end):
    from benchmarks.causal_lm_sweep import run_one

    row = run_one(model_type, name, front_end)
    assert row["status"] == "ok", row.get("reason")
