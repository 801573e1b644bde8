"""The plugin manager: entry points, broken plugins, strict mode, hook checks, loading controls,
and the third-party contract with a really pip-installed distribution."""

from __future__ import annotations

import importlib
import io
import json
import logging
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import onnx
import pytest
import torch

import oxport
from oxport import plugin_manager, plugins, testing
from oxport.errors import PluginError, RegistryError, UnsupportedOperatorError
from oxport.registry import Layer, OpPack, ShadowingWarning
from tests.helpers import export_proto
from tests.venvs import layered_venv

ROOT = Path(__file__).resolve().parents[1]
THIRDPARTY = Path(__file__).resolve().parent / "fixtures" / "thirdparty"
_LIBRARIES: list[torch.library.Library] = []


# -- the custom op of the seeds' example, defined with torch.library ------------------
def define_foo_forward() -> None:
    """``custom_ops::foo_forward(input1, input2, float attr1, int attr2)``, once per process."""
    try:
        torch.ops.custom_ops.foo_forward  # noqa: B018 - defined by another test already
        return
    except AttributeError:
        pass
    library = torch.library.Library("custom_ops", "FRAGMENT")
    library.define("foo_forward(Tensor input1, Tensor input2, float attr1, int attr2) -> Tensor")
    library.impl("foo_forward", lambda a, b, x, y: a * x + b * y, "CompositeExplicitAutograd")
    _LIBRARIES.append(library)  # the op lives as long as its Library


class FooModel(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.custom_ops.foo_forward(x, y, 2.0, 3)


def export_foo(opset: int = 13, **kwargs) -> onnx.ModelProto:
    define_foo_forward()
    return export_proto(FooModel(), (torch.randn(2, 3), torch.randn(2, 3)),
                        opset_version=opset, custom_opsets={"custom_domain": 2}, **kwargs)


def assert_foo_node(model: onnx.ModelProto) -> None:
    (node,) = model.graph.node
    assert (node.domain, node.op_type) == ("custom_domain", "Foo")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"attr1": 2.0, "attr2": 3}
    imports = {o.domain: o.version for o in model.opset_import}
    assert imports["custom_domain"] == 2


def foo_pack(name: str = "my-pack", since: int = 9, override: bool = False) -> OpPack:
    pack = OpPack(name)

    @pack.symbolic("custom_ops::foo_forward", since=since, override=override)
    @oxport.symbolic_helper.parse_args("v", "v", "f", "i")
    def foo_forward(g, input1, input2, attr1, attr2):
        return g.op("custom_domain::Foo", input1, input2, attr1_f=attr1, attr2_i=attr2)

    return pack


# -- fake installed distributions --------------------------------------------------------
#: The real scan, before a test's fakes replace it.
INSTALLED_ENTRY_POINTS = plugin_manager.installed_entry_points
EntryPoint = plugin_manager.importlib_metadata.EntryPoint


@pytest.fixture(autouse=True)
def isolated(monkeypatch, oxport_plugin_session):
    """A clean environment and a new plugin session; the previous session comes back after."""
    for var in ("OXPORT_DISABLE_PLUGIN_AUTOLOAD", "OXPORT_PLUGINS", "OXPORT_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OXPORT_STRICT_PLUGINS", "1")
    yield
    importlib.invalidate_caches()


@pytest.fixture
def install(monkeypatch):
    """``install(name, plugin, dist=...)`` fakes an installed entry point for ``plugin``
    (an object, or module source text), next to the real ones."""
    real, declared = plugin_manager.installed_entry_points()
    fakes: list = []
    fake_declarations: list = []
    monkeypatch.setattr(plugin_manager, "installed_entry_points",
                        lambda: ([*fakes, *real], [*fake_declarations, *declared]))

    def install_one(name: str, plugin=None, dist: str | None = None, version: str = "1.0",
                    value: str | None = None, declares: tuple[str, ...] = (),
                    editable: bool = False) -> None:
        """``declares``: ops its distribution declares for it (group ``oxport.ops``);
        ``editable``: an editable install, whose declarations may be stale."""
        module_name = "fake_oxport_" + name.replace("-", "_").replace(".", "_")
        module = types.ModuleType(module_name)
        if plugin is None:  # ``value`` names a real module
            default_value = ""
        elif isinstance(plugin, str):
            exec(textwrap.dedent(plugin), module.__dict__)  # noqa: S102 - test module source
            default_value = module_name
        else:
            module.plugin = plugin
            default_value = f"{module_name}:plugin"
        if plugin is not None:
            monkeypatch.setitem(sys.modules, module_name, module)
        entry_point = EntryPoint(name, value or default_value, plugin_manager.ENTRY_POINT_GROUP)
        distribution = (dist or f"{name}-dist", version, editable)
        fakes.append(plugin_manager.FoundEntryPoint(entry_point, *distribution))
        fake_declarations.extend(plugin_manager.FoundEntryPoint(EntryPoint(
            plugin_manager.entry_name_of_op(op), entry_point.value,
            plugin_manager.OPS_ENTRY_POINT_GROUP), *distribution) for op in declares)

    return install_one


def info_of(manager, name):
    (info,) = [p for p in manager.plugins if p.name == name]
    return info


