"""``oxport new-pack NAME``: the scaffold pip-installs and passes its own tests, through the
``oxport`` pytest plugin's runner; bad names and existing folders are refused."""

from __future__ import annotations

import os
import subprocess
import pytest
import torch

from oxport import cli, testing
from oxport.cli.new_pack import TEMPLATE

from tests.venvs import layered_venv


def run(*command, cwd) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OXPORT_")}
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                            cwd=cwd, env={**environ, "OXPORT_STRICT_PLUGINS": "1"},
                            timeout=600)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


def test_new_pack_passes_its_own_tests_after_pip_install(tmp_path):
    python, _ = layered_venv(tmp_path / "venv")
    created = run(python, "-m", "oxport", "new-pack", "demo", cwd=tmp_path)
    assert created.stdout.splitlines()[-1] == "Next: pip install -e demo && python -m pytest demo"
    files = sorted(str(p.relative_to(tmp_path / "demo")) for p in (tmp_path / "demo").rglob("*")
                   if p.is_file())
    assert files == sorted(path.format(module="oxport_demo") for path in TEMPLATE)
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "demo",
        cwd=tmp_path)
    listed = run(python, "-m", "oxport", "plugins", "--check", cwd=tmp_path).stdout
    (line,) = [x for x in listed.splitlines() if x.startswith("demo ")]
    assert "oxport-demo 0.1.0" in line and line.endswith("ok; registers 1 symbolic")
    tests = run(python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "demo",
                cwd=tmp_path)
    # One case traced at opsets 7, the default and the newest ONNX Runtime runs, and
    # through torch.export at the lowest and the newest.
    assert "5 passed" in tests.stdout.splitlines()[-1], tests.stdout
    exported = [line for line in tests.stdout.splitlines()
                if line.startswith("PASSED") and line.endswith("-export]")]
    assert len(exported) == 2 and "opset7-export]" in exported[0], tests.stdout


def test_new_pack_refuses_bad_names_and_existing_folders(tmp_path, capsys):
    for bad in ["Demo", "1demo", "my ops", "demo-"]:
        assert cli.main(["new-pack", bad, "-d", str(tmp_path)]) == 2
        assert "is not a pack name" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert cli.main(["new-pack", "taken", "-d", str(tmp_path)]) == 2
    assert "already exists: pick another NAME" in capsys.readouterr().err
    assert cli.main(["new-pack", "fine", "-d", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # nothing half-made


def test_the_pytest_plugin_gives_the_roundtrip_fixture(oxport_roundtrip):
    """Registered through the ``pytest11`` entry point: no import needed in the test."""
    linear = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    (out,) = oxport_roundtrip(linear, (x,), opset_version=17)
    torch.testing.assert_close(torch.from_numpy(out), linear(x).detach(), rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError, match="output 0"):
        oxport_roundtrip(Dropout(), (x,), opset_version=17)


class Dropout(torch.nn.Module):
    """Random in eager, the identity once exported in eval mode: the compare must fail."""

    def forward(self, x):
        return torch.nn.functional.dropout(x, 0.5, training=True)


def test_a_packs_one_line_test_runs_both_front_ends(monkeypatch):
    """By default each case runs traced and through torch.export; a case declaring
    not_exportable runs traced only; OXPORT_TEST_FRONT_ENDS chooses otherwise."""
    monkeypatch.delenv("OXPORT_TEST_FRONT_ENDS", raising=False)

    def runs(*names):
        (mark,) = testing.op_tests(*names).pytestmark
        return mark.args[1]

    activations = runs("oxport.activations")
    assert {r.front_end for r in activations} == {"trace", "export"}
    quantized = runs("oxport.quantized")
    declined = {str(r.case) for r in quantized if r.case.not_exportable}
    assert declined and not any(str(r.case) in declined for r in quantized
                                if r.front_end == "export")
    monkeypatch.setenv("OXPORT_TEST_FRONT_ENDS", "trace")
    assert {r.front_end for r in runs("oxport.activations")} == {"trace"}


def test_op_tests_for_a_pack_that_is_not_loaded_says_so():
    with pytest.raises(LookupError, match=r"op_tests\('no-such-pack'\): no loaded plugin of "
                                          r"that name registers a symbolic \(loaded: .*oxport"
                                          r"\.nn.*\)\. Is the pack pip-installed"):
        testing.op_tests("no-such-pack")


def test_the_case_runner_keeps_only_oxports_warnings():
    """Cases call deprecated torch APIs on purpose; oxport's own warnings still show."""
    import warnings

    @testing._only_oxport_warnings
    def case_body():
        warnings.warn("oxport: aten::x was exported by the 'fallthrough' fallback", UserWarning)
        warnings.warn("torch.frobenius_norm is deprecated", UserWarning)
        warnings.warn("NLLLoss2d has been deprecated", FutureWarning)
        warnings.warn("old API", DeprecationWarning)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        case_body()
    assert [str(w.message) for w in caught] == [
        "oxport: aten::x was exported by the 'fallthrough' fallback"]
