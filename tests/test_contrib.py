"""The contrib packs as separate distributions, found through their entry points:
installed -> used (and listed by ``oxport ops``); blocked by name or uninstalled -> the
standard behaviour returns.

``tox -e contrib`` pip-installs both packs for real, runs their tests and the
``installed`` tests here, uninstalls them and runs the ``uninstalled`` test. The main suite
installs ``contrib/ortcontrib`` into a throwaway environment layered on this one (other
test runs may share this interpreter's site-packages) and removes it afterwards.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

import oxport
from oxport import cli, plugin_manager, plugins
from oxport.plugin_manager import importlib_metadata
from oxport.testing import compare
from tests.venvs import layered_venv

ROOT = Path(__file__).resolve().parents[1]
CONTRIB = ROOT / "contrib"


def installed(distribution: str) -> bool:
    try:
        importlib_metadata.distribution(distribution)
    except importlib_metadata.PackageNotFoundError:
        return False
    return True


class Gelu(torch.nn.Module):
    def forward(self, x):
        return F.gelu(x)


X = torch.randn(2, 5)


def gelu_nodes(opset: int = 17, **kwargs) -> tuple[list[tuple[str, str]], onnx.ModelProto]:
    model = oxport.convert(Gelu(), (X,), opset_version=opset, **kwargs).model_proto
    return [(n.domain, n.op_type) for n in model.graph.node if n.op_type != "Constant"], model


def run_ort(model: onnx.ModelProto) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: X.numpy()})


def assert_standard_gelu(**kwargs) -> None:
    nodes, model = gelu_nodes(17, **kwargs)
    assert ("", "Erf") in nodes and all(domain == "" for domain, _ in nodes), nodes
    assert gelu_nodes(20, **kwargs)[0] == [("", "Gelu")]
    compare(F.gelu(X), run_ort(model), rtol=1e-4, atol=1e-5)


def assert_ortcontrib_gelu(**kwargs) -> None:
    nodes, model = gelu_nodes(17, **kwargs)
    assert nodes == [("com.microsoft", "Gelu")]
    compare(F.gelu(X), run_ort(model), rtol=1e-4, atol=1e-5)


def ops_rows(capsys) -> list[dict]:
    capsys.readouterr()
    assert cli.main(["ops", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def gelu_providers(capsys) -> set[str]:
    return {row["provider"] for row in ops_rows(capsys) if row["op"] == "aten::gelu"}


@pytest.fixture
def fresh_plugins(monkeypatch):
    """No plugin selection from the environment; the plugin cache reloaded around the test."""
    for var in ("OXPORT_DISABLE_PLUGIN_AUTOLOAD", "OXPORT_PLUGINS", "OXPORT_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    plugins.reset()
    yield monkeypatch
    plugins.reset()


def pip(python: Path, *args: str) -> None:
    result = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True)
    assert result.returncode == 0, f"pip {args} failed:\n{result.stdout}\n{result.stderr}"


@pytest.mark.slow
def test_installing_ortcontrib_makes_gelu_com_microsoft(tmp_path, fresh_plugins, capsys):
    if installed("oxport-ortcontrib"):
        pytest.skip("oxport-ortcontrib is installed here: test_installed_packs covers it")
    assert_standard_gelu()
    python, purelib = layered_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-build-isolation", str(CONTRIB / "ortcontrib"))
    fresh_plugins.syspath_prepend(str(purelib))
    plugins.reset()
    try:
        # Installed: used, and listed by `oxport ops` as shadowing the built-in symbolic.
        assert_ortcontrib_gelu()
        (row,) = [r for r in ops_rows(capsys)
                  if r["op"] == "aten::gelu" and r["provider"] == "ortcontrib"]
        assert row["distribution"] == "oxport-ortcontrib" and row["shadows"]
        # Blocked by name, per export or through the environment: the standard path.
        assert_standard_gelu(disable_plugins=["ortcontrib"])
        fresh_plugins.setenv("OXPORT_DISABLE_PLUGINS", "ortcontrib")
        assert_standard_gelu()
        assert "ortcontrib" not in gelu_providers(capsys)
        fresh_plugins.delenv("OXPORT_DISABLE_PLUGINS")
    finally:
        pip(python, "uninstall", "-y", "-q", "oxport-ortcontrib")
        plugins.reset()
    # Uninstalled: the standard path again.
    assert not installed("oxport-ortcontrib")
    assert "ortcontrib" not in gelu_providers(capsys)
    assert_standard_gelu()


def _scaled_add(x, y):
    return torch.ops.oxport_example.scaled_add(x, y, 2.0)


class ScaledAdd(torch.nn.Module):
    def forward(self, x, y):
        return _scaled_add(x, y)


def test_installed_packs(fresh_plugins, capsys):
    """Run by ``tox -e contrib`` with both packs pip-installed."""
    if not (installed("oxport-ortcontrib") and installed("oxport-example-pack")):
        pytest.skip("the contrib packs are not installed: run `tox -e contrib`")
    import oxport_example_pack  # noqa: F401 - defines torch.ops.oxport_example

    # The example pack declares its op (group oxport.ops): a new manager imports it only
    # when asked about that op (the session's manager may have loaded it already).
    manager = plugin_manager.PluginManager()
    manager.load()
    (example,) = [p for p in manager.plugins if p.name == "example-pack"]
    assert example.on_demand and not example.registered
    assert manager.registry.lookup("oxport_example::scaled_add", 17) is not None
    assert example.registered == {"symbolics": 2, "domains": 1}
    args = (torch.randn(3), torch.randn(3))
    model = oxport.convert(ScaledAdd(), args, opset_version=17).model_proto
    assert [(n.domain, n.op_type) for n in model.graph.node] == [("com.example", "ScaledAdd")]
    assert {o.domain: o.version for o in model.opset_import}["com.example"] == 1
    assert "ortcontrib" in gelu_providers(capsys)
    assert_ortcontrib_gelu()
    fresh_plugins.setenv("OXPORT_DISABLE_PLUGINS", "ortcontrib,example-pack")
    assert_standard_gelu()
    with pytest.raises(oxport.UnsupportedOperatorError, match="oxport_example::scaled_add"):
        oxport.convert(ScaledAdd(), args, opset_version=17)


def test_uninstalled_packs_leave_the_standard_behaviour(fresh_plugins, capsys):
    """In the main suite, and in ``tox -e contrib`` after the packs are uninstalled."""
    assert not installed("oxport-ortcontrib") and not installed("oxport-example-pack")
    assert "ortcontrib" not in gelu_providers(capsys)
    assert_standard_gelu()
    assert not any(row["op"].startswith("oxport_example::") for row in ops_rows(capsys))