# -- loading -----------------------------------------------------------------------------
def test_every_package_folder_ships_in_a_regular_install():
    """Each folder with an ``__init__.py`` is a listed package mapped to its folder.

    The editable install finds unlisted folders anyway; a wheel leaves them out, and a
    plugin there then fails to import only after ``pip install .``.
    """
    import tomllib

    setuptools_table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folder_of = setuptools_table["package-dir"]
    assert set(setuptools_table["packages"]) == set(folder_of)
    listed = {(ROOT / folder).resolve() for folder in folder_of.values()}
    on_disk = {init.parent.resolve() for top in ("core", "opsets", "plugins")
               for init in (ROOT / top).rglob("__init__.py")}
    assert on_disk - listed == set(), (
        "package folders missing from [tool.setuptools] packages/package-dir in pyproject.toml")


def test_builtin_packs_load_through_their_entry_points():
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    declared = declared["oxport"]
    manager = plugins.load()
    builtin = {p.name: p for p in manager.plugins if p.distribution == "oxport"}
    assert set(builtin) == set(declared), (
        "the installed entry points differ from pyproject.toml: pip install -e . --no-deps")
    for name, info in builtin.items():
        assert info.ok and info.layer == Layer.BUILTIN and info.value == declared[name]
        assert info.version == oxport.__version__
    entries = [e for e in manager.registry.entries() if e.provenance.distribution == "oxport"]
    assert entries
    for entry in entries:
        assert entry.layer == Layer.BUILTIN
        assert entry.name in builtin[entry.provenance.plugin].ops


# -- loading on demand -------------------------------------------------------------------
def _dist_info(site, version: str, entry_points: str) -> None:
    info = site / f"oxport_shadowed_pack-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: oxport-shadowed-pack\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_the_scan_takes_the_first_copy_of_a_distribution_on_the_path(tmp_path, monkeypatch):
    """Two copies of one distribution (a stale build beside an install): the first on
    sys.path is the installed one, whether or not it names oxport plugins, as for
    importlib.metadata; other distributions' entry points are not oxport's."""
    first, second = tmp_path / "first", tmp_path / "second"
    _dist_info(first, "2.0", "[console_scripts]\nshadowed = oxport_shadowed:main\n")
    _dist_info(second, "1.0", "[oxport]\nshadowed = oxport_shadowed:pack\n")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    importlib.invalidate_caches()
    plugins, declarations = INSTALLED_ENTRY_POINTS()
    assert "shadowed" not in {ep.name for ep in plugins}
    assert {ep.version for ep in plugins if ep.distribution == "oxport-shadowed-pack"} <= {"2.0"}
    # oxport's own distribution passes the text filter: its plugins and declarations.
    assert "oxport.nn" in {ep.name for ep in plugins}
    assert "aten.conv2d" in {ep.name for ep in declarations}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(first)])
    importlib.invalidate_caches()
    plugins, _ = INSTALLED_ENTRY_POINTS()
    assert [ep.value for ep in plugins if ep.name == "shadowed"] == ["oxport_shadowed:pack"]


