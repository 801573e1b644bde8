"""``oxport doctor``, end to end through the command line (``python -m oxport``) with the
model module in a temporary folder on ``PYTHONPATH``, and ``diagnose`` in process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from oxport import cli
from oxport.cli.doctor import diagnose
from oxport.errors import advice_for_cli

DEMO = """
    import torch
    import oxport

    torch.library.define("doctor_demo::scale", "(Tensor x) -> Tensor")
    torch.library.define("doctor_demo::shift", "(Tensor x) -> Tensor")


    @torch.library.impl("doctor_demo::scale", "cpu")
    def _scale(x):
        return x * 2


    @torch.library.impl("doctor_demo::shift", "cpu")
    def _shift(x):
        return x + 1


    def _shift_symbolic(g, x):
        return g.op("Add", x, g.op("Constant", value_t=torch.tensor(1.0)))


    # Served only from opset 21: doctor must say so at a lower opset.
    oxport.register_custom_op_symbolic("doctor_demo::shift", _shift_symbolic, 21)


    class Net(torch.nn.Module):
        def forward(self, x, n):
            factor = n.item()
            y = torch.ops.doctor_demo.scale(x) + torch.ops.doctor_demo.scale(x)
            return torch.ops.doctor_demo.shift(y) * factor


    class Fine(torch.nn.Module):
        def forward(self, x):
            return x.relu() * 2


    def make():
        return Net()
"""


def doctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "doctor_demo.py").write_text(textwrap.dedent(DEMO))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OXPORT_")}
    environ["OXPORT_STRICT_PLUGINS"] = "1"
    environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "oxport", "doctor", *args],
                          capture_output=True, text=True, cwd=tmp_path, env=environ,
                          timeout=300)


def item_line() -> int:
    lines = textwrap.dedent(DEMO).splitlines()
    return 1 + next(i for i, line in enumerate(lines) if "n.item()" in line)


def test_doctor_lists_both_ops_and_the_item_line(tmp_path):
    result = doctor(tmp_path, "doctor_demo:make", "--input", "2x3", "--input",
                    "scalar:float32", "--opset", "17")
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "Unconvertible ops at opset 17 (2):" in out
    assert "doctor_demo::scale (2 uses, first at " in out
    assert "doctor_demo::shift (1 use, first at " in out
    assert "no installed plugin serves it at any opset" in out
    assert "served from opset 21: export with --opset 21 or higher" in out
    assert "plugin: register_custom_op_symbolic serves opsets 21+" in out
    # The command line's flag (oxport export --fallback), not the Python API's parameter.
    assert "would export it: --fallback fallthrough" in out
    assert "OperatorExportTypes" not in out and "fallbacks=" not in out
    assert f"doctor_demo.py:{item_line()}: factor = n.item()" in out
    assert "[python-value]" in out
    assert "Result: the export would FAIL at opset 17." in out
    assert not (tmp_path / "doctor_demo.onnx").exists() and "Traceback" not in result.stderr


def test_doctor_json(tmp_path):
    result = doctor(tmp_path, "doctor_demo:make", "--input", "2x3", "--input",
                    "scalar:float32", "--opset", "17", "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["would_fail"] and data["opset"] == 17 and data["target"] == "doctor_demo:make"
    ops = {op["op"]: op for op in data["unconvertible"]}
    scale = ops["doctor_demo::scale"]
    assert scale["count"] == 2 and scale["min_opset"] is None and scale["providers"] == []
    assert ops["doctor_demo::shift"]["min_opset"] == 21
    (pitfall,) = data["pitfalls"]
    assert pitfall["kind"] == "python-value"
    assert pitfall["location"].endswith(f"doctor_demo.py:{item_line()}")


class Branches(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            return x.relu()
        return x


def test_a_branch_on_a_size_has_its_own_label():
    diagnosis = diagnose(Branches(), (torch.randn(3, 2),))
    (pitfall,) = diagnosis.pitfalls
    assert pitfall.kind == "branch" and pitfall.code == "if x.shape[0] > 2:"
    assert "such as a comparison of sizes (if x.shape[0] > 2): the trace keeps only the " \
        "path this input took" in pitfall.advice
    assert ".item()" not in pitfall.advice


@torch.library.custom_op("doctor_python::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class CallsTwice(torch.nn.Module):
    def forward(self, x):
        return _twice(x)


def test_fallback_advice_in_python_names_both_parameters():
    (op,) = diagnose(CallsTwice(), (torch.randn(2),)).ops
    assert op.fallbacks == [
        "the 'fallthrough' fallback (oxport.fallback.fallthrough (oxport 0.1.0)) would export "
        "it: operator_export_type=OperatorExportTypes.ONNX_FALLTHROUGH or "
        "fallbacks=['fallthrough']"]


def test_doctor_passes_a_model_that_exports(tmp_path):
    result = doctor(tmp_path, "doctor_demo:Fine", "--input", "2x3")
    assert result.returncode == 0, result.stderr
    assert "Result: the export would succeed at opset" in result.stdout


def test_doctor_usage_errors(tmp_path, monkeypatch, capsys):
    (tmp_path / "doctor_fine.py").write_text(
        "import torch\n\n\nclass Fine(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli.main(["doctor", "doctor_fine:Nope", "--input", "2x3"]) == 2
    assert "has no attribute 'Nope'" in capsys.readouterr().err
    assert cli.main(["doctor", "doctor_fine:Fine"]) == 2
    assert "--input SHAPE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        cli.main(["doctor", "doctor_fine:Fine", "--input", "2by3"])
    assert exited.value.code == 2 and "is not a shape" in capsys.readouterr().err


TAGGER = """
    import torch


    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(5, 4)

        def forward(self, tokens):
            rows = int(tokens.size(0))
            return self.embed(tokens).reshape(rows, -1)


    def tokens():
        return (torch.tensor([[1, 2, 4], [0, 3, 3]]),)
