"""Operator parity with torch.onnx: every op its TorchScript registry serves at opsets 9-20,
oxport serves too, except the intended gaps of ``docs/parity.md``, each proven here."""

from __future__ import annotations

import importlib
import io
import pathlib
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport import plugins
from tests.helpers import FunctionModule as _Fn

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "parity.md"
OPSETS = range(9, 21)


# -- the registries --------------------------------------------------------------------
def torch_registry() -> Any:
    """torch.onnx's TorchScript symbolic registry, with every opset module loaded."""
    from torch.onnx._internal.torchscript_exporter import registration
    for opset in range(7, 21):
        importlib.import_module(
            f"torch.onnx._internal.torchscript_exporter.symbolic_opset{opset}")
    return registration.registry


def oxport_serves(registry: Any, names: list[str], torch_name: str, opset: int) -> bool:
    """Whether oxport converts the nodes torch's ``torch_name`` serves: torch looks a node up
    with one trailing ``_`` dropped (``aten::__and__`` as ``aten::__and_``, ``aten::relu_``
    as ``aten::relu``), oxport by its kind, then its kind with the overload."""
    for kind in (torch_name, torch_name + "_"):
        if registry.lookup(kind, opset) is not None:
            return True
        if any(n.startswith(kind + ".") and registry.lookup(n, opset) is not None
               for n in names):
            return True
    return False


def missing_opsets() -> dict[str, list[int]]:
    """Each name torch.onnx serves at some opset 9-20 where oxport serves nothing."""
    torch_reg = torch_registry()
    ours = plugins.load().registry
    names = ours.names()
    missing: dict[str, list[int]] = {}
    for name in torch_reg.all_functions():
        group = torch_reg.get_function_group(name)
        for opset in OPSETS:
            if torch_serves(group, opset) and not oxport_serves(ours, names, name, opset):
                missing.setdefault(name, []).append(opset)
    return missing


def torch_serves(group: Any, opset: int) -> bool:
    """torch.onnx's own symbolic serves the op at ``opset`` (not one a test registered in
    this process with register_custom_op_symbolic)."""
    fn = group.get(opset)
    return fn is not None and getattr(fn, "__module__", "").startswith("torch.onnx")


def intended_gaps() -> dict[str, tuple[list[int], str]]:
    """The table of docs/parity.md: name -> (opsets, the test proving the entry)."""
    rows = re.findall(r"^\| `([\w:]+)` \| (\d+)-(\d+) \| [^|]+ \| `(\w+)` \|$",
                      DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {name: (list(range(int(low), int(high) + 1)), test) for name, low, high, test in rows}


@pytest.fixture(scope="module")
def missing() -> dict[str, list[int]]:
    return missing_opsets()


def test_oxport_serves_every_op_torch_serves(missing):
    gaps = intended_gaps()
    unexplained = {name: opsets for name, opsets in missing.items()
                   if gaps.get(name, ([], ""))[0] != opsets}
    assert not unexplained, (
        "torch.onnx serves these ops (at these opsets) and oxport does not: write their "
        f"symbolics, or add them to docs/parity.md with a test proving why not:\n{unexplained}")


def test_every_intended_gap_is_still_a_gap(missing):
    stale = {name for name in intended_gaps() if name not in missing}
    assert not stale, f"oxport serves these now: drop them from docs/parity.md: {stale}"


def test_every_intended_gap_names_its_proof():
    for name, (_opsets, test) in intended_gaps().items():
        assert name in PROOFS.get(test, {}), (
            f"docs/parity.md justifies {name} by {test}, which does not cover it")


def test_supported_ops_counts_at_least_torchs():
    """docs/supported_ops.md's count of operators at each opset 9-20 is at least the number
    of ops torch.onnx's registry serves there."""
    table = (DOC.parent / "supported_ops.md").read_text(encoding="utf-8")
    counts = {int(opset): int(total)
              for opset, total in re.findall(r"^\| (\d+) \| \d+ \| (\d+) \|$", table, re.MULTILINE)}
    torch_reg = torch_registry()
    for opset in OPSETS:
        served = sum(1 for name in torch_reg.all_functions()
                     if torch_serves(torch_reg.get_function_group(name), opset))
        assert counts[opset] >= served, f"opset {opset}: {counts[opset]} < torch's {served}"


# -- exporting with both -----------------------------------------------------------------
def torch_onnx(fn: Callable[..., Any], args: tuple[Any, ...], opset: int) -> bytes:
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Fn(fn), args, f, opset_version=opset, dynamo=False)
    return f.getvalue()