def test_the_scan_reads_entry_points_as_importlib_metadata_does(tmp_path, monkeypatch):
    """The scan finds the same groups, names and values as importlib.metadata, comments
    and spacing included, and each knows its distribution."""
    _dist_info(tmp_path, "3.0", "# a comment\n[oxport]\n  spaced  =  oxport_shadowed:pack \n"
                                "\n[oxport.ops]\naten.spaced=oxport_shadowed:pack\n"
                                "[console_scripts]\noxport-spaced = oxport_shadowed:main\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    plugins, declarations = INSTALLED_ENTRY_POINTS()
    for group, found in (("oxport", plugins), ("oxport.ops", declarations)):
        expected = {(ep.name, ep.value, ep.dist.name)
                    for ep in plugin_manager.importlib_metadata.entry_points(group=group)}
        assert {(ep.name, ep.value, ep.distribution) for ep in found} == expected
    assert ("spaced", "oxport_shadowed:pack") in {(ep.name, ep.value) for ep in plugins}


def test_a_declared_pack_loads_when_an_export_meets_one_of_its_ops():
    manager = plugins.load()
    nn, signal = info_of(manager, "oxport.nn"), info_of(manager, "oxport.signal")
    assert nn.on_demand and signal.on_demand and not nn.registered and "aten::stft" in signal.ops
    assert info_of(manager, "oxport.rnn").on_demand  # its capture kernels are a plugin apart
    assert not info_of(manager, "oxport.rnn_capture").on_demand
    oxport.export(torch.nn.Conv2d(3, 4, 3), (torch.randn(1, 3, 8, 8),), io.BytesIO())
    assert not signal.registered  # no op of it met, so not imported
    assert nn.registered["symbolics"] == len([e for e in manager.registry.entries()
                                              if e.provenance.plugin == "oxport.nn"])


def test_the_builtin_declarations_are_the_ops_each_pack_registers():
    import tomllib

    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    plugin_named = {value: name for name, value in entry_points["oxport"].items()}
    declared: dict[str, set[str]] = {}
    for op, value in entry_points["oxport.ops"].items():
        declared.setdefault(plugin_named[value], set()).add(plugin_manager.op_of_entry_name(op))
    manager = plugins.load()
    on_demand = {p.name for p in manager.plugins if p.on_demand}
    assert on_demand == set(declared), (
        "the installed oxport.ops entry points differ from pyproject.toml: "
        "pip install --no-deps -e . (after `oxport plugins --sync-pyproject`)")
    manager.load_deferred()  # raises if a pack registers what it does not declare
    for name in on_demand:
        assert set(info_of(manager, name).ops) == declared[name], name


def test_the_builtin_declarations_are_current():
    """pyproject.toml's oxport.ops block is what ``oxport plugins --sync-pyproject`` writes."""
    text = (ROOT / "pyproject.toml").read_text()
    assert plugin_manager.synced_pyproject(text) == text, (
        "pyproject.toml's oxport.ops entry points differ from the ops the packs register: run "
        "`oxport plugins --sync-pyproject` (then pip install --no-deps -e .)")


def test_a_declared_pack_registering_an_undeclared_op_is_an_error(install):
    pack = foo_pack()
    pack.symbolic("custom_ops::bar", since=9)(lambda g, x: x)
    install("my-pack", pack, declares=("custom_ops::foo_forward",))
    registry = plugins.load().registry
    with pytest.raises(RegistryError, match=r"'my-pack' .* loads on demand, .* registers "
                                            r"symbolics for custom_ops::bar, which it does not "
                                            r"declare \(`oxport plugins --sync-pyproject` "
                                            r"rewrites .*`oxport plugins --declare-ops my-pack`"):
        registry.lookup("custom_ops::foo_forward", 13)
    assert registry.lookup("custom_ops::bar", 13) is None  # nothing of it kept


def test_an_editable_packs_undeclared_op_loads_it_with_a_warning(install, caplog):
    """An op added to a pack of an editable install, not declared yet (or not reinstalled):
    an export meeting it still finds it, and the warning names the command to run."""
    pack = foo_pack()
    pack.symbolic("custom_ops::bar", since=9)(lambda g, x: x)
    install("my-pack", pack, declares=("custom_ops::foo_forward",), editable=True)
    manager = plugins.load()
    assert manager.registry.lookup("aten::neg", 13) is not None  # registered: loads nothing
    assert not info_of(manager, "my-pack").registered
    with caplog.at_level(logging.WARNING, logger="oxport.plugins"):
        entry = manager.registry.lookup("custom_ops::bar", 13)
    assert entry is not None and entry.provenance.plugin == "my-pack"
    assert "'my-pack' registers custom_ops::bar, which the installed oxport.ops entry points " \
        "of my-pack-dist do not declare" in caplog.text
    assert "run `oxport plugins --sync-pyproject`" in caplog.text
    assert manager.registry.lookup("custom_ops::foo_forward", 13) is not None


def test_an_op_nobody_declares_loads_only_the_editable_packs(install):
    """An installed (not editable) distribution's declarations are its contract."""
    install("my-pack", foo_pack(), declares=("custom_ops::foo_forward",))
    editable = OpPack("my-editable")
    editable.symbolic("custom_ops::baz", since=9)(lambda g, x: x)
    install("my-editable", editable, dist="editable-dist", declares=("custom_ops::baz",),
            editable=True)
    manager = plugins.load()
    assert manager.registry.lookup("custom_ops::nobody", 13) is None
    assert info_of(manager, "my-editable").registered == {"symbolics": 1}
    assert not info_of(manager, "my-pack").registered


def test_a_declared_packs_pass_runs_in_the_exports_that_load_the_pack(install):
    """A pass over what a pack's symbolics emit (the quantized pack's requantize) is
    registered when the pack loads, before the passes run."""
    plugin = types.SimpleNamespace(
        oxport_register_symbolics=oxport.hookimpl(
            lambda registry: registry.register("custom_ops::foo_forward", lambda g, x: x, 9)),
        oxport_register_passes=oxport.hookimpl(
            lambda registry: registry.register_pass("noop", lambda graph, context: None)))
    install("my-pack", plugin, declares=("custom_ops::foo_forward",))
    manager = plugins.load()
    assert "noop" not in [name for name, _, _ in manager.registry.passes]
    assert manager.registry.lookup("custom_ops::foo_forward", 13) is not None
    assert [p.plugin for name, _, p in manager.registry.passes if name == "noop"] == ["my-pack"]


def test_a_declared_pack_registering_a_fallback_is_an_error(install):
    plugin = types.SimpleNamespace(
        oxport_register_symbolics=oxport.hookimpl(
            lambda registry: registry.register("custom_ops::foo_forward", lambda g, x: x, 9)),
        oxport_register_fallbacks=oxport.hookimpl(
            lambda registry: registry.register_fallback("my-fallback", types.SimpleNamespace(
                preempt=False, keeps_autograd_functions=False, claims=lambda node: False,
                convert=lambda g, node, inputs: None))))
    install("my-pack", plugin, declares=("custom_ops::foo_forward",))
    manager = plugins.load()
    with pytest.raises(RegistryError, match=r"fallbacks and oxport_register_fallbacks, which "
                                            r"only a plugin loaded with every export can "
                                            r"provide"):
        manager.load_deferred()
    assert "my-fallback" not in manager.registry.fallbacks


def test_a_declared_pack_may_set_its_domains_default_version(install):
    pack = OpPack("my-pack", domains={"custom_domain": 2})
    pack.symbolic("custom_ops::foo_forward", since=9)(
        lambda g, x, y, a, b: g.op("custom_domain::Foo", x, y))
    install("my-pack", pack, declares=("custom_ops::foo_forward",))
    manager = plugins.load()
    assert "custom_domain" not in manager.registry.domain_versions
    assert manager.registry.lookup("custom_ops::foo_forward", 13) is not None
    assert manager.registry.domain_versions["custom_domain"] == 2


def test_a_declared_pack_and_a_builtin_both_load_for_their_op(install):
    pack = OpPack("my-neg")
    pack.symbolic("aten::neg", since=14, override=True)(
        lambda g, x: g.op("test_domain::MyNeg", x))
    install("my-neg", pack, declares=("aten::neg",))
    registry = plugins.load().registry
    assert registry.lookup("aten::neg", 13).layer == Layer.BUILTIN
    assert registry.lookup("aten::neg", 14).provenance.plugin == "my-neg"


def test_a_thread_asking_while_another_loads_the_pack_waits_for_it(install, monkeypatch):
    import threading
    import time

    install("my-pack", foo_pack(), declares=("custom_ops::foo_forward",))
    manager = plugins.load()
    entry_point, _, _ = manager._deferred["my-pack"]
    started = threading.Event()

    def slow_import(entry_point=entry_point):
        started.set()
        time.sleep(0.3)  # a pack whose import takes a while
        return entry_point.load()

    monkeypatch.setitem(manager._deferred, "my-pack", (
        types.SimpleNamespace(name=entry_point.name, value=entry_point.value, load=slow_import,
                              editable=False),
        *manager._deferred["my-pack"][1:]))
    found = {}
    first = threading.Thread(target=lambda: found.setdefault(
        "first", manager.registry.lookup("custom_ops::foo_forward", 13)))
    first.start()
    assert started.wait(5)
    found["second"] = manager.registry.lookup("custom_ops::foo_forward", 13)
    first.join()
    assert found["first"] is not None and found["second"] is found["first"]


def test_a_declaration_for_a_plugin_that_is_not_installed_is_reported(caplog):
    caplog.set_level(logging.WARNING, logger="oxport.plugins")
    plugin_manager.PluginManager().load([], [plugin_manager.FoundEntryPoint(
        EntryPoint("custom_ops.x", "missing:pack", plugin_manager.OPS_ENTRY_POINT_GROUP))])
    assert ("declares custom_ops.x in oxport.ops for missing:pack, which none of its oxport "
            "entry points names") in caplog.text


def test_an_installed_pack_is_loaded_listed_and_picked(install):
    install("my-pack", foo_pack(), dist="my-pack-dist", version="1.2")
    manager = plugins.load()
    info = info_of(manager, "my-pack")
    assert (info.distribution, info.version, info.layer, info.ok) == (
        "my-pack-dist", "1.2", Layer.INSTALLED, True)
    assert info.registered == {"symbolics": 1} and info.ops == ["custom_ops::foo_forward"]
    assert info.to_json()["layer"] == "installed"
    entry = manager.registry.lookup("custom_ops::foo_forward", 9)
    assert str(entry.provenance) == "my-pack (my-pack-dist 1.2)"
    assert manager.registry.lookup("custom_ops::foo_forward", 8) is None
    assert_foo_node(export_foo())


def test_the_raw_hook_form(install):
    install("my-hooks", """
        import oxport

        @oxport.symbolic_helper.parse_args("v", "v", "f", "i")
        def foo_forward(g, input1, input2, attr1, attr2):
            return g.op("custom_domain::Foo", input1, input2, attr1_f=attr1, attr2_i=attr2)

        @oxport.hookimpl
        def oxport_register_domains(registry):
            registry.register_domain("custom_domain", 2)

        @oxport.hookimpl
        def oxport_register_symbolics(registry):
            registry.register("custom_ops::foo_forward", foo_forward, since=9)
    """)
    manager = plugins.load()
    assert info_of(manager, "my-hooks").registered == {"symbolics": 1, "domains": 1}
    assert manager.registry.domain_versions["custom_domain"] == 2
    define_foo_forward()
    model = export_proto(FooModel(), (torch.randn(2, 3), torch.randn(2, 3)), opset_version=9)
    assert_foo_node(model)  # version 2 from the plugin


def test_reset_looks_for_installed_plugins_again(install, monkeypatch):
    first = plugins.load()
    assert plugins.load() is first
    plugins.reset()
    assert plugins.load() is first  # nothing changed: the same manager, the same entries
    install("my-pack", foo_pack())
    assert plugins.load().registry.lookup("custom_ops::foo_forward", 9) is None  # cached
    plugins.reset()
    second = plugins.load()
    assert second is not first
    assert second.registry.lookup("custom_ops::foo_forward", 9) is not None
    # Uninstalled again: the first manager is back, so entries collected before (by the
    # op-test runner, say) are still the ones an export uses.
    monkeypatch.setattr(plugin_manager, "installed_entry_points", INSTALLED_ENTRY_POINTS)
    plugins.reset()
    assert plugins.load() is first


def test_reset_reloads_a_selection_with_a_broken_plugin(broken_import):
    broken = plugins.load(strict=False)
    plugins.reset()
    assert plugins.load(strict=False) is not broken


# -- broken plugins -------------------------------------------------------------------------
@pytest.fixture
def broken_import(install, tmp_path, monkeypatch):
    (tmp_path / "fake_oxport_broken_import.py").write_text(
        "raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    install("broken-pack", dist="broken-dist", version="0.3",
            value="fake_oxport_broken_import:pack")
    install("my-pack", foo_pack())


def test_a_broken_import_is_reported_and_the_others_load(broken_import, caplog):
    with caplog.at_level(logging.WARNING, logger="oxport.plugins"):
        manager = plugins.load(strict=False)
    info = info_of(manager, "broken-pack")
    assert not info.ok and info.error == "import failed: RuntimeError: boom at import"
    assert (info.distribution, info.version) == ("broken-dist", "0.3")
    (record,) = [r for r in caplog.records if "broken-pack" in r.getMessage()]
    message = record.getMessage()
    for part in ("'broken-pack'", "broken-dist", "RuntimeError: boom at import",
                 "the other plugins still work", "OXPORT_DISABLE_PLUGINS=broken-pack"):
        assert part in message
    assert info_of(manager, "my-pack").ok
    assert all(p.ok for p in manager.plugins if p.distribution == "oxport")
    assert manager.registry.lookup("aten::neg", 20).provenance.distribution == "oxport"


def test_an_export_still_works_next_to_a_broken_plugin(broken_import, monkeypatch):
    monkeypatch.delenv("OXPORT_STRICT_PLUGINS")
    assert_foo_node(export_foo())


def test_strict_mode_raises_for_a_broken_plugin(broken_import, monkeypatch):
    with pytest.raises(PluginError) as info:
        plugins.load()  # OXPORT_STRICT_PLUGINS=1
    assert "'broken-pack' from broken-dist is broken (import failed: RuntimeError: boom" in str(
        info.value)
    assert "strict mode (OXPORT_STRICT_PLUGINS) stops the load here" in str(info.value)
    assert "the other plugins still work" not in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(PluginError, match="broken-pack"):
        export_foo()
    monkeypatch.setenv("OXPORT_STRICT_PLUGINS", "0")
    assert not info_of(plugins.load(), "broken-pack").ok
    assert_foo_node(export_foo())
    with pytest.raises(PluginError, match="broken-pack"):
        plugins.load(strict=True)


TORCH_STYLE_PACK = """
    import oxport
    import torch.onnx.symbolic_opset9 as opset9

    plugin = oxport.OpPack("torch-style")

    @plugin.symbolic("aten::elu", since=9, override=True)
    def elu(g, x, alpha, scale, input_scale):
        return opset9.elu(g, x, alpha, scale, input_scale)
"""


def test_a_symbolic_written_for_torch_onnx_fails_where_it_is_used(install):
    """A pack's symbolics are vetted when first looked up: a torch.onnx-style one fails the
    exports that need it, naming the import to change, and no other export."""
    install("torch-style", TORCH_STYLE_PACK, value="fake_oxport_torch_style:plugin")
    relu = oxport.export(torch.nn.ReLU(), (torch.randn(2, 3),), io.BytesIO())
    assert [n.op_type for n in relu.model_proto.graph.node] == ["Relu"]
    with pytest.raises(RegistryError, match=r"aten::elu: the symbolic 'elu' from torch-style "
                                            r"\(torch-style-dist 1.0\) cannot run in oxport\. "
                                            r"It uses torch.onnx.symbolic_opset9"):
        oxport.export(torch.nn.ELU(), (torch.randn(2, 3),), io.BytesIO())
    # Hidden by a runtime registration, it is never used, so never in the way.
    oxport.register_custom_op_symbolic("aten::elu", lambda g, x, *_: g.op("Elu", x), 9)
    try:
        elu = oxport.export(torch.nn.ELU(), (torch.randn(2, 3),), io.BytesIO())
        assert [n.op_type for n in elu.model_proto.graph.node] == ["Elu"]
    finally:
        oxport.unregister_custom_op_symbolic("aten::elu", 9)
    manager = plugins.load(strict=False)
    assert info_of(manager, "torch-style").ok
    manager.check_symbolics()  # what `oxport plugins --check` reports
    assert "symbolic check failed: oxport.errors.RegistryError: aten::elu" in info_of(
        manager, "torch-style").error
    assert manager.registry.lookup("aten::elu", 9).provenance.plugin == "oxport.activations"


def test_a_hook_that_raises_is_reported_and_its_registrations_rolled_back(install):
    install("half-done", """
        import oxport

        def relu(g, x):
            return g.op("Relu", x)

        @oxport.hookimpl
        def oxport_register_symbolics(registry):
            registry.register("custom_ops::half_done", relu, since=9)
            raise ValueError("boom in hook")
    """, dist="half-dist")
    install("my-pack", foo_pack())
    manager = plugins.load(strict=False)
    info = info_of(manager, "half-done")
    assert info.error == "oxport_register_symbolics failed: ValueError: boom in hook"
    assert manager.registry.lookup("custom_ops::half_done", 20) is None
    assert manager.pm.get_plugin("half-done") is None
    assert info_of(manager, "my-pack").ok
    with pytest.raises(PluginError, match=r"'half-done' from half-dist is broken .*boom in hook"):
        plugins.load(strict=True)


def test_a_hook_with_wrong_arguments_is_reported(install):
    install("bad-args", """
        import oxport

        @oxport.hookimpl
        def oxport_register_symbolics(reg):
            pass
    """)
    info = info_of(plugins.load(strict=False), "bad-args")
    assert info.error.startswith("register failed:") and "reg" in info.error


MISSPELLED = """
    import oxport

    @oxport.hookimpl
    def oxport_register_symbolic(registry):
        pass
"""


def test_a_misspelled_hook_is_caught(install):
    install("typo", MISSPELLED, dist="typo-dist")
    with pytest.raises(PluginError) as info:
        plugins.load()
    message = str(info.value)
    assert "'typo' from typo-dist is broken (hook check failed" in message
    assert "'oxport_register_symbolic' is not an oxport hook" in message
    assert "did you mean 'oxport_register_symbolics'?" in message
    assert "Valid hook names: " + ", ".join(plugin_manager.hook_names()) in message
    manager = plugins.load(strict=False)
    assert not info_of(manager, "typo").ok
    assert manager.registry.lookup("aten::neg", 20) is not None  # the others load


def test_check_pending_lists_the_valid_hook_names():
    manager = plugins.PluginManager(plugins.PluginSelection(autoload=False))
    module = types.ModuleType("typo_module")
    exec(textwrap.dedent(MISSPELLED), module.__dict__)  # noqa: S102
    manager.pm.register(module, name="typo")
    with pytest.raises(PluginError) as info:
        manager.check_pending()
    message = str(info.value)
    assert "unknown hook 'oxport_register_symbolic'" in message
    assert "did you mean 'oxport_register_symbolics'?" in message
    for hook in ("oxport_register_symbolics", "oxport_register_domains",
                 "oxport_register_fallbacks", "oxport_register_passes"):
        assert hook in message


def test_a_misspelled_unmarked_hook_is_caught(install):
    """Without @oxport.hookimpl pluggy never sees it: oxport still reports it."""
    install("typo", """
        def oxport_register_symbol(registry):
            pass
    """, dist="typo-dist")
    with pytest.raises(PluginError) as info:
        plugins.load()
    message = str(info.value)
    assert "'typo' from typo-dist is broken (hook check failed" in message
    assert "'oxport_register_symbol' is not an oxport hook (did you mean " \
        "'oxport_register_symbolics'? see oxport.hookspecs) nor marked with @oxport.hookimpl" \
        in message


def test_an_unmarked_hook_function_is_caught(install):
    install("unmarked", """
        def oxport_register_symbolics(registry):
            pass
    """)
    with pytest.raises(PluginError, match="oxport_register_symbolics is not marked with "
                                          r"@oxport.hookimpl, so it never runs"):
        plugins.load()


# -- conflicts and shadowing -------------------------------------------------------------
def test_two_installed_packs_claiming_one_op_conflict_at_load_time(install, monkeypatch):
    install("pack-one", foo_pack("pack-one"), dist="dist-one")
    install("pack-two", foo_pack("pack-two"), dist="dist-two")
    monkeypatch.setenv("OXPORT_STRICT_PLUGINS", "0")  # conflicts are errors in any mode
    with pytest.raises(RegistryError) as info:
        plugins.load()
    message = str(info.value)
    assert "custom_ops::foo_forward is claimed by both" in message
    assert "pack-one (dist-one 1.0)" in message and "pack-two (dist-two 1.0)" in message
    assert "OXPORT_DISABLE_PLUGINS=" in message and "override=True" in message
    with pytest.raises(RegistryError, match="claimed by both"):
        export_foo()
    # Resolved by blocking one of them ...
    entry = plugins.load(block=["pack-two"]).registry.lookup("custom_ops::foo_forward", 9)
    assert entry.provenance.plugin == "pack-one"


def test_override_true_resolves_a_conflict(install):
    install("pack-one", foo_pack("pack-one"), dist="dist-one")
    install("pack-two", foo_pack("pack-two", override=True), dist="dist-two")
    entry = plugins.load().registry.lookup("custom_ops::foo_forward", 9)
    assert entry.provenance.plugin == "pack-two" and entry.override


@pytest.mark.parametrize("override", [False, True])
def test_an_installed_pack_shadowing_a_builtin(install, override):
    pack = OpPack("my-neg")

    @pack.symbolic("aten::neg", since=14, override=override)
    def neg(g, x):
        return g.op("test_domain::MyNeg", x)

    install("my-neg", pack)  # listed before the built-ins: they still load first
    if override:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error", ShadowingWarning)
            registry = plugins.load().registry
    else:
        with pytest.warns(ShadowingWarning, match=r"my-neg \(my-neg-dist 1.0\) shadows aten::neg "
                                                  r"from oxport\.\w+ \(oxport 0") as caught:
            registry = plugins.load().registry
        # It points at the pack's symbolic, where the fix (override=True) goes.
        (warning,) = caught
        assert (warning.filename, warning.lineno) == (__file__, neg.__code__.co_firstlineno)
    assert registry.lookup("aten::neg", 13).layer == Layer.BUILTIN
    assert registry.lookup("aten::neg", 14).provenance.plugin == "my-neg"
    assert registry.lookup("aten::neg", 26).provenance.plugin == "my-neg"


def test_duplicate_entry_point_names_from_two_distributions(install):
    install("my-pack", foo_pack(), dist="dist-one")
    install("my-pack", foo_pack(), dist="dist-two")
    with pytest.raises(PluginError, match=r"Two plugins are named 'my-pack': .* from dist-\w+ and "
                                          r".* from dist-\w+\. Uninstall one"):
        plugins.load()


def test_one_distribution_seen_twice_loads_once(install):
    install("my-pack", foo_pack(), dist="my-pack-dist")
    install("my-pack", foo_pack(), dist="my-pack-dist")
    assert len([p for p in plugins.load().plugins if p.name == "my-pack"]) == 1


def test_an_op_below_its_lowest_since_names_the_minimum_opset(install):
    install("my-pack", foo_pack(since=14))
    with pytest.raises(UnsupportedOperatorError) as info:
        export_foo(opset=13)
    message = str(info.value)
    assert "custom_ops::foo_forward" in message
    assert "supported from opset 14; export with opset_version=14 or higher" in message
    assert_foo_node(export_foo(opset=14))


# -- loading controls ---------------------------------------------------------------------
def loaded(manager) -> set[str]:
    return {p.name for p in manager.plugins}


def test_autoload_switch(install, monkeypatch):
    install("my-pack", foo_pack())
    monkeypatch.setenv("OXPORT_DISABLE_PLUGIN_AUTOLOAD", "1")
    manager = plugins.load()
    assert manager.plugins == [] and manager.registry.names() == []
    with pytest.raises(UnsupportedOperatorError, match="custom_ops::foo_forward"):
        export_foo()
    # Explicitly passed plugins and an allow-list still load.
    extra = foo_pack("extra-pack")
    assert loaded(plugins.load(extra=[extra])) == {"extra-pack"}
    assert loaded(plugins.load(allow=["my-pack"])) == {"my-pack"}
    assert_foo_node(export_foo(plugins=["my-pack", "oxport.prim"]))
    # The argument wins over the environment.
    assert "oxport.nn" in loaded(plugins.load(autoload=True))
    assert_foo_node(export_foo(autoload_plugins=True))
    monkeypatch.delenv("OXPORT_DISABLE_PLUGIN_AUTOLOAD")
    assert plugins.load(autoload=False).plugins == []
    with pytest.raises(UnsupportedOperatorError, match="custom_ops::foo_forward"):
        export_foo(autoload_plugins=False)


def test_allow_list(install, monkeypatch):
    install("my-pack", foo_pack(), dist="my-pack-dist")
    monkeypatch.setenv("OXPORT_PLUGINS", "my-pack, oxport.prim")
    assert loaded(plugins.load()) == {"my-pack", "oxport.prim"}
    assert loaded(plugins.load(allow=["oxport.nn"])) == {"oxport.nn"}  # the argument wins
    assert loaded(plugins.load(allow="oxport.nn,my-pack")) == {"oxport.nn", "my-pack"}
    assert_foo_node(export_foo())
    assert_foo_node(export_foo(plugins=["my-pack", "oxport.prim"]))


def test_allow_list_with_an_unknown_name(install, monkeypatch):
    install("my-pack", foo_pack(), dist="my-pack-dist")
    monkeypatch.setenv("OXPORT_PLUGINS", "my-pack,nope")
    with pytest.raises(PluginError) as info:
        plugins.load()
    message = str(info.value)
    assert "Plugins nope were asked for" in message and "Installed plugins: " in message
    assert "my-pack (my-pack-dist)" in message and "oxport.nn (oxport)" in message
    with pytest.raises(PluginError, match="Plugins also-nope were asked for"):
        export_foo(plugins=["my-pack", "also-nope"])
    with pytest.raises(PluginError, match="plugin names are non-empty strings"):
        plugins.load(allow=["my-pack", 3])


def test_block_list(install, monkeypatch, caplog):
    install("my-pack", foo_pack())
    monkeypatch.setenv("OXPORT_DISABLE_PLUGINS", "my-pack")
    manager = plugins.load()
    assert "my-pack" not in loaded(manager) and "oxport.nn" in loaded(manager)
    assert manager.registry.lookup("custom_ops::foo_forward", 20) is None
    with pytest.raises(UnsupportedOperatorError, match="custom_ops::foo_forward"):
        export_foo()
    # The argument adds to the environment's list.
    both = plugins.load(block=["oxport.nn"])
    assert not {"my-pack", "oxport.nn"} & loaded(both) and "oxport.prim" in loaded(both)
    monkeypatch.delenv("OXPORT_DISABLE_PLUGINS")
    assert_foo_node(export_foo())
    with pytest.raises(UnsupportedOperatorError, match="custom_ops::foo_forward"):
        export_foo(disable_plugins=["my-pack"])
    # A blocked name that is not installed is only a warning.
    with caplog.at_level(logging.WARNING, logger="oxport.plugins"):
        plugins.load(block=["not-installed"])
    assert "not installed: not-installed" in caplog.text


def test_blocking_an_overriding_pack_restores_the_builtin(install):
    pack = OpPack("my-neg")
    pack.symbolic("aten::neg", since=7, override=True)(lambda g, x: g.op("test_domain::MyNeg", x))
    install("my-neg", pack)
    assert plugins.load().registry.lookup("aten::neg", 20).provenance.plugin == "my-neg"
    blocked = plugins.load(block=["my-neg"]).registry.lookup("aten::neg", 20)
    assert blocked.layer == Layer.BUILTIN


# -- the third-party contract, pip-installed for real -------------------------------------------
def run(*command, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


FORMS = {
    # form: (distribution, entry-point line, module)
    "oppack": ("my-pack", 'my-pack = "my_pack:pack"', "my_pack"),
    "hooks": ("my-hooks", 'my-hooks = "my_hooks"', "my_hooks"),
}


@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_pip_installed_third_party_distribution(form, tmp_path, monkeypatch):
    dist, entry_point_line, module = FORMS[form]
    plugin = entry_point_line.split(" = ")[0]
    source = tmp_path / "src"
    shutil.copytree(THIRDPARTY, source)
    pyproject = (source / "pyproject.toml").read_text()
    pyproject = pyproject.replace('name = "my-pack"', f'name = "{dist}"')
    pyproject = pyproject.replace('my-pack = "my_pack:pack"', entry_point_line)
    (source / "pyproject.toml").write_text(pyproject)
    python, purelib = layered_venv(tmp_path / "venv")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", source,
        cwd=tmp_path)
    monkeypatch.syspath_prepend(str(purelib))
    monkeypatch.delitem(sys.modules, module, raising=False)
    plugins.reset()

    # `oxport ops --json` and `oxport plugins --check --json` list it with its distribution.
    rows = json.loads(run(python, "-m", "oxport", "ops", "--json", cwd=tmp_path).stdout)
    assert [r for r in rows if r["op"] == "custom_ops::foo_forward"] == [{
        "op": "custom_ops::foo_forward", "since": 9, "until": None, "provider": plugin,
        "distribution": dist, "version": "0.1.0", "layer": "installed", "override": False,
        "shadows": [],
    }]
    infos = json.loads(run(python, "-m", "oxport", "plugins", "--check", "--json",
                           cwd=tmp_path).stdout)
    (info,) = [i for i in infos if i["name"] == plugin]
    assert (info["distribution"], info["error"], info["ops"]) == (
        dist, None, ["custom_ops::foo_forward"])

    # The registry of this process picks it, and an export uses it.
    entry = testing.registry_view().lookup("custom_ops::foo_forward", 9)
    assert (entry.provenance.plugin, entry.provenance.distribution, entry.layer) == (
        plugin, dist, Layer.INSTALLED)
    assert Path(sys.modules[module].__file__).parent == purelib
    assert_foo_node(export_foo(opset=13))

    # Uninstalling removes the op.
    run(python, "-m", "pip", "uninstall", "-y", dist, cwd=tmp_path)
    plugins.reset()
    assert testing.registry_view().lookup("custom_ops::foo_forward", 9) is None
    rows = json.loads(run(python, "-m", "oxport", "ops", "--json", cwd=tmp_path).stdout)
    assert not [r for r in rows if r["op"] == "custom_ops::foo_forward"]
    with pytest.raises(UnsupportedOperatorError, match="custom_ops::foo_forward"):
        export_foo()
    sys.modules.pop(module, None)


# -- model I/O types ---------------------------------------------------------------------
class Interval:
    """A third party's argument type: two tensors that travel together."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        self.low, self.high = low, high


class IntervalModel(torch.nn.Module):
    def forward(self, span: Interval, x: torch.Tensor) -> Interval:
        return Interval(torch.minimum(span.low, x), torch.maximum(span.high, x))


INTERVAL_PLUGIN = f"""
import oxport
import {__name__} as where

@oxport.hookimpl
def oxport_register_io_types(registry):
    registry.register_io_type(
        "{__name__}.Interval",
        lambda span: ([("low", span.low), ("high", span.high)], None),
        lambda children, context: where.Interval(*children))
"""


@pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])
def test_a_plugin_declares_how_its_type_crosses_the_model_boundary(install, dynamo):
    install("interval", INTERVAL_PLUGIN, dist="interval-io")
    span = Interval(torch.zeros(3), torch.ones(3))
    x = torch.tensor([-1.0, 0.5, 2.0])
    model = export_proto(IntervalModel(), (span, x), dynamo=dynamo)
    assert [i.name for i in model.graph.input] == ["span.low", "span.high", "x"]
    assert [o.name for o in model.graph.output] == ["low", "high"]
    low, high = _run(model, [span.low, span.high, x])
    assert low.tolist() == [-1.0, 0.0, 0.0] and high.tolist() == [1.0, 1.0, 2.0]
    info = {p.name: p for p in plugins.load().plugins}["interval"]
    assert info.registered == {"I/O types": 1}


def _run(model: onnx.ModelProto, feeds: list[torch.Tensor]) -> list:
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {n: t.numpy() for n, t in zip(names, feeds)})


class Undeclared:
    """A type no plugin declares (Interval is known to torch's pytree once a test used it)."""

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


def test_an_undeclared_output_type_names_the_hook():
    class Returns(torch.nn.Module):
        def forward(self, x):
            return Undeclared(x)

    with pytest.raises(oxport.OnnxExporterError, match="oxport_register_io_types.*Undeclared"):
        export_proto(Returns(), (torch.ones(2),))


def test_an_io_type_is_named_by_its_import_path(install):
    install("bad-io", """
import oxport

@oxport.hookimpl
def oxport_register_io_types(registry):
    registry.register_io_type("Interval", lambda v: ([], None), lambda c, x: None)
""")
    with pytest.raises(RegistryError, match="import path"):
        plugins.load()
