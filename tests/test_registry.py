"""The symbolic registry: names, opset ladders, layers, conflicts, runtime registrations."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import warnings

import pytest
import torch

import oxport
from oxport import plugins, testing
from oxport.errors import InvalidExportArgumentError, RegistryError
from oxport.registry import (
    Layer,
    OpCase,
    OpPack,
    Provenance,
    Registrar,
    ShadowingWarning,
    SymbolicEntry,
    SymbolicRegistry,
    newest_known_opset,
)
from oxport.types import MAX_OPSET, MIN_OPSET

BUILTIN = Provenance("oxport.demo", "oxport", "0.1.0", Layer.BUILTIN)
PACK_A = Provenance("pack-a", "dist-a", "1.0", Layer.INSTALLED)
PACK_B = Provenance("pack-b", "dist-b", "2.0", Layer.INSTALLED)
RUNTIME = Provenance("register_custom_op_symbolic", None, None, Layer.RUNTIME)


def sym_a(g, x):
    return g.op("A", x)


def sym_b(g, x):
    return g.op("B", x)


def sym_c(g, x):
    return g.op("C", x)


def add(registry: SymbolicRegistry, provenance: Provenance, name: str, fn, since: int,
        override: bool = False) -> None:
    Registrar(registry, provenance).register(name, fn, since, override=override)


# -- bad input ---------------------------------------------------------------------
@pytest.mark.parametrize("name, problem", [
    ("relu", "no namespace"),
    ("aten:relu", "no namespace"),
    ("::relu", "not of the form"),
    ("aten::", "not of the form"),
    ("aten::relu.", "not of the form"),
    ("aten::re lu", "not of the form"),
    ("aten::relu::x", "not of the form"),
])
def test_malformed_names_name_the_problem_and_the_fix(name, problem):
    pack = OpPack("p")
    with pytest.raises(RegistryError) as info:
        pack.symbolic(name, since=9)
    message = str(info.value)
    assert repr(name) in message and problem in message
    assert "'namespace::op'" in message and "'aten::elu'" in message
    with pytest.raises(RegistryError, match="Malformed op name"):
        Registrar(SymbolicRegistry(), PACK_A).register(name, sym_a, 9)


def test_non_string_name():
    with pytest.raises(RegistryError, match=r"Op names are strings, not int \(3\)"):
        OpPack("p").symbolic(3)


@pytest.mark.parametrize("name", ["aten::elu", "aten::max.other", "custom_ops::foo_forward",
                                  "quantized::conv2d", "com.microsoft::Gelu"])
def test_qualified_names_accepted(name):
    pack = OpPack("p")
    pack.symbolic(name, since=9)(sym_a)
    assert pack.symbolics() == [(name, sym_a, 9, False, False)]


@pytest.mark.parametrize("since", [0, 1, MIN_OPSET - 1, MAX_OPSET + 1, "newest+1", "9", 9.0,
                                   True, None])
def test_since_outside_the_exported_opsets(since):
    """Only opsets oxport exports: a variant from a newer opset the installed onnx knows would
    never serve an export."""
    value = newest_known_opset() + 1 if since == "newest+1" else since
    with pytest.raises(RegistryError) as info:
        OpPack("p").symbolic("aten::elu", since=value)
    message = str(info.value)
    assert f"since={value!r}" in message
    assert f"from {MIN_OPSET}" in message and f"to {MAX_OPSET}" in message
    with pytest.raises(RegistryError, match="is not a supported opset"):
        Registrar(SymbolicRegistry(), PACK_A).register("aten::elu", sym_a, value)


def test_since_bounds_accepted():
    pack = OpPack("p")
    pack.symbolic("aten::elu", since=MIN_OPSET)(sym_a)
    pack.symbolic("aten::elu", since=MAX_OPSET)(sym_b)
    assert [s[2] for s in pack.symbolics()] == [MIN_OPSET, MAX_OPSET]


@pytest.mark.parametrize("fn", [None, "sym_a", 42])
def test_non_callable_symbolics(fn):
    with pytest.raises(RegistryError, match=r"aten::elu: the symbolic from pack 'p' is .*"
                                            r"not callable: register a function fn\(g"):
        OpPack("p").symbolic("aten::elu", since=9)(fn)
    with pytest.raises(RegistryError, match=r"from pack-a \(dist-a 1.0\) .* not callable"):
        Registrar(SymbolicRegistry(), PACK_A).register("aten::elu", fn, 9)
    with pytest.raises(RegistryError, match="not callable"):
        oxport.register_custom_op_symbolic("custom_ops::never", fn, 9)


def test_runtime_registration_validates_like_a_pack():
    with pytest.raises(RegistryError, match="no namespace"):
        oxport.register_custom_op_symbolic("foo_forward", sym_a, 9)
    for since in (0, MAX_OPSET + 1, newest_known_opset() + 1):
        with pytest.raises(RegistryError, match=f"since={since}"):
            oxport.register_custom_op_symbolic("custom_ops::foo_forward", sym_a, since)
    assert plugins.runtime_registry().min_opset("custom_ops::foo_forward") is None


def test_case_names_are_validated():
    with pytest.raises(RegistryError, match="Malformed op name"):
        OpPack("p").case("elu", torch.nn.ELU(), (2, 3))


# -- the version ladder --------------------------------------------------------------
def test_since_resolution_picks_the_highest_since_not_above_the_target():
    registry = SymbolicRegistry()
    add(registry, PACK_A, "aten::op", sym_a, 9)
    add(registry, PACK_A, "aten::op", sym_c, 13)  # out of order on purpose
    add(registry, PACK_A, "aten::op", sym_b, 11)
    assert registry.lookup("aten::op", 8) is None
    for opset, fn in [(9, sym_a), (10, sym_a), (11, sym_b), (12, sym_b), (13, sym_c),
                      (newest_known_opset(), sym_c)]:
        assert registry.lookup("aten::op", opset).fn is fn, opset
    # Each variant is sealed by the provider's next one.
    assert [(e.since, e.until) for e in registry.entries("aten::op")] == [
        (9, 10), (11, 12), (13, None)]
    assert registry.min_opset("aten::op") == 9
    assert registry.min_opset("aten::other") is None


def test_ladders_of_different_providers_do_not_seal_each_other():
    registry = SymbolicRegistry()
    add(registry, BUILTIN, "aten::op", sym_a, 7)
    add(registry, BUILTIN, "aten::op", sym_b, 13)
    add(registry, PACK_A, "aten::op", sym_c, 11, override=True)
    sealed = {(e.provenance.plugin, e.since): e.until for e in registry.entries("aten::op")}
    assert sealed == {("oxport.demo", 7): 12, ("oxport.demo", 13): None, ("pack-a", 11): None}


def test_removing_a_variant_unseals_the_previous_one():
    registry = SymbolicRegistry()
    add(registry, RUNTIME, "custom::op", sym_a, 9, override=True)
    add(registry, RUNTIME, "custom::op", sym_b, 14, override=True)
    assert registry.lookup("custom::op", 20).fn is sym_b
    assert registry.remove("custom::op", 14)
    assert registry.lookup("custom::op", 20).fn is sym_a
    assert not registry.remove("custom::op", 14)


def test_one_provider_cannot_register_the_same_since_twice():
    registry = SymbolicRegistry()
    add(registry, PACK_A, "aten::op", sym_a, 9)
    with pytest.raises(RegistryError, match=r"registered twice with since=9 by pack-a"):
        add(registry, PACK_A, "aten::op", sym_b, 9)


def test_runtime_layer_replaces_its_own_registration():
    registry = SymbolicRegistry()
    add(registry, RUNTIME, "custom::op", sym_a, 9, override=True)
    add(registry, RUNTIME, "custom::op", sym_b, 9, override=True)
    assert [e.fn for e in registry.entries("custom::op")] == [sym_b]


# -- layers --------------------------------------------------------------------------
def test_a_higher_layer_wins_at_every_opset_it_covers():
    registry = SymbolicRegistry()
    add(registry, BUILTIN, "aten::op", sym_a, 7)
    add(registry, BUILTIN, "aten::op", sym_b, 13)
    add(registry, PACK_A, "aten::op", sym_c, 11, override=True)
    picks = {opset: registry.lookup("aten::op", opset).fn for opset in range(7, 27)}
    assert all(picks[o] is sym_a for o in range(7, 11))
    # The installed pack wins at 11 and every opset above, even past the built-in's
    # newer variant at 13 (torch.onnx's overrides held only at their exact opset).
    assert all(picks[o] is sym_c for o in range(11, 27))


def test_installed_shadowing_builtin_without_override_warns():
    registry = SymbolicRegistry()
    add(registry, BUILTIN, "aten::op", sym_a, 7)
    with pytest.warns(ShadowingWarning, match=r"pack-a \(dist-a 1.0\) shadows aten::op from "
                                              r"oxport.demo \(oxport 0.1.0\); pass override=True"):
        add(registry, PACK_A, "aten::op", sym_b, 9)
    assert registry.lookup("aten::op", 9).fn is sym_b
    assert registry.lookup("aten::op", 8).fn is sym_a


def test_the_registry_asks_its_loader_before_it_answers():
    """The loader given at construction loads what serves an op before a lookup; the
    ``registered`` questions load nothing."""
    asked = []

    class Loader:
        def load_serving(self, op):
            asked.append(op)
            if op == "aten::op" and not registry.registers(op):
                add(registry, PACK_A, "aten::op", sym_a, 9)

    registry = SymbolicRegistry(loader=Loader())
    assert registry.registered_names() == [] and asked == []
    assert registry.lookup("aten::op", 9).fn is sym_a and asked == ["aten::op"]
    assert registry.registered_names() == ["aten::op"] and registry.registers("aten::op")
    provenance = registry.lookup("aten::op", 9).provenance
    assert registry.entries_from(provenance) == [registry.lookup("aten::op", 9)]
    assert registry.names() == ["aten::op"] and asked[-1] is None


def test_override_true_shadows_silently():
    registry = SymbolicRegistry()
    add(registry, BUILTIN, "aten::op", sym_a, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add(registry, PACK_A, "aten::op", sym_b, 9, override=True)
    entry = registry.lookup("aten::op", 20)
    assert entry.fn is sym_b and entry.override
    assert registry.shadowed_by(entry) == [registry.lookup("aten::op", 7)]


def test_two_packs_of_one_layer_conflict_naming_both():
    registry = SymbolicRegistry()
    add(registry, PACK_A, "custom_ops::foo_forward", sym_a, 9)
    with pytest.raises(RegistryError) as info:
        add(registry, PACK_B, "custom_ops::foo_forward", sym_b, 13)
    message = str(info.value)
    assert "custom_ops::foo_forward" in message
    assert "pack-a (dist-a 1.0)" in message and "pack-b (dist-b 2.0)" in message
    assert "OXPORT_DISABLE_PLUGINS=pack-b" in message and "override=True" in message
    # The rejected registration left nothing behind.
    assert [e.provenance for e in registry.entries()] == [PACK_A]


def test_override_true_resolves_a_same_layer_conflict():
    registry = SymbolicRegistry()
    add(registry, PACK_A, "custom_ops::foo_forward", sym_a, 9)
    add(registry, PACK_B, "custom_ops::foo_forward", sym_b, 9, override=True)
    assert registry.lookup("custom_ops::foo_forward", 9).fn is sym_b
    # ... but two overrides of one layer are a conflict again.
    third = Provenance("pack-c", "dist-c", "3.0", Layer.INSTALLED)
    with pytest.raises(RegistryError, match=r"pack-b \(dist-b 2.0\) and pack-c \(dist-c 3.0\)"):
        add(registry, third, "custom_ops::foo_forward", sym_c, 9, override=True)


def test_discard_forgets_everything_a_provider_registered():
    registry = SymbolicRegistry()
    add(registry, PACK_A, "aten::op", sym_a, 9)
    add(registry, PACK_A, "aten::op", sym_b, 13)
    with pytest.warns(ShadowingWarning, match="pack-a .* shadows aten::op from oxport.demo"):
        add(registry, BUILTIN, "aten::op", sym_c, 7)  # the lower layer second: warned too
    registrar = Registrar(registry, PACK_A)
    registrar.register_domain("custom_domain", 2)
    registrar.add_case(OpCase("aten::op", torch.nn.Identity(), ((2,),)))
    registrar.add_cases(lambda: pytest.fail("the cases of a discarded provider were declared"))
    registrar.register_pass("noop", lambda graph, context: None)
    registrar.register_capture_kernel("aten::op", torch.empty_like)
    registry.discard(PACK_A)
    assert [e.provenance for e in registry.entries()] == [BUILTIN]
    assert registry.lookup("aten::op", 20).fn is sym_c
    assert not registry.domain_versions and not registry.cases and not registry.passes
    assert not registry.capture_kernels


def test_capture_kernels_are_checked_when_registered():
    registry = SymbolicRegistry()
    with pytest.raises(RegistryError, match="aten::gru.input from pack-a .* is not callable"):
        Registrar(registry, PACK_A).register_capture_kernel("aten::gru.input", "gru")
    with pytest.raises(RegistryError, match="Malformed op name 'gru'"):
        Registrar(registry, PACK_A).register_capture_kernel("gru", torch.empty_like)
    Registrar(registry, PACK_A).register_capture_kernel("aten::gru.input", torch.empty_like)
    with pytest.raises(RegistryError, match="capture kernels from both pack-a .* and pack-b"):
        Registrar(registry, PACK_B).register_capture_kernel("aten::gru.input", torch.zeros_like)



def test_a_packs_cases_module_is_imported_only_when_cases_are_asked_for(tmp_path, monkeypatch):
    (tmp_path / "lazy_demo_pack.py").write_text(
        "from oxport import OpPack\n"
        "pack = OpPack('lazy-demo', cases='lazy_demo_cases')\n"
        "pack.symbolic('aten::relu', since=14)(lambda g, x: g.op('Relu', x))\n")
    (tmp_path / "lazy_demo_cases.py").write_text(
        "import torch\nfrom lazy_demo_pack import pack\n"
        "pack.case('aten::relu', torch.relu, (2, 3))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("lazy_demo_pack", "lazy_demo_cases"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    pack = importlib.import_module("lazy_demo_pack").pack
    registry = SymbolicRegistry()
    pack.register_into(Registrar(registry, PACK_A))
    assert registry.lookup("aten::relu", 14) is not None
    assert "lazy_demo_cases" not in sys.modules
    (case,) = registry.cases
    assert (case.op, case.provenance) == ("aten::relu", PACK_A)
    assert "lazy_demo_cases" in sys.modules
    assert registry.cases == [case]  # declared once


def test_a_cases_module_that_fails_names_its_pack():
    registry = SymbolicRegistry()
    OpPack("lazy-broken", cases="oxport_no_such_cases_module").register_into(
        Registrar(registry, PACK_A))
    with pytest.raises(RegistryError, match=r"test cases of pack-a \(dist-a 1.0\) could not be "
                       r"declared: ModuleNotFoundError: No module named "
                       r"'oxport_no_such_cases_module'"):
        registry.cases
    with pytest.raises(RegistryError, match="could not be declared"):  # every time it is asked
        registry.cases


def test_exporting_builds_no_test_case():
    code = ("import sys, torch, oxport; oxport.export(torch.nn.Conv2d(3, 4, 3), "
            "(torch.randn(1, 3, 8, 8),), sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m.startswith('oxport.opsets.cases')))")
    with tempfile.TemporaryDirectory() as directory:
        out = subprocess.run([sys.executable, "-c", code, os.path.join(directory, "m.onnx")],
                             capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_opset_ranges_in_repr():
    entry = SymbolicEntry("aten::op", sym_a, 9, PACK_A, until=12)
    assert repr(entry) == "<symbolic aten::op since=9..12 from pack-a (dist-a 1.0)>"


# -- runtime registrations against the built-in packs ------------------------------------
class Neg(torch.nn.Module):
    def forward(self, x):
        return -x


def my_neg(g, x):
    return g.op("test_domain::MyNeg", x)


def node_types(opset: int) -> list[tuple[str, str]]:
    result = oxport.convert(Neg(), (torch.randn(2, 3),), opset_version=opset)
    return [(n.domain, n.op_type) for n in result.model_proto.graph.node]


@pytest.fixture
def runtime_neg():
    oxport.register_custom_op_symbolic("aten::neg", my_neg, 14)
    yield
    runtime = plugins.runtime_registry()
    if runtime.lookup("aten::neg", 14) is not None:
        runtime.remove("aten::neg", 14)


def test_runtime_registration_beats_the_builtin_from_its_since_on(runtime_neg):
    registry = testing.registry_view()
    builtin = registry.lookup("aten::neg", 13)
    assert builtin.provenance.distribution == "oxport" and builtin.layer == Layer.BUILTIN
    for opset in range(14, newest_known_opset() + 1):
        entry = registry.lookup("aten::neg", opset)
        assert entry.fn is my_neg and entry.layer == Layer.RUNTIME, opset
        assert registry.shadowed_by(entry) == [builtin]
    for opset in range(MIN_OPSET, 14):
        assert registry.lookup("aten::neg", opset) is builtin, opset
    assert node_types(13) == [("", "Neg")]
    assert node_types(14) == [("test_domain", "MyNeg")]
    assert node_types(20) == [("test_domain", "MyNeg")]
    model = oxport.convert(Neg(), (torch.randn(2, 3),), opset_version=20).model_proto
    assert {o.domain: o.version for o in model.opset_import} == {"": 20, "test_domain": 1}


def test_unregister_restores_the_builtin(runtime_neg):
    assert node_types(20) == [("test_domain", "MyNeg")]
    oxport.unregister_custom_op_symbolic("aten::neg", 14)
    assert node_types(20) == [("", "Neg")]
    assert testing.registry_view().lookup("aten::neg", 20).layer == Layer.BUILTIN
    with pytest.raises(InvalidExportArgumentError, match=r"No custom symbolic .*'aten::neg'.* 14"):
        oxport.unregister_custom_op_symbolic("aten::neg", 14)


def test_runtime_registration_of_a_new_op_at_a_higher_opset():
    oxport.register_custom_op_symbolic("aten::neg", my_neg, 9)
    try:
        oxport.register_custom_op_symbolic("aten::neg", sym_b, 15)
        registry = testing.registry_view()
        assert registry.lookup("aten::neg", 14).fn is my_neg
        assert registry.lookup("aten::neg", 15).fn is sym_b
        assert registry.lookup("aten::neg", 8).layer == Layer.BUILTIN
    finally:
        oxport.unregister_custom_op_symbolic("aten::neg", 9)
        oxport.unregister_custom_op_symbolic("aten::neg", 15)
    assert plugins.runtime_registry().min_opset("aten::neg") is None
    assert node_types(20) == [("", "Neg")]