"""


def test_doctor_takes_the_inputs_names_and_dynamic_axes_export_takes(tmp_path):
    (tmp_path / "doctor_tagger.py").write_text(textwrap.dedent(TAGGER))
    # Random ints in [0, 10) overflow the 5-token vocabulary: the note says what to do.
    random = doctor(tmp_path, "doctor_tagger:Tagger", "--input", "2x3:int64")
    assert random.returncode == 1 and "IndexError" in random.stdout
    assert "give them with --inputs-from MODULE:FN" in random.stdout
    valid = doctor(tmp_path, "doctor_tagger:Tagger", "--inputs-from", "doctor_tagger:tokens",
                   "--input-names", "tokens", "--dynamic-axis", "tokens:0:batch", "--json")
    assert valid.returncode == 0, valid.stderr
    pitfalls = json.loads(valid.stdout)["pitfalls"]
    fixed = [p for p in pitfalls if p["kind"] == "dynamic-axis"]
    assert len(fixed) == 1 and fixed[0]["code"] == "rows = int(tokens.size(0))"
    assert "dynamic_axes makes dynamic (batch)" in fixed[0]["advice"]
    wrong = doctor(tmp_path, "doctor_tagger:Tagger", "--inputs-from", "doctor_tagger:tokens",
                   "--dynamic-axis", "image:0:batch")
    assert wrong.returncode == 2 and "--dynamic-axis names 'image', which is neither an " \
        "input nor an output of the model (inputs: tokens;" in wrong.stderr


class InPlaceShape(torch.nn.Module):
    """The seed's in-place-on-shape example."""

    def forward(self, states):
        batch_size, seq_length = states.shape[:2]
        real_seq_length = seq_length
        real_seq_length += 2
        return states * (real_seq_length + seq_length)


