"""``oxport export`` end to end (``python -m oxport`` subprocesses), and its helpers in process.

The subprocess tests share one small module of models (``models.py`` in a temp folder):
a linear net, a model calling a ``torch.library`` op that no symbolic converts, and a
module that registers a deliberately wrong symbolic for that op (to see --verify fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest
import torch

from oxport import cli
from oxport.cli.common import EXIT_FAILED, EXIT_MISMATCH, EXIT_USAGE, UsageError, load_target

MODELS = """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            return torch.relu(self.fc(x))

    def make_net():
        return Net()

    def net_inputs():
        return (torch.randn(3, 8),)

    @torch.library.custom_op("clitest::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x):
        return torch.empty_like(x)

    class Twice(torch.nn.Module):
        def forward(self, x):
            return torch.ops.clitest.twice(x) + 1

    class Sized(torch.nn.Module):
        def forward(self, x):
            rows = int(x.size(0))  # a dynamic size made a Python number
            return x.reshape(rows, -1) * 2

    class Tagged(torch.nn.Module):
        def forward(self, x):
            return {"y": x * 2, "tag": "fixed"}  # the str output is dropped, with a warning

    def make_encoder():
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 2)
"""

WRONG = """
    import oxport
    from models import Twice

    def thrice(g, x):
        return g.op("Mul", x, g.op("Constant", value_t=__import__("torch").tensor(3.0)))

    oxport.register_custom_op_symbolic("clitest::twice", thrice, 9)

    def model():
        return Twice()
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli_export")
    (folder / "models.py").write_text(textwrap.dedent(MODELS))
    (folder / "wrong.py").write_text(textwrap.dedent(WRONG))
    return folder


def oxport_export(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OXPORT_")}
    environ["OXPORT_STRICT_PLUGINS"] = "1"
    return subprocess.run([sys.executable, "-m", "oxport", "export", *args],
                          capture_output=True, text=True, cwd=cwd, env=environ, timeout=600)


def one_paragraph(stderr: str) -> str:
    """The error paragraph: no traceback, starts with the command's name."""
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("oxport export: error:")]
    assert len(errors) == 1, stderr
    return stderr[stderr.index("oxport export: error:"):]


# -- end to end -------------------------------------------------------------------------
def test_factory_target_verified_json(work):
    result = oxport_export("models:make_net", "--input", "2x8:float32", "-o", "net.onnx",
                           "--input-names", "features", "--output-names", "scores",
                           "--verify", "--json", cwd=work)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["path"] == str(work / "net.onnx")
    assert summary["model"] == "Net" and summary["opset"] == 20 and summary["nodes"] == 2
    assert summary["inputs"] == [{"name": "features", "dtype": "float32", "shape": [2, 8]}]
    assert summary["outputs"] == [{"name": "scores", "dtype": "float32", "shape": [2, 4]}]
    assert summary["file_size"] == (work / "net.onnx").stat().st_size
    assert 0 <= summary["max_error"] < 1e-5 and summary["seconds"] > 0
    assert summary["verification"]["ok"] and len(summary["verification"]["runs"]) == 1
    model = onnx.load(work / "net.onnx")
    assert [n.op_type for n in model.graph.node] == ["Gemm", "Relu"]


def test_builtin_example_with_dynamic_axes(work):
    result = oxport_export("--example", "mlp", "--dynamic-axis", "input:0:batch",
                           "--dynamic-axis", "output:0:batch", "--verify", cwd=work)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Exported Sequential (example mlp) to mlp.onnx" in out
    assert "input  input: float32 batchx32" in out and "output output: float32 batchx10" in out
    assert "Verified with ONNX Runtime at input 1x32: max abs error" in out
    assert "Verified with ONNX Runtime at input 2x32: max abs error" in out
    dims = onnx.load(work / "mlp.onnx").graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == 32


def test_inputs_from_opset_script_and_external_data(work):
    result = oxport_export("models:Net", "--inputs-from", "models:net_inputs", "--opset", "13",
                           "--script", "--external-data", "-o", "scripted.onnx", "--json",
                           cwd=work)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["opset"] == 13 and summary["model"] == "RecursiveScriptModule"
    assert summary["inputs"][0]["shape"] == [3, 8]
    assert summary["external_data"] == str(work / "scripted.onnx.data")
    assert summary["file_size"] == sum((work / f).stat().st_size
                                       for f in ("scripted.onnx", "scripted.onnx.data"))
    assert onnx.load(work / "scripted.onnx").opset_import[0].version == 13


def _line_of(text: str) -> int:
    """The line of ``models.py`` holding ``text``."""
    return 1 + textwrap.dedent(MODELS).splitlines().index(text)


