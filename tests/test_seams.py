"""The seams between the core and its packs: packs ask the GraphContext, never the
conversion or another module's private names; the core names no op outside the registry's
data; fallbacks implement their protocol; a symbolic's error reaches the caller intact."""

from __future__ import annotations

import ast
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.onnx import symbolic_helper as torch_onnx_symbolic_helper

import oxport
from oxport import plugins
from oxport.errors import (
    OnnxExporterError,
    SymbolicError,
    SymbolicValueError,
    UnsupportedOperatorError,
)
from oxport.ir import Value
from oxport.registry import FALLBACK_MEMBERS
from oxport.walk import Fallback

ROOT = Path(__file__).resolve().parent.parent
PACK_FOLDERS = ("opsets", "plugins", "contrib")
#: Module prefixes the packages under PACK_FOLDERS are imported as.
FIRST_PARTY = re.compile(r"^oxport(_\w+)?(\.|$)")
#: torch.onnx's symbolic_helper names: oxport.symbolic_helper keeps them, underscore and all,
#: so that symbolics written for torch.onnx work unchanged; they are its public interface.
TORCH_ONNX_HELPERS = frozenset(n for n in dir(torch_onnx_symbolic_helper)
                               if n.startswith("_") and not n.startswith("__"))
#: core/ modules that may name ops, each with why (everything else asks the registry).
OP_NAMES_ALLOWED = {
    "frontends": "front ends translate their graph kinds into the view's ATen and prim nodes",
    "diagnose/mismatch.py": "it partitions the source graph, copying its constants and lists",
    "diagnose/verification.py": "it reads the source graph's constants, lists and tuples",
    "cli/support_table.py": "the support table counts the ops of the aten namespace",
    "symbolic_helper.py": "torch.onnx's list helpers (_is_packed_list) read prim::ListConstruct",
    "registry.py": "its messages show well-formed op names",
}
_OP_NAME = re.compile(r"\b(aten|prim|quantized)::")


def _pack_files() -> Iterator[Path]:
    for folder in PACK_FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _module_name(path: Path) -> str:
    """The import name of a file under the pack folders (``oxport.opsets.shape``,
    ``oxport_ortcontrib.fusion``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "contrib":
        parts = parts[2:]  # contrib/<project>/<package>/...
    else:
        parts = ("oxport", *parts)
    return ".".join(p for p in parts if p != "__init__")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _private_uses(path: Path) -> Iterator[str]:
    """Where a file reaches into the private names of another first-party module (or of
    the GraphContext ``g``)."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    imported: dict[str, str] = {}  # local name -> what it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and FIRST_PARTY.match(node.module):
            private_module = next((i for i, part in enumerate(node.module.split("."))
                                   if _is_private(part)), None)
            if private_module is not None and \
                    ".".join(node.module.split(".")[:private_module]) != package:
                yield f"{node.lineno}: from {node.module} import ..."
            for alias in node.names:
                if _is_private(alias.name):
                    yield f"{node.lineno}: from {node.module} import {alias.name}"
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if FIRST_PARTY.match(alias.name):
                    imported[alias.asname or alias.name.partition(".")[0]] = \
                        alias.name if alias.asname else alias.name.partition(".")[0]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)
                and isinstance(node.value, ast.Name)):
            continue
        owner = imported.get(node.value.id, "g" if node.value.id == "g" else None)
        if owner is None:
            continue
        if owner == "oxport.symbolic_helper" and node.attr in TORCH_ONNX_HELPERS:
            continue
        yield f"{node.lineno}: {node.value.id}.{node.attr} ({owner})"


