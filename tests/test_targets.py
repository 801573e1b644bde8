"""Runtime targets as plugins (``oxport_register_targets``): the built-in ``onnx`` and
``ort`` targets, ``ort==X.Y``'s opset and IR caps with their errors, symbolic overrides
that apply only while a target is selected, and a third party's target (the contrib ORT
pack's ``ort-contrib``) found through an entry point."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

import oxport
from oxport import plugin_manager
from oxport.errors import InvalidExportArgumentError, UnsupportedOperatorError
from tests import tiny_llama
from tests.tiny_llama import FRONT_ENDS

CONTRIB = Path(__file__).resolve().parents[1] / "contrib" / "ortcontrib"


class Upsample(torch.nn.Module):
    """Antialiased bilinear resize: needs opset 18 (Resize's antialias)."""

    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="bilinear", antialias=True)


class GeluLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.linear(x))


def _file(model, args, **kwargs) -> onnx.ModelProto:
    buffer = io.BytesIO()
    oxport.export(model, args, buffer, **kwargs)
    return onnx.load_from_string(buffer.getvalue())


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def test_the_builtin_targets_are_plugins():
    manager = plugin_manager.load()
    assert {"onnx", "ort"} <= set(manager.registry.targets)
    (info,) = [p for p in manager.plugins if p.name == "oxport.targets"]
    assert info.registered.get("targets") == 2


@FRONT_ENDS
def test_ort_target_fuses_and_matches_eager(dynamo):
    model = tiny_llama.llama()
    data, result = tiny_llama.export(model, dynamo=dynamo, target="ort")
    ops = tiny_llama.op_types(data)
    assert ops.count(("com.microsoft", "SkipSimplifiedLayerNormalization")) >= 3
    assert result.graph.metadata["oxport.target"] == "ort"
    # nothing reads a skip norm's mean and inverse deviation: unnamed, ORT skips them
    skips = [n for n in onnx.load_from_string(data).graph.node
             if n.op_type == "SkipSimplifiedLayerNormalization"]
    assert all(list(n.output)[1:3] == ["", ""] and n.output[3] for n in skips)
    tiny_llama.assert_matches_eager(data, model)


def test_onnx_target_at_opset_23_uses_standard_fused_ops_and_matches_eager():
    model = tiny_llama.llama()
    data, _ = tiny_llama.export(model, target="onnx", opset_version=23)
    ops = tiny_llama.op_types(data)
    assert ops.count(("", "RMSNormalization")) == 2 * tiny_llama.LAYERS + 1
    assert all(domain == "" for domain, _ in ops)
    tiny_llama.assert_matches_eager(data, model)


def test_a_runtime_version_caps_the_default_opset_and_ir_version():
    x = torch.randn(2, 3)
    model = _file(torch.nn.ReLU(), (x,), target="ort==1.17")
    assert _opset(model) == 20 and model.ir_version <= 9
    model = _file(torch.nn.ReLU(), (x,), target="ort==1.13")
    assert _opset(model) == 17 and model.ir_version <= 8
    model = _file(torch.nn.ReLU(), (x,), target="ort==1.13.1")  # a patch release: 1.13's caps
    assert _opset(model) == 17
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()} if session.get_inputs()[0]
                                           .name == "x" else {session.get_inputs()[0].name:
                                                              x.numpy()})[0],
                               x.relu().numpy())


def test_an_opset_newer_than_the_runtime_loads_is_refused():
    with pytest.raises(InvalidExportArgumentError, match=r"opset_version=21 is newer than "
                       r"ort==1\.17 loads \(opset 20, IR version 9\)"):
        oxport.export(torch.nn.ReLU(), (torch.randn(2),), None, target="ort==1.17",
                      opset_version=21)


def test_an_op_the_runtime_version_cannot_load_is_named():
    with pytest.raises(UnsupportedOperatorError, match=r"ort==1\.13 loads opset 17 at most, "
                       r"but the model needs aten::_upsample_bilinear2d_aa \(opset 18\)"):
        oxport.export(Upsample(), (torch.randn(1, 2, 4, 4),), None, target="ort==1.13")
    model = _file(Upsample(), (torch.randn(1, 2, 4, 4),), target="ort==1.14")
    assert _opset(model) == 18


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"target": "tensorrt"}, r"Unknown target 'tensorrt' \(known: .*onnx.*ort"),
    ({"target": "ort==1.9"}, r"the oldest version target 'ort' knows is 1\.10"),
    ({"target": "onnx==1.0"}, r"Target 'onnx' lists no runtime versions"),
    ({"target": "ort>=1.2"}, r"is not a target name"),
    ({"dtype": "fp8"}, r"dtype='fp8' is not supported: pass one of fp32, fp16, bf16"),
    ({"quantize": "int3"}, r"quantize='int3' is not supported"),
    ({"quantize": "int4", "quantize_block_size": 48}, r"pass a power of two >= 16"),
])
def test_bad_target_arguments_are_named(kwargs, message):
    with pytest.raises(InvalidExportArgumentError, match=message):
        oxport.export(torch.nn.ReLU(), (torch.randn(2),), None, **kwargs)


def test_a_target_symbolic_overrides_only_while_selected(monkeypatch):
    from oxport.plugins import targets as builtin
    from oxport.targets import Target

    def relu_as_sigmoid(g, x):  # an override a target brings, for its runtime
        return g.op("Sigmoid", x)

    manager = plugin_manager.load()
    custom = Target("sigmoid-rt", symbolics=[("aten::relu", relu_as_sigmoid, 9)], extends="onnx")
    monkeypatch.setitem(manager.registry.targets, custom.name, (custom, None))
    ops = [n.op_type for n in _file(torch.nn.ReLU(), (torch.randn(2),),
                                    target="sigmoid-rt").graph.node]
    assert ops == ["Sigmoid"]
    assert [n.op_type for n in _file(torch.nn.ReLU(), (torch.randn(2),)).graph.node] == ["Relu"]
    assert builtin.ORT.name == "ort"