def test_warnings_name_the_models_file_and_line(work):
    result = oxport_export("models:Sized", "--input", "2x3", "--dynamic-axis", "x:0:batch",
                           "-o", "sized.onnx", cwd=work)
    assert result.returncode == 0, result.stderr
    line = _line_of("        rows = int(x.size(0))  # a dynamic size made a Python number")
    assert f"oxport: warning: models.py:{line}: UserWarning: oxport: a size that " \
        "dynamic_axes makes dynamic (batch)" in result.stderr
    # A warning without a source line names the model's forward, not oxport's launcher.
    result = oxport_export("models:Tagged", "--input", "2x3", "-o", "tagged.onnx", cwd=work)
    assert result.returncode == 0, result.stderr
    line = _line_of("class Tagged(torch.nn.Module):") + 1
    assert f"oxport: warning: models.py:{line}: UserWarning: oxport: the str output" \
        in result.stderr
    assert "oxport/" not in result.stderr and "runpy" not in result.stderr


def test_library_tracer_warnings_are_counted_unless_asked_for(work):
    result = oxport_export("models:make_encoder", "--input", "2x5x16", "-o", "enc.onnx",
                           cwd=work)
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("oxport: warning")]
    assert len(warned) == 1 and "TracerWarnings were raised in torch's or another " \
        "library's code, not in the model's: --show-tracer-warnings shows them" in warned[0]
    result = oxport_export("models:make_encoder", "--input", "2x5x16", "-o", "enc.onnx",
                           "--show-tracer-warnings", cwd=work)
    assert result.returncode == 0, result.stderr
    shown = [line for line in result.stderr.splitlines() if "TracerWarning: " in line]
    assert shown and all("torch" in line for line in shown)


def test_fallback_flag_keeps_the_op(work):
    result = oxport_export("models:Twice", "--input", "2x3", "--fallback", "fallthrough",
                           "--json", cwd=work)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["fallbacks"] == ["clitest::twice (fallthrough)"]
    assert any("FallbackWarning" in w and "clitest::twice" in w for w in summary["warnings"])
    nodes = onnx.load(work / "Twice.onnx").graph.node
    assert [(n.domain, n.op_type) for n in nodes][0] == ("clitest", "twice")


def test_unsupported_op_lists_it_and_names_the_fallback_flag(work):
    result = oxport_export("models:Twice", "--input", "2x3", "-o", "unsupported.onnx", cwd=work)
    assert result.returncode == EXIT_FAILED
    text = one_paragraph(result.stderr)
    assert "Exporting 1 operator to ONNX opset version 20 is not supported" in text
    assert "clitest::twice (1 use, first at" in text and "models.py" in text
    assert "--fallback fallthrough" in text and "--debug shows the traceback" in text
    assert not (work / "unsupported.onnx").exists()


def test_missing_module(work):
    result = oxport_export("no_such_models:make_net", "--input", "2x8", cwd=work)
    assert result.returncode == EXIT_USAGE
    text = one_paragraph(result.stderr)
    assert "No module named 'no_such_models' (target 'no_such_models:make_net')" in text
    assert "PYTHONPATH" in text


def test_missing_attribute_lists_what_the_module_defines(work):
    result = oxport_export("models:make_nett", "--input", "2x8", cwd=work)
    assert result.returncode == EXIT_USAGE
    text = one_paragraph(result.stderr)
    assert "'models' has no attribute 'make_nett'" in text and "make_net" in text


def test_bad_shape_string(work):
    result = oxport_export("models:make_net", "--input", "2xeight", cwd=work)
    assert result.returncode == EXIT_USAGE
    assert "argument --input: '2xeight' is not a shape" in result.stderr
    assert "e.g. 1x3x224x224:float32" in result.stderr and "Traceback" not in result.stderr


def test_verification_mismatch_exits_3(work):
    result = oxport_export("wrong:model", "--input", "2x3", "--verify", cwd=work)
    assert result.returncode == EXIT_MISMATCH, result.stderr
    text = one_paragraph(result.stderr)
    assert "does not match eager PyTorch" in text and "MISMATCH" in text
    assert "MISMATCH" in result.stdout and (work / "model.onnx").exists()


def test_debug_shows_the_traceback_and_json_reports_errors(work):
    result = oxport_export("models:Twice", "--input", "2x3", "--debug", "--json", cwd=work)
    assert result.returncode == EXIT_FAILED
    assert "Traceback" in result.stderr and "UnsupportedOperatorError" in result.stderr
    error = json.loads(result.stdout)
    assert error["exit_status"] == EXIT_FAILED and "clitest::twice" in error["error"]