def test_no_pack_touches_the_conversion():
    """Packs ask ``g`` (GraphContext's methods), never ``g.conversion``, the walker's state."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _pack_files()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and node.attr == "conversion"
    ]
    assert not offenders, (
        "these pack lines reach into the conversion; add a GraphContext method instead:\n"
        + "\n".join(offenders))


def test_no_pack_uses_another_modules_private_names():
    offenders = [f"{path.relative_to(ROOT)}:{use}"
                 for path in _pack_files() for use in _private_uses(path)]
    assert not offenders, (
        "these pack lines use another module's private names; make the name public (or "
        "keep it in its module):\n" + "\n".join(offenders))


def test_the_private_name_check_finds_reach_ins(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    source = tmp_path / "opsets" / "bad.py"
    source.parent.mkdir()
    source.write_text(
        "from oxport import symbolic_helper as sh\n"
        "from oxport.opsets.creation import _range\n"
        "from oxport.plugins._emit import emit_as_is\n"
        "import oxport.walk\n"
        "def f(g, x):\n"
        "    sh._get_tensor_rank(x)\n"  # torch.onnx's name: public
        "    sh._secret(x)\n"
        "    g._as_value(x)\n"
        "    return oxport._hidden\n")
    assert sorted(int(use.partition(":")[0]) for use in _private_uses(source)) == [2, 3, 7, 8, 9]


def test_no_op_names_in_the_core():
    """The core learns what an op needs from its registration (capability flags, argument
    readers, the schema), not from its name; only OP_NAMES_ALLOWED's modules name ops."""
    core = ROOT / "core"
    offenders = []
    for path in sorted(core.rglob("*.py")):
        where = path.relative_to(core).as_posix()
        if any(where == allowed or where.startswith(allowed + "/")
               for allowed in OP_NAMES_ALLOWED):
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = _docstrings(tree)
        offenders += [f"core/{where}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and id(node) not in docstrings and _OP_NAME.search(node.value)]
    assert not offenders, (
        "the core names these ops; declare what it needs on the op's registration, or "
        "allow the module in OP_NAMES_ALLOWED with why:\n" + "\n".join(offenders))


def test_fallbacks_implement_the_protocol():
    declared = {name for name in vars(Fallback).get("__annotations__", {})} | {
        name for name, member in vars(Fallback).items()
        if callable(member) and not name.startswith("_")}
    assert declared == set(FALLBACK_MEMBERS)
    fallbacks = plugins.load().registry.fallbacks
    assert {"aten", "aten-fallback", "fallthrough"} <= set(fallbacks)
    for name, fallback in fallbacks.items():
        assert all(hasattr(fallback, member) for member in FALLBACK_MEMBERS), name
        assert "provenance" not in vars(fallback), name  # the registry keeps it


def test_a_fallback_missing_a_member_is_refused():
    from oxport.errors import RegistryError
    from oxport.registry import Provenance, Registrar, SymbolicRegistry

    class Incomplete:
        preempt = False

        def claims(self, node):
            return True

    registrar = Registrar(SymbolicRegistry(), Provenance("p"))
    with pytest.raises(RegistryError, match="has no keeps_autograd_functions, convert"):
        registrar.register_fallback("incomplete", Incomplete())


def test_capabilities_live_on_the_registration():
    registry = plugins.load().registry
    assert registry.lookup("aten::view_as_real", 17).accepts_complex
    assert not registry.lookup("aten::relu", 17).accepts_complex
    assert registry.lookup("prim::PythonOp", 17) is not None  # loads the autograd pack
    assert "prim::PythonOp" in registry.argument_readers


# -- a symbolic's errors reach the caller as they were raised ------------------------------
class CodedError(OnnxExporterError):
    """An oxport error whose constructor takes other arguments than a message."""

    def __init__(self, op: str, code: int) -> None:
        super().__init__(f"{op} failed with code {code}")
        self.op, self.code = op, code


class Relu(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1


@pytest.fixture
def relu_raising():
    def register(exc_of):
        def symbolic(g, x):
            raise exc_of(x)
        oxport.register_custom_op_symbolic("aten::relu", symbolic, 7)
    yield register
    oxport.unregister_custom_op_symbolic("aten::relu", 7)


def _export_error(exc_type: type[Exception]) -> Exception:
    with pytest.raises(exc_type) as info:
        oxport.export(Relu(), (torch.randn(2, 3),), io.BytesIO())
    return info.value


def test_an_error_with_its_own_constructor_keeps_its_type_and_attributes(relu_raising):
    relu_raising(lambda x: CodedError("aten::relu", 7))
    error = _export_error(CodedError)
    assert type(error) is CodedError and (error.op, error.code) == ("aten::relu", 7)
    assert str(error).startswith("aten::relu failed with code 7 (converting aten::relu at ")
    assert "symbolic from register_custom_op_symbolic" in str(error)


def test_a_symbolic_value_error_keeps_its_value(relu_raising):
    relu_raising(lambda x: SymbolicValueError("cannot use this input", x))
    error = _export_error(SymbolicValueError)
    assert type(error) is SymbolicValueError and isinstance(error.value, Value)
    assert "cannot use this input" in str(error) and "(converting aten::relu at " in str(error)


def test_an_unsupported_operator_error_keeps_its_ops(relu_raising):
    relu_raising(lambda x: UnsupportedOperatorError("nothing converts it", ["an op"]))
    error = _export_error(UnsupportedOperatorError)
    assert error.ops == ["an op"] and "nothing converts it (converting" in str(error)


def test_another_exception_becomes_a_symbolic_error_from_it(relu_raising):
    class Odd(Exception):
        def __init__(self, a: int, b: int) -> None:
            super().__init__(a + b)

    relu_raising(lambda x: Odd(1, 2))
    error = _export_error(SymbolicError)
    assert isinstance(error.__cause__, Odd)
    assert "raised Odd: 3" in str(error)