@pytest.fixture
def contrib_installed(monkeypatch, oxport_plugin_session):
    """The contrib ORT pack found through a (faked) installed entry point."""
    monkeypatch.syspath_prepend(str(CONTRIB))
    real, declared = plugin_manager.installed_entry_points()
    entry = plugin_manager.importlib_metadata.EntryPoint(
        "ortcontrib", "oxport_ortcontrib", plugin_manager.ENTRY_POINT_GROUP)
    found = plugin_manager.FoundEntryPoint(entry, "oxport-ortcontrib", "0.1.0", False)
    monkeypatch.setattr(plugin_manager, "installed_entry_points",
                        lambda: ([found, *real], declared))
    plugin_manager.reset()
    yield
    plugin_manager.reset()
    sys.modules.pop("oxport_ortcontrib", None)


def test_a_third_party_target_extends_ort(contrib_installed):
    x = torch.randn(2, 3, 8)
    model = _file(GeluLayer(), (x,), target="ort-contrib")
    ops = [(n.domain, n.op_type) for n in model.graph.node]
    assert ("com.microsoft", "BiasGelu") in ops
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, GeluLayer()(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_the_cli_takes_a_target_dtype_and_quantization(tmp_path, monkeypatch, capsys):
    from oxport import cli

    (tmp_path / "mlp.py").write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),\n"
        "                               torch.nn.Linear(64, 8))\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mlp.onnx"
    status = cli.main(["export", "mlp:make", "--input", "2x5x64", "-o", str(out),
                       "--target", "ort", "--quantize", "int8", "--quantize-block-size", "16"])
    assert status == 0, capsys.readouterr()
    model = onnx.load(out)
    assert [n.op_type for n in model.graph.node].count("MatMulNBits") == 2
    status = cli.main(["export", "mlp:make", "--input", "2x5x64", "-o", str(out),
                       "--target", "ort==1.17", "--opset", "21"])
    assert status == 2 and "newer than ort==1.17 loads" in capsys.readouterr().err
    status = cli.main(["export", "mlp:make", "--input", "2x5x64", "-o", str(out),
                       "--target", "onnx", "--opset", "21", "--quantize", "int8",
                       "--verify", "--atol", "1e-2"])  # verified as exported: quantized
    assert status == 0, capsys.readouterr()
    assert [n.op_type for n in onnx.load(out).graph.node].count("DequantizeLinear") == 2
    status = cli.main(["export", "mlp:make", "--input", "2x5x64", "-o", str(out),
                       "--dtype", "fp16"])
    assert status == 0
    assert onnx.load(out).graph.initializer[0].data_type == onnx.TensorProto.FLOAT16


def test_dtype_needs_a_module():
    program = torch.export.export(torch.nn.ReLU(), (torch.randn(2),))
    with pytest.raises(InvalidExportArgumentError, match=r"dtype= converts an nn.Module's "
                       r"weights, not a ExportedProgram's"):
        oxport.export(program, (torch.randn(2),), None, dtype="fp16")


def test_plain_ort_targets_the_installed_onnx_runtime(monkeypatch):
    from oxport.plugins import targets as builtin

    monkeypatch.setattr(builtin, "installed_onnxruntime", lambda: "1.20.1")
    model = _file(torch.nn.ReLU(), (torch.randn(2),), target="ort")
    assert _opset(model) == 21 and model.ir_version == 10  # what 1.20 loads
    monkeypatch.setattr(builtin, "installed_onnxruntime", lambda: None)
    assert _opset(_file(torch.nn.ReLU(), (torch.randn(2),), target="ort")) == 23
    # newer than every release the table knows: nothing is capped
    monkeypatch.setattr(builtin, "installed_onnxruntime", lambda: "1.32.0")
    model = _file(torch.nn.ReLU(), (torch.randn(2),), target="ort", opset_version=25)
    assert _opset(model) == 25


@pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])
def test_onnxruntime_genai_shares_the_kv_buffer_of_the_ort_file(tmp_path, dynamo):
    import json

    og = pytest.importorskip("onnxruntime_genai")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=97, bos_token_id=1, eos_token_id=2,
        pad_token_id=0, max_position_embeddings=64)).eval()
    model.save_pretrained(tmp_path / "ckpt")
    oxport.export_task(tmp_path / "ckpt", tmp_path / "onnx", "text-generation-with-past",
                       dynamo=dynamo, target="ort")
    config = json.loads((tmp_path / "onnx" / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True
    ops = [n.op_type for n in onnx.load(tmp_path / "onnx" / "model.onnx").graph.node]
    assert ops.count("GroupQueryAttention") == 2
    prompt = np.array([[5, 17, 33, 8, 61]], dtype=np.int32)
    with torch.no_grad():
        expected = model.generate(torch.from_numpy(prompt).long(), do_sample=False,
                                  max_new_tokens=12)[0].numpy()
    genai_model = og.Model(str(tmp_path / "onnx"))
    params = og.GeneratorParams(genai_model)
    params.set_search_options(max_length=prompt.shape[1] + 12, do_sample=False)
    generator = og.Generator(genai_model, params)
    generator.append_tokens(prompt)
    while not generator.is_done():
        generator.generate_next_token()
    np.testing.assert_array_equal(generator.get_sequence(0), expected)