def run_ort(model: bytes, args: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    return session.run(None, feeds)


def oxport_onnx(fn: Any, args: tuple[Any, ...], opset: int) -> bytes:
    f = io.BytesIO()
    oxport.export(fn if isinstance(fn, torch.nn.Module) else _Fn(fn), args, f,
                  opset_version=opset)
    return f.getvalue()


# -- torch.onnx refuses these ----------------------------------------------------------
TORCH_REFUSES = {
    "aten::_sample_dirichlet": (lambda x: torch._sample_dirichlet(x), (torch.rand(2, 3),), 17),
    "aten::_standard_gamma": (lambda x: torch._standard_gamma(x), (torch.rand(2, 3),), 17),
    "aten::_unique": (lambda x: torch._unique(x)[0], (torch.tensor([3, 1, 3]),), 10),
    "aten::_unique2": (lambda x: torch.unique(x), (torch.tensor([3, 1, 3]),), 10),
    "aten::cumsum": (lambda x: x.cumsum(0), (torch.rand(4),), 10),
}


@pytest.mark.parametrize("name", sorted(TORCH_REFUSES))
def test_torch_refuses(name):
    fn, args, opset = TORCH_REFUSES[name]
    with pytest.raises(Exception, match=r"(?i)unsupported|not supported|opset"):
        torch_onnx(fn, args, opset)


# -- no graph holds these ----------------------------------------------------------------
NOT_OPERATORS = {"aten::_floor_divide", "aten::get_pool_ceil_padding", "aten::scan",
                 "aten::tanhshrink", "onnx::Placeholder"}


@pytest.mark.parametrize("name", sorted(NOT_OPERATORS))
def test_not_an_operator(name):
    """torch 2.13 defines no such operator: neither tracing nor scripting can record it
    (``onnx::Placeholder`` is made inside torch.onnx's own passes)."""
    assert torch._C._jit_get_schemas_for_operator(name) == []


def _all_nodes(graph: Any) -> list[Any]:
    found = []
    for node in graph.nodes():
        found.append(node)
        for block in node.blocks():
            found.extend(_all_nodes(block))
    return found


def _shape_and_dtype(x: torch.Tensor) -> torch.Tensor:
    return x.view(x.shape[0], -1).to(torch.int32).type(torch.float64) + x.size(1)


def _chunk_and_split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = x.chunk(2, 1)
    c, d = x.split(1, 0)
    return a * b, c - d


def _true_divide(x: torch.Tensor) -> torch.Tensor:
    return torch.true_divide(x, x + 1)


def _tuples(x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    pair = (x + 1, x * 2)
    return x, pair


#: What TorchScript records instead, for prim ops no front end of torch 2.13 emits.
RECORDED_INSTEAD = {
    "prim::shape": (_shape_and_dtype, "aten::size"),
    "prim::convert_element_type": (_shape_and_dtype, "aten::to"),
    "prim::ConstantChunk": (_chunk_and_split, "aten::chunk"),
    "prim::ConstantSplit": (_chunk_and_split, "aten::split"),
    "prim::TupleConstruct": (_tuples, "prim::TupleConstruct"),
    "aten::true_divide": (_true_divide, "aten::div"),
}


@pytest.mark.parametrize("name", sorted(RECORDED_INSTEAD))
def test_recorded_as_another_op(name):
    """Scripting records the op oxport converts, and the export (traced and scripted)
    matches eager: prim::ConstantChunk/ConstantSplit come only from TorchScript's fuser
    passes, prim::TupleConstruct is lowered by the core (_jit_pass_lower_all_tuples)."""
    fn, recorded = RECORDED_INSTEAD[name]
    x = torch.rand(2, 4) + 0.5
    scripted = torch.jit.script(fn)
    kinds = {n.kind() for n in _all_nodes(scripted.graph)}
    assert recorded in kinds and (name == recorded or name not in kinds)
    expected = torch.utils._pytree.tree_leaves(fn(x))
    for model in (fn, scripted):
        actual = run_ort(oxport_onnx(model, (x,), 17), (x,))
        for want, got in zip(expected, actual, strict=True):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)


# -- complex-only ----------------------------------------------------------------------------
def test_conj_runs_only_on_complex_tensors():
    """``aten::_conj`` asserts on a real tensor, and torch.onnx refuses complex ones."""
    with pytest.raises(RuntimeError, match="isComplexType"):
        torch.ops.aten._conj(torch.rand(2))
    with pytest.raises(Exception, match="(?i)complex"):
        torch_onnx(lambda x: torch.ops.aten._conj(x).real, (torch.rand(2, dtype=torch.cfloat),),
                   17)


COMPLEX_ONLY = {"aten::_conj"}


#: The tests that justify the entries of docs/parity.md, and what each covers.
PROOFS: dict[str, Any] = {
    "test_torch_refuses": TORCH_REFUSES,
    "test_not_an_operator": NOT_OPERATORS,
    "test_recorded_as_another_op": RECORDED_INSTEAD,
    "test_conj_runs_only_on_complex_tensors": COMPLEX_ONLY,
}


# -- intended differences --------------------------------------------------------------------
_LINEAR_UPSAMPLING = {
    "linear": torch.arange(4.0).reshape(1, 1, 4),
    "bilinear": torch.arange(16.0).reshape(1, 1, 4, 4),
    "trilinear": torch.arange(8.0).reshape(1, 1, 2, 2, 2),
}


@pytest.mark.parametrize("mode", sorted(_LINEAR_UPSAMPLING))
def test_linear_upsampling_before_opset_11_matches_eager(mode):
    """Upsample (and Resize-10) map coordinates asymmetrically, so torch.onnx's opsets 9-10
    linear upsampling differs from eager; oxport's constant MatMul per axis matches it."""
    x = _LINEAR_UPSAMPLING[mode]

    def fn(t: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(t, scale_factor=2.0, mode=mode)

    expected = fn(x).numpy()
    for opset in (9, 10):
        assert not np.allclose(run_ort(torch_onnx(fn, (x,), opset), (x,))[0], expected,
                               atol=1e-4)
        np.testing.assert_allclose(run_ort(oxport_onnx(fn, (x,), opset), (x,))[0], expected,
                                   rtol=1e-5, atol=1e-6)


#: name: (model, args with a repeated index, the opsets below 16 it is exported at)
_REPEATED_ADDS = {
    "scatter_add": (lambda x, i, s: x.scatter_add(0, i, s), torch.tensor([[1, 1], [1, 0]]),
                    (9, 13)),
    "index_add": (lambda x, i, s: x.index_add(0, i, s), torch.tensor([1, 1, 0]), (9, 13)),
    "index_put": (lambda x, i, s: torch.index_put(x, (i,), s, accumulate=True),
                  torch.tensor([1, 1, 0]), (11, 13)),
}


@pytest.mark.parametrize("name", sorted(_REPEATED_ADDS))
def test_repeated_indices_add_up_before_opset_16(name):
    """Below opset 16 torch.onnx scatters without a reduction, so a repeated index is added
    once; oxport's one-hot rows add every value, as eager does."""
    fn, index, opsets = _REPEATED_ADDS[name]
    args = (torch.zeros(3, 2), index, torch.ones(index.shape[0], 2))
    expected = fn(*args).numpy()
    for opset in opsets:
        assert not np.allclose(run_ort(torch_onnx(fn, args, opset), args)[0], expected)
        np.testing.assert_allclose(run_ort(oxport_onnx(fn, args, opset), args)[0], expected)


def test_bernoulli_draws_ones_with_probability_p():
    """ONNX Runtime's Bernoulli kernel (which torch.onnx uses from opset 15) draws 1 with
    probability 1 - p; oxport draws a uniform sample below p at every opset."""
    probs = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    fn = torch.bernoulli
    assert not np.array_equal(run_ort(torch_onnx(fn, (probs,), 17), (probs,))[0], probs.numpy())
    for opset in (9, 17, 20):
        np.testing.assert_array_equal(run_ort(oxport_onnx(fn, (probs,), opset), (probs,))[0],
                                      probs.numpy())