def test_diagnose_in_process_finds_source_pitfalls():
    found = diagnose(InPlaceShape(), (torch.randn(2, 3),), 17)
    assert not found.would_fail and found.ops == [] and found.error == ""
    (pitfall,) = found.pitfalls
    assert pitfall.kind == "inplace-shape" and pitfall.code == "real_seq_length += 2"
    assert "real_seq_length = real_seq_length + ..." in pitfall.advice
    assert "the export would succeed at opset 17" in found.to_text()


# -- --dynamo: the torch.export front end ----------------------------------------------
EXPORT_DEMO = """
    import torch


    @torch.library.custom_op("doctor_export::scale", mutates_args=())
    def scale(x: torch.Tensor) -> torch.Tensor:
        return x * 2


    @scale.register_fake
    def _(x):
        return torch.empty_like(x)


    class Net(torch.nn.Module):
        def forward(self, x):
            y = torch.cond(x.sum() > 0, lambda t: t.relu(), lambda t: scale(t), (x,))
            return scale(y).relu()
"""


def test_doctor_dynamo_lists_ops_with_the_fx_source_lines(tmp_path):
    """A torch.library op with a fake kernel, once in a cond branch and once outside:
    both uses counted, each at its line, from the FX nodes' stack traces."""
    (tmp_path / "doctor_export.py").write_text(textwrap.dedent(EXPORT_DEMO))
    result = doctor(tmp_path, "doctor_export:Net", "--input", "2x3", "--opset", "17",
                    "--dynamo", "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    (op,) = data["unconvertible"]
    lines = textwrap.dedent(EXPORT_DEMO).splitlines()
    cond_line = 1 + next(i for i, line in enumerate(lines) if "torch.cond" in line)
    assert op["op"] == "doctor_export::scale" and op["count"] == 2
    assert sorted(op["sources"]) == sorted(
        f"{tmp_path / 'doctor_export.py'}({line}): forward" for line in (cond_line, cond_line + 1))
    assert "'fallthrough' fallback" in op["fallbacks"][0]


def test_tracer_warnings_in_torchs_own_code_are_no_pitfalls():
    # torch's attention raises TracerWarnings on its own size checks: nothing to act on.
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    found = diagnose(torch.nn.TransformerEncoder(layer, 2).eval(), (torch.randn(2, 5, 16),))
    assert not found.would_fail
    assert not [p for p in found.pitfalls if "torch" in p.location], found.to_text()


class RaisesAlways(torch.nn.Module):
    def forward(self, x):
        raise ValueError("this model takes no inputs of this size")


def test_dynamo_capture_error_advises_by_what_fails():
    # The forward raises in eager PyTorch too: the TorchScript front end is no way out.
    raising = diagnose(RaisesAlways(), (torch.randn(2),), dynamo=True)
    assert "raises in eager PyTorch on these inputs too (ValueError: this model takes" \
        in raising.error and "dynamo=False" not in raising.error
    # Only torch.export fails: from the command line the advice names the flag.
    with advice_for_cli():
        uncaptured = diagnose(CallsTwice(), (torch.randn(2),), dynamo=True)
    assert "Export without --dynamo (the TorchScript front end)" in uncaptured.error
    assert "dynamo=False" not in uncaptured.error


def test_diagnose_dynamo_in_process():
    # A custom op without a fake kernel: torch.export's own error, and what to do.
    uncaptured = diagnose(CallsTwice(), (torch.randn(2),), dynamo=True)
    assert uncaptured.would_fail and uncaptured.ops == []
    assert "torch.export could not capture CallsTwice" in uncaptured.error
    assert "register_fake" in uncaptured.error and "dynamo=False" in uncaptured.error
    found = diagnose(InPlaceShape(), (torch.randn(2, 3),), 17, dynamo=True)
    assert not found.would_fail and found.error == ""
    assert [p.kind for p in found.pitfalls] == ["inplace-shape"]
    scripted = diagnose(torch.jit.script(torch.nn.ReLU()), (torch.randn(2),), dynamo=True)
    assert scripted.would_fail and "cannot read a scripted model" in scripted.error