# -- in process: parsing and messages ----------------------------------------------------
def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        status = cli.main(["export", *args])
    except SystemExit as exc:  # argparse's usage errors
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_help_documents_the_exit_statuses(capsys):
    status, out, _ = run_main(capsys, "--help")
    assert status == 0
    for line in ("exit status:", "0  the model was written", "1  the export failed",
                 "2  usage error", "3  --verify failed"):
        assert line in out
    assert "alexnet" in out and "MODULE:FACTORY" in out


@pytest.mark.parametrize(("argv", "message"), [
    ([], "Give either a TARGET (MODULE:FACTORY) or --example NAME"),
    (["os:path", "--example", "mlp"], "Give either a TARGET"),
    (["os:sep", "--input", "2"], "'os:sep' is a str, neither a model nor a callable"),
    (["json:dumps"], "Calling 'json:dumps' with no arguments failed"),
    (["collections:OrderedDict"], "returned a OrderedDict, not a torch.nn.Module"),
    (["torch.nn:Identity"], "Give the inputs of Identity.forward: --input SHAPE[:DTYPE]"),
])
def test_usage_errors(capsys, argv, message):
    status, _, err = run_main(capsys, *argv)
    assert status == EXIT_USAGE
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--example", "mlp", "--dynamic-axis", "input"], "'input' is not NAME:AXIS[:LABEL]"),
    (["--example", "mlp", "--opset", "3"], "'3' is not an opset oxport exports"),
    (["--example", "nope"], "invalid choice: 'nope'"),
    (["--example", "mlp", "--input", "2x3:complex"], "unknown dtype 'complex'"),
])
def test_argument_errors(capsys, argv, message):
    status, _, err = run_main(capsys, *argv)
    assert status == EXIT_USAGE and message in err


def test_invalid_export_arguments_are_usage_errors(capsys, tmp_path):
    status, _, err = run_main(capsys, "--example", "mlp", "-o", str(tmp_path / "m.onnx"),
                              "--dynamic-axis", "images:0:batch")
    assert status == EXIT_USAGE
    assert "--dynamic-axis names 'images', which is neither an input nor an output of the " \
        "model (inputs: input; outputs: output). Use one of these names" in err
    assert "ignored" not in err  # refused, as the exit status says
    assert not (tmp_path / "m.onnx").exists()


def test_unknown_fallback_is_a_usage_error(capsys, tmp_path):
    status, _, err = run_main(capsys, "--example", "mlp", "-o", str(tmp_path / "m.onnx"),
                              "--fallback", "nowhere")
    assert status == EXIT_USAGE and "--fallback nowhere: no loaded plugin provides the " \
        "'nowhere' fallback" in err


def test_unknown_plugin_names_the_plugins_flag(capsys, tmp_path):
    status, _, err = run_main(capsys, "--example", "mlp", "-o", str(tmp_path / "m.onnx"),
                              "--plugins", "nosuch")
    assert status == EXIT_FAILED and "Plugins nosuch were asked for (--plugins or " \
        "OXPORT_PLUGINS)" in err and "export(plugins=" not in err
    assert not (tmp_path / "m.onnx").exists()


def test_load_target_accepts_a_file_path_and_dotted_attributes(tmp_path):
    (tmp_path / "nets.py").write_text("class Holder:\n    value = 42\n")
    assert load_target(f"{tmp_path / 'nets.py'}:Holder.value") == 42
    with pytest.raises(UsageError, match="is not a file"):
        load_target(f"{tmp_path / 'absent.py'}:x")
    with pytest.raises(UsageError, match="is not a target: write MODULE:FACTORY"):
        load_target("nets")


def test_load_target_names_a_missing_dependency(tmp_path, monkeypatch):
    (tmp_path / "needs_dep.py").write_text("import not_installed_dependency\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UsageError, match="it needs the module 'not_installed_dependency'"):
        load_target("needs_dep:x")


# -- the built-in examples ----------------------------------------------------------------
def test_small_examples_build_seeded_and_run():
    from oxport.cli import examples

    for name, shape in (("mlp", (1, 10)), ("lstm", (1, 16, 8))):
        model, inputs = examples.build(examples.get(name))
        again, _ = examples.build(examples.get(name))
        assert not model.training and model(*inputs).shape == shape
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                      again.state_dict().values()))


def test_alexnet_example_has_torchvisions_layout():
    from oxport.cli import examples

    model = examples.AlexNet()
    assert sum(p.numel() for p in model.parameters()) == 61_100_840
    assert len(model.state_dict()) == 16


def test_bert_example_without_transformers(monkeypatch):
    from oxport.cli import examples

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(UsageError, match="needs the transformers package.*pip install "
                                         "transformers"):
        examples.build(examples.get("bert"))


def test_unknown_example_lists_them():
    from oxport.cli import examples

    with pytest.raises(UsageError, match="no example called 'vgg'. Examples: alexnet, resnet"):
        examples.get("vgg")
