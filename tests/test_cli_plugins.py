"""``oxport plugins`` and ``oxport ops``, run as ``python -m oxport`` subprocesses.

Extra plugins are "installed" by writing a distribution's metadata (``*.dist-info``
with ``entry_points.txt``) and its module into a folder put on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oxport import cli, plugins
from oxport.types import MAX_OPSET, MIN_OPSET

PLUGIN_KEYS = {"name", "distribution", "version", "layer", "value", "error", "registered", "ops",
               "on_demand"}
LISTING_KEYS = {"name", "distribution", "version", "layer", "value", "enabled"}
OP_KEYS = {"op", "since", "until", "provider", "distribution", "version", "layer", "override",
           "shadows"}

SHADOWING = """
    import oxport

    pack = oxport.OpPack("my-shadow")


    @pack.symbolic({op!r}, since=14, override=True)
    def replacement(g, *args):
        return g.op("test_domain::Mine", *args)
"""

FOO = """
    import oxport

    pack = oxport.OpPack("{name}")


    @pack.symbolic("custom_ops::foo_forward", since=9)
    def foo_forward(g, x, y, attr1, attr2):
        return g.op("custom_domain::Foo", x, y)
"""


def fake_install(site: Path, dist: str, plugin: str, module: str, source: str) -> None:
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[oxport]\n{plugin} = {module}:pack\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


def oxport_cli(*args: str, site: Path | None = None, cwd: Path, strict: bool = True,
               **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OXPORT_")}
    if strict:
        environ["OXPORT_STRICT_PLUGINS"] = "1"
    if site is not None:
        environ["PYTHONPATH"] = os.pathsep.join([str(site), environ.get("PYTHONPATH", "")])
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "oxport", *args], capture_output=True,
                          text=True, cwd=cwd, env=environ, timeout=300)


def test_plugins_lists_without_loading(tmp_path):
    result = oxport_cli("plugins", "--json", cwd=tmp_path, OXPORT_DISABLE_PLUGINS="oxport.nn")
    assert result.returncode == 0, result.stderr
    infos = {i["name"]: i for i in json.loads(result.stdout)}
    assert infos and all(set(i) == LISTING_KEYS for i in infos.values())
    assert infos["oxport.prim"] == {"name": "oxport.prim", "distribution": "oxport",
                                    "version": "0.1.0", "layer": "builtin",
                                    "value": "oxport.opsets.prim:pack", "enabled": True}
    assert infos["oxport.nn"]["enabled"] is False
    text = oxport_cli("plugins", cwd=tmp_path).stdout.splitlines()
    # Columns line up however long a name is.
    starts = {line.index(" oxport 0.1.0") for line in text}
    assert len(text) == len(infos) and len(starts) == 1, text


def test_plugins_json(tmp_path):
    result = oxport_cli("plugins", "--check", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    infos = json.loads(result.stdout)
    assert infos and all(set(i) == PLUGIN_KEYS for i in infos)
    builtin = [i for i in infos if i["distribution"] == "oxport"]
    assert builtin and all(i["layer"] == "builtin" and i["error"] is None for i in builtin)
    assert any(i["registered"].get("symbolics") and i["ops"] for i in builtin)


def test_plugins_text(tmp_path):
    result = oxport_cli("plugins", "--check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.split()[:4] == ["oxport.prim", "oxport", "0.1.0", "builtin"] and
               " ok (loads on demand); registers " in line for line in lines)
    assert any(line.startswith("oxport.rnn_capture ") and line.endswith(
        " ok; registers 4 capture kernels") for line in lines)
    (fallthrough,) = [line for line in lines if line.startswith("oxport.fallback.fallthrough")]
    assert fallthrough.endswith("ok; registers 1 fallback")
    assert len({line.index(" oxport 0.1.0") for line in lines}) == 1


def test_plugins_reports_a_broken_plugin_and_exits_1(tmp_path):
    site = tmp_path / "site"
    fake_install(site, "broken-dist", "broken-pack", "broken_mod",
                 "raise RuntimeError('boom at import')\n")
    env = {"OXPORT_PLUGINS": "oxport.prim,broken-pack"}
    result = oxport_cli("plugins", "--check", "--json", site=site, cwd=tmp_path, strict=False,
                        **env)
    assert result.returncode == 1
    infos = {i["name"]: i for i in json.loads(result.stdout)}
    broken = infos["broken-pack"]
    assert broken["distribution"] == "broken-dist"
    assert broken["error"] == "import failed: RuntimeError: boom at import"
    assert infos["oxport.prim"]["error"] is None
    # Strict mode turns it into an error message, not a traceback.
    strict = oxport_cli("plugins", "--check", site=site, cwd=tmp_path, **env)
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    assert strict.stderr.startswith("oxport: error: oxport plugin 'broken-pack' from broken-dist")


def test_plugins_verbose_prints_a_broken_plugins_traceback(tmp_path):
    site = tmp_path / "site"
    fake_install(site, "broken-dist", "broken-pack", "broken_mod",
                 "def fail():\n    raise RuntimeError('boom at import')\n\nfail()\n")
    env = {"OXPORT_PLUGINS": "oxport.prim,broken-pack"}
    result = oxport_cli("plugins", "--verbose", site=site, cwd=tmp_path, strict=False, **env)
    assert result.returncode == 1
    text = result.stdout.split("\nbroken-pack (broken-dist 1.0): import failed: RuntimeError: "
                               "boom at import\nTraceback (most recent call last):\n")[1]
    assert 'broken_mod.py", line 4, in <module>' in text and ", in fail\n" in text
    assert text.rstrip().endswith("RuntimeError: boom at import")
    infos = {i["name"]: i for i in json.loads(oxport_cli(
        "plugins", "--verbose", "--json", site=site, cwd=tmp_path, strict=False, **env).stdout)}
    assert set(infos["broken-pack"]) == PLUGIN_KEYS | {"traceback"}
    assert "in fail" in infos["broken-pack"]["traceback"]
    assert infos["oxport.prim"]["traceback"] is None
    quiet = oxport_cli("plugins", "--check", site=site, cwd=tmp_path, strict=False, **env)
    assert "Traceback" not in quiet.stdout


def test_plugins_sync_pyproject_rewrites_the_ops_block(tmp_path):
    site = tmp_path / "site"
    fake_install(site, "foo-dist", "foo-pack", "foo_mod", FOO.format(name="foo-pack"))
    pyproject = tmp_path / "pyproject.toml"
    text = textwrap.dedent("""\
        [project]
        name = "foo-dist"

        [project.entry-points.oxport]
        foo-pack = "foo_mod:pack"

        # hand-written, stale
        [project.entry-points."oxport.ops"]
        "custom_ops.gone" = "foo_mod:pack"

        [tool.other]
        key = 1
    """)
    pyproject.write_text(text)
    result = oxport_cli("plugins", "--sync-pyproject", site=site, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "rewrote the oxport.ops entry points" in result.stdout
    assert pyproject.read_text() == text.replace(
        '# hand-written, stale\n', '# The ops each symbolic pack serves, so that it loads only '
        'when an export meets one.\n# Generated by `oxport plugins --sync-pyproject` '
        '(tests/test_plugins.py checks it is current).\n').replace(
        '"custom_ops.gone"', '"custom_ops.foo_forward"')
    again = oxport_cli("plugins", "--sync-pyproject", str(pyproject), site=site, cwd=site)
    assert again.returncode == 0 and "entry points are current" in again.stdout


def test_ops_json_and_opset_filter(tmp_path):
    everything = oxport_cli("ops", "--json", cwd=tmp_path)
    assert everything.returncode == 0, everything.stderr
    rows = json.loads(everything.stdout)
    assert rows and all(set(r) == OP_KEYS for r in rows)
    builtin = [r for r in rows if r["distribution"] == "oxport"]
    assert builtin and all(r["layer"] == "builtin" for r in builtin)
    assert all(r["since"] >= MIN_OPSET and (r["until"] is None or r["until"] >= r["since"])
               for r in rows)
    at_9 = json.loads(oxport_cli("ops", "--opset", "9", "--json", cwd=tmp_path).stdout)
    assert at_9 and all(set(r) == OP_KEYS | {"active"} for r in at_9)
    assert all(r["since"] <= 9 and (r["until"] is None or r["until"] >= 9) for r in at_9)
    assert len(at_9) < len(rows) or all(r["since"] <= 9 for r in rows)
    # One active symbolic per op; it shadows every other one listed for that op.
    for op in {r["op"] for r in at_9}:
        (active,) = [r for r in at_9 if r["op"] == op and r["active"]]
        shadowed = {(s["provider"], s["since"]) for s in active["shadows"]}
        assert shadowed == {(r["provider"], r["since"]) for r in at_9
                            if r["op"] == op and not r["active"]}
    text = oxport_cli("ops", "--opset", "9", cwd=tmp_path)
    assert text.returncode == 0 and len(text.stdout.splitlines()) == len(at_9)


def test_ops_shows_what_each_entry_shadows(tmp_path):
    # Shadow an op of one built-in pack; only that pack and ours load.
    builtin_pack = "oxport.prim"
    op = plugins.load(allow=[builtin_pack]).registry.names()[0]
    site = tmp_path / "site"
    fake_install(site, "my-shadow-dist", "my-shadow", "my_shadow", SHADOWING.format(op=op))
    env = {"OXPORT_PLUGINS": f"{builtin_pack},my-shadow"}
    rows = json.loads(oxport_cli("ops", "--opset", "20", "--json", site=site, cwd=tmp_path,
                                 **env).stdout)
    builtin, mine = sorted((r for r in rows if r["op"] == op), key=lambda r: r["layer"])
    assert (mine["provider"], mine["distribution"], mine["layer"], mine["active"]) == (
        "my-shadow", "my-shadow-dist", "installed", True)
    assert [(s["provider"], s["distribution"]) for s in mine["shadows"]] == [
        (builtin_pack, "oxport")]
    assert builtin["active"] is False and builtin["shadows"] == []
    text = oxport_cli("ops", "--opset", "20", site=site, cwd=tmp_path, **env).stdout
    (line,) = [x for x in text.splitlines() if "my-shadow" in x]
    assert line.startswith(op) and "installed" in line
    assert f"[shadows {builtin_pack} {builtin['since']}..+]" in line
    # Below its since, the installed pack is not listed and the built-in serves.
    at_13 = json.loads(oxport_cli("ops", "--opset", "13", "--json", site=site, cwd=tmp_path,
                                  **env).stdout)
    assert [(r["provider"], r["active"]) for r in at_13 if r["op"] == op] == [
        (builtin_pack, True)]


def test_ops_reports_a_conflict_naming_both_distributions(tmp_path):
    site = tmp_path / "site"
    fake_install(site, "dist-one", "pack-one", "pack_one", FOO.format(name="pack-one"))
    fake_install(site, "dist-two", "pack-two", "pack_two", FOO.format(name="pack-two"))
    env = {"OXPORT_PLUGINS": "oxport.prim,pack-one,pack-two"}
    result = oxport_cli("ops", site=site, cwd=tmp_path, strict=False, **env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "pack-one (dist-one 1.0)" in result.stderr and "pack-two (dist-two 1.0)" in result.stderr
    blocked = oxport_cli("ops", "--json", site=site, cwd=tmp_path,
                         OXPORT_DISABLE_PLUGINS="pack-two", **env)
    assert blocked.returncode == 0, blocked.stderr
    (foo,) = [r for r in json.loads(blocked.stdout) if r["op"] == "custom_ops::foo_forward"]
    assert (foo["provider"], foo["distribution"]) == ("pack-one", "dist-one")


def test_ops_rejects_a_bad_opset(tmp_path, capsys):
    # The range export accepts, not the newer opsets onnx knows of.
    expected = f"is not an opset oxport exports: pass an int from {MIN_OPSET} to {MAX_OPSET}"
    result = oxport_cli("ops", "--opset", "3", cwd=tmp_path)
    assert result.returncode == 2 and expected in result.stderr
    for opset in [str(MAX_OPSET + 1), "x"]:  # the same parser, in-process
        with pytest.raises(SystemExit) as info:
            cli.main(["ops", "--opset", opset])
        assert info.value.code == 2 and expected in capsys.readouterr().err


def test_an_unknown_option_of_a_command_prints_that_commands_usage(capsys):
    for argv, usage in ((["ops", "--bogus"], "usage: oxport ops "),
                        (["plugins", "--check", "extra"], "usage: oxport plugins "),
                        (["--bogus", "ops"], "usage: oxport [-h]")):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.startswith(usage), err
        assert f"unrecognized arguments: {argv[-1] if argv[0] != '--bogus' else '--bogus'}" \
            in err


def test_unknown_allow_list_names(tmp_path):
    result = oxport_cli("plugins", "--check", cwd=tmp_path, OXPORT_PLUGINS="nope")
    assert result.returncode == 1
    assert "Plugins nope were asked for" in result.stderr
    assert "oxport.prim (oxport)" in result.stderr


def test_a_command_is_required(tmp_path):
    result = oxport_cli(cwd=tmp_path)
    assert result.returncode == 2 and "COMMAND" in result.stderr


def test_plugins_declare_ops_prints_the_entry_points_to_paste(tmp_path):
    result = oxport_cli("plugins", "--declare-ops", "oxport.signal", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    header, *entries = result.stdout.splitlines()
    assert header == '[project.entry-points."oxport.ops"]'
    assert '"aten.stft" = "oxport.opsets.signal:pack"' in entries and len(entries) == 17
    missing = oxport_cli("plugins", "--declare-ops", "no.such.pack", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no loaded plugin is called no.such.pack" in missing.stderr
