"""The shared op-test runner.

Every symbolic declares small cases next to it (``pack.case(...)``). The runner
expands each case over the opsets its symbolic serves (the lowest, the default
and the highest the installed ONNX Runtime runs), exports, runs the full ONNX
checker, runs ONNX Runtime, compares with eager PyTorch, and checks that the
symbolic under test converted the node (no fallback stood in).

A third-party pack gets the same runner with one line in its tests::

    from oxport.testing import op_tests
    test_my_pack = op_tests("my-pack")

which runs each case through both front ends, the TorchScript tracer and torch.export
(:data:`PACK_FRONT_ENDS`), so the pack serves ``export(..., dynamo=True)`` too; a case
torch.export cannot capture says why with ``not_exportable="..."`` and runs traced only.

and, through oxport's pytest plugin (:mod:`oxport.testing.pytest_plugin`, a ``pytest11``
entry point), the fixture ``oxport_roundtrip``.

The built-in cases run through the TorchScript front end. With
``OXPORT_TEST_FRONT_ENDS=trace,export`` (or ``front_ends=``) they also run through the torch.export front end (``dynamo=True``) at
its lowest and highest opset, unless it is scripted or declares ``not_exportable``; there
the results must match eager, whichever symbolics made them (torch may decompose the op).
A case declaring ``not_traceable`` (a construct only torch.export has) runs through
torch.export alone, always, and its symbolic must convert it.
It doubles the cases' time, so CI leaves it off; ``benchmarks/export_cases.py`` measures it.
``script`` runs each traced case scripted (``torch.jit.script`` of its model) at opsets
13, 17 and 20 where it serves them, skipping a model ``torch.jit.script`` refuses; the
results must match eager, whichever symbolics made them, or, for a case declaring
``not_scriptable``, the export must fail with that error.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import re
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import onnx
import torch

from oxport import plugins
from oxport.frontends.arguments import feed_array as to_numpy
from oxport.registry import OpCase, RegistryView, SymbolicEntry
from oxport.types import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET

#: The front ends a case can run through: TorchScript (traced, or scripted as declared),
#: the declared traced cases scripted, torch.export.
FRONT_ENDS = ("trace", "script", "export")
#: The opsets the ``script`` front end runs each traced case at (where it serves them).
SCRIPT_OPSETS = (13, 17, 20)
#: What a pack's one-line test (:func:`op_tests`) runs its cases through unless
#: ``OXPORT_TEST_FRONT_ENDS`` says otherwise.
PACK_FRONT_ENDS = ("trace", "export")


@dataclasses.dataclass(frozen=True)
class CaseRun:
    """One case of one symbolic at one opset, through one front end."""

    case: OpCase
    entry: SymbolicEntry
    opset: int
    front_end: str = "trace"

    @property
    def id(self) -> str:
        suffix = "" if self.front_end == "trace" else f"-{self.front_end}"
        return f"{self.case}-since{self.entry.since}-opset{self.opset}{suffix}"


def front_ends_from_environment(default: Iterable[str] = ("trace",)) -> tuple[str, ...]:
    """The front ends ``OXPORT_TEST_FRONT_ENDS`` (comma-separated) names; ``default`` when
    it is not set."""
    given = os.environ.get("OXPORT_TEST_FRONT_ENDS")
    names = (tuple(n.strip() for n in given.split(",") if n.strip()) if given is not None
             else tuple(default))
    unknown = [n for n in names if n not in FRONT_ENDS]
    if unknown:
        raise ValueError(f"OXPORT_TEST_FRONT_ENDS names {unknown}; use {', '.join(FRONT_ENDS)}.")
    return names


@functools.lru_cache(maxsize=None)
def max_runtime_opset() -> int:
    """The newest ai.onnx opset the installed ONNX Runtime accepts."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    for opset in range(min(MAX_OPSET, onnx.defs.onnx_opset_version()), MIN_OPSET - 1, -1):
        node = helper.make_node("Identity", ["x"], ["y"])
        graph = helper.make_graph([node], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)], True)
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - any refusal means "not this opset"
            continue
        return opset
    raise RuntimeError("The installed onnxruntime accepts no opset oxport supports.")


def registry_view(**selection: Any) -> RegistryView:
    manager = plugins.load(**selection)
    return RegistryView(manager.registry, plugins.runtime_registry())


def _opsets(entry: SymbolicEntry, case: OpCase) -> list[int]:
    low = max(entry.since, MIN_OPSET, case.min_opset or MIN_OPSET)
    high = min(entry.until or MAX_OPSET, max_runtime_opset(), case.max_opset or MAX_OPSET)
    if low > high:
        return []
    return sorted({low, high} | ({DEFAULT_OPSET} if low <= DEFAULT_OPSET <= high else set()))


def expand(entries: Iterable[SymbolicEntry], cases: Iterable[OpCase],
           front_ends: Iterable[str] = ("trace",)) -> list[CaseRun]:
    """Every (case, symbolic, opset, front end) run for the given entries: through
    torch.export only the lowest and highest opset, of cases it can capture."""
    by_op: dict[str, list[OpCase]] = {}
    for case in cases:
        by_op.setdefault(case.op, []).append(case)
    front_ends = tuple(front_ends)
    runs = []
    for entry in entries:
        for case in by_op.get(entry.name, []):
            opsets = _opsets(entry, case)
            if case.not_traceable:
                runs.extend(CaseRun(case, entry, opset, "export")
                            for opset in sorted({*opsets[:1], *opsets[-1:]}))
                continue
            if "trace" in front_ends:
                runs.extend(CaseRun(case, entry, opset) for opset in opsets)
            if "script" in front_ends and not case.script and opsets:
                runs.extend(CaseRun(case, entry, opset, "script") for opset in SCRIPT_OPSETS
                            if opsets[0] <= opset <= opsets[-1])
            if "export" in front_ends and exportable(case) and opsets:
                runs.extend(CaseRun(case, entry, opset, "export")
                            for opset in sorted({opsets[0], opsets[-1]}))
    return runs


def exportable(case: OpCase) -> bool:
    """Whether torch.export can capture the case (it cannot read a scripted model)."""
    return not case.script and not case.not_exportable


def entries_of(registry: RegistryView, plugin_names: Iterable[str] | None = None,
               distribution: str | None = None) -> list[SymbolicEntry]:
    names = set(plugin_names) if plugin_names is not None else None
    return [e for e in registry.entries()
            if (names is None or e.provenance.plugin in names)
            and (distribution is None or e.provenance.distribution == distribution)]


def missing_cases(registry: RegistryView, entries: Iterable[SymbolicEntry]) -> list[str]:
    """Symbolics (by op and opset range) that no declared case exercises."""
    runs = {(id(r.entry)) for r in expand(entries, registry.cases)}
    return [repr(e) for e in entries if id(e) not in runs]


class _Callable(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def make_inputs(case: OpCase) -> tuple[Any, ...]:
    """The case's inputs: shapes become seeded random float32 tensors."""
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for spec in case.inputs:
        if callable(spec):
            torch.manual_seed(len(inputs))
            inputs.append(spec())
        elif isinstance(spec, tuple) and all(isinstance(d, int) for d in spec):
            inputs.append(torch.randn(*spec, generator=generator))
        else:
            inputs.append(spec)
    return tuple(inputs)


def as_module(model: Any) -> Any:
    if isinstance(model, (torch.nn.Module, torch.jit.ScriptFunction)):
        return model
    return _Callable(model)


@functools.lru_cache(maxsize=None)
def _script(model: Any) -> Any:
    """``torch.jit.script(model)``, once per case model; its DeprecationWarning (torch 2.13)
    is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r".*torch\.jit\.script.*deprecated.*", DeprecationWarning)
        return torch.jit.script(model)


def script_case_model(model: Any) -> Any:
    """A traced case's model scripted (a lambda as the function it spells); raises what
    ``torch.jit.script`` raises where it refuses the model."""
    return _script(_as_function(model) if _is_lambda(model) else model)


def _script_or_skip(model: Any) -> Any:
    """The case's model scripted (:func:`script_case_model`); the case is skipped where
    ``torch.jit.script`` refuses it (Python constructs TorchScript lacks)."""
    import pytest

    try:
        return script_case_model(model)
    except Exception as exc:  # noqa: BLE001 - TorchScript's refusals have many types
        pytest.skip(f"torch.jit.script refuses the case's model: "
                    f"{str(exc).strip().splitlines()[0][:200]}")


def _runs_or_skip(scripted: Any, inputs: tuple[Any, ...], case: OpCase, expected: Any) -> None:
    """Skip the case where its scripted model does not run in TorchScript (library code
    that refuses scripting at run time, such as parametrizations), or where TorchScript's
    own run differs from eager (scripted ``F.embedding`` drops its ``max_norm``
    renormalization): no export of that graph can match eager."""
    import pytest

    from oxport.frontends.torchscript.trace import _forward_name

    try:
        if isinstance(scripted, torch.jit.ScriptModule):  # (nn.LSTM: forward__0, forward__1)
            method = scripted._c._get_method(_forward_name(scripted, inputs))
            scripted_out = method(*_cloned(inputs), **case.kwargs)
        else:
            scripted_out = scripted(*_cloned(inputs), **case.kwargs)
    except Exception as exc:  # noqa: BLE001 - whatever TorchScript raised
        pytest.skip(f"the scripted model does not run in TorchScript: "
                    f"{str(exc).strip().splitlines()[-1][:200]}")
    try:
        compare(expected, [_as_array(t) for t in flatten_expected(scripted_out)], rtol=case.rtol,
                atol=case.atol, where=str(case), check=case.check)
    except AssertionError as exc:
        pytest.skip(f"TorchScript's own run of the scripted model differs from eager: "
                    f"{str(exc).strip().splitlines()[0][:200]}")


def _as_array(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as ONNX Runtime would return it (numpy has no bfloat16: as float32; a
    conjugated or negated view, the imaginary part of an ifft, resolved)."""
    tensor = tensor.detach().resolve_conj().resolve_neg()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def _is_lambda(model: Any) -> bool:
    return getattr(model, "__name__", "") == "<lambda>"


@functools.lru_cache(maxsize=None)
def _as_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A lambda as a ``def`` with the same parameters and body, whose source TorchScript
    can read (it cannot read a lambda's): the source is registered with ``linecache``, the
    globals and closure are the lambda's."""
    import ast
    import linecache

    code = fn.__code__
    names = list(code.co_varnames[:code.co_argcount])
    candidates = [node for node in ast.walk(_parsed(code.co_filename))
                  if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno
                  and [a.arg for a in node.args.args] == names]
    if len(candidates) != 1:
        raise ValueError("cannot tell which lambda of its source line the case is")
    name = f"case_line_{code.co_firstlineno}"
    text = f"def {name}({ast.unparse(candidates[0].args)}):\n" \
        f"    return {ast.unparse(candidates[0].body)}\n"
    filename = f"<oxport case {code.co_filename}:{code.co_firstlineno}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = dict(fn.__globals__)
    namespace.update(zip(code.co_freevars, (cell.cell_contents for cell in fn.__closure__ or ())))
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - the case's own code
    return namespace[name]


@functools.lru_cache(maxsize=None)
def _parsed(filename: str) -> Any:
    import ast

    with open(filename, encoding="utf-8") as source:
        return ast.parse(source.read())


def _only_oxport_warnings(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Cases call deprecated or noisy torch APIs on purpose (each exists to cover its op):
    while one runs, torch's user, future and deprecation warnings are silenced and oxport's
    own (``oxport: ...``) stay visible."""
    @functools.wraps(fn)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            for category in (UserWarning, FutureWarning, DeprecationWarning):
                warnings.filterwarnings("ignore", category=category)
            warnings.filterwarnings("default", message="oxport")
            return fn(*args, **kwargs)
    return quiet


@_only_oxport_warnings
def run(case_run: CaseRun, registry: RegistryView | None = None) -> None:
    """Export one case at one opset, check it, run it in ONNX Runtime, compare with eager
    (both without grad, as an inference export under ``torch.no_grad()``)."""
    import oxport

    case, entry, opset = case_run.case, case_run.entry, case_run.opset
    model = case.model
    if isinstance(model, type) and issubclass(model, torch.nn.Module):
        model = model()  # declared as a class: built when the case runs, not at import
    if case.script and not isinstance(model, torch.jit.ScriptModule | torch.jit.ScriptFunction):
        model = _script(model)
    eager = as_module(model)  # (a scripted nn.LSTM has no forward to call, only overloads)
    if case_run.front_end == "script":
        model = _script_or_skip(model)
    model = as_module(model)
    inputs = make_inputs(case)
    training = oxport.TrainingMode.TRAINING if case.training else oxport.TrainingMode.EVAL
    # Both in the case's mode: a scripted module keeps its own training flag but shares its
    # buffers with the eager one, so running it in training mode would move running stats.
    with oxport.select_model_mode_for_export(eager, training), \
            oxport.select_model_mode_for_export(model, training), torch.no_grad():
        expected = eager(*_cloned(inputs), **case.kwargs)
        if case_run.front_end == "script":
            _runs_or_skip(model, inputs, case, expected)
    args = (*_cloned(inputs), case.kwargs) if case.kwargs else _cloned(inputs)
    if case_run.front_end == "script" and case.not_scriptable:
        import pytest
        with pytest.raises(oxport.OnnxExporterError, match=re.escape(case.not_scriptable)):
            oxport.convert(model, args, opset_version=opset, dynamic_axes=case.dynamic_axes,
                           input_names=case.input_names, training=training)
        return
    # Through another front end than the case's own, results must match, whoever made them.
    any_symbolics = case_run.front_end != "trace" and not case.not_traceable
    with torch.no_grad():  # traced in eager's grad mode: layers choose their path by it
        result = oxport.convert(model, args, opset_version=opset,
                                dynamic_axes=case.dynamic_axes, input_names=case.input_names,
                                training=training, dynamo=case_run.front_end == "export",
                                **case.export_kwargs)
    used = [e for e in result.used if e is entry]
    assert used or any_symbolics, (
        f"{case_run.id}: the symbolic under test ({entry!r}) converted nothing; it used "
        f"{sorted({repr(e) for e in result.used})}. Does the case trace to {entry.name}?")
    assert not result.fallback_uses, f"{case_run.id}: fallbacks stood in: {result.fallback_uses}"
    check_in_runtime(result, inputs, case.kwargs, expected, rtol=case.rtol,
                     atol=case.atol, where=case_run.id, check=case.check)


def check_in_runtime(result: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any],
                     expected: Any, *, rtol: float, atol: float, where: str = "",
                     check: str = "values") -> list[Any]:
    """Full ONNX check of an export's model (an :class:`oxport.ExportResult`), then ONNX
    Runtime on ``inputs`` (fed as ``result.feeds`` says) compared with ``expected`` (eager
    PyTorch's outputs); returns ONNX Runtime's outputs."""
    import onnxruntime as ort

    model_proto = result.model_proto
    onnx.checker.check_model(model_proto, full_check=True)
    session = ort.InferenceSession(model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    # The originals: the trace ran on copies, which in-place ops may have changed.
    actual = session.run(None, result.feeds((*inputs, kwargs) if kwargs else inputs))
    compare(expected, actual, rtol=rtol, atol=atol, where=where, check=check)
    return actual


def roundtrip(model: Any, args: tuple[Any, ...], *, rtol: float = 1e-4, atol: float = 1e-5,
              **export_kwargs: Any) -> list[Any]:
    """Export ``model(*args)`` in memory, check it, run it in ONNX Runtime and compare with
    eager PyTorch; returns ONNX Runtime's outputs (the pytest fixture ``oxport_roundtrip``)."""
    import oxport

    model = as_module(model)
    with torch.no_grad():  # eager and the trace in one grad mode: layers choose their path by it
        expected = model(*_cloned(args))
        result = oxport.convert(model, _cloned(args), **export_kwargs)
    return check_in_runtime(result, args, {}, expected, rtol=rtol, atol=atol,
                            where=type(model).__name__)


def _cloned(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Fresh copies, so a model that mutates its inputs in place cannot change the feeds."""
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def flatten_expected(expected: Any) -> list[torch.Tensor]:
    """Eager outputs as the exported file returns them (a quantized tensor as its value,
    scale and zero point)."""
    from oxport.frontends.arguments import flatten_outputs
    from oxport.frontends.quantized_io import expand
    return [part for tensor in flatten_outputs(expected, []) for part in expand(tensor)]


def compare(expected: Any, actual: list[Any], *, rtol: float, atol: float, where: str = "",
            check: str = "values") -> None:
    """Assert ONNX Runtime's outputs match eager PyTorch's (values, dtypes and shapes).

    ``check="shape"`` compares only dtypes and shapes (for random ops). A Sequence output
    (a list of tensors a scripted model returns) stands for its tensors.
    """
    if check not in ("values", "shape"):
        raise ValueError(f"{where}: check={check!r}; use 'values' or 'shape'.")
    flat = flatten_expected(expected)
    actual = [item for out in actual for item in (out if isinstance(out, list) else [out])]
    assert len(flat) == len(actual), f"{where}: {len(actual)} outputs, expected {len(flat)}"
    for index, (want, got) in enumerate(zip(flat, actual)):
        got_tensor = torch.from_numpy(np.asarray(got))
        if check == "shape":
            assert got_tensor.shape == want.shape and got_tensor.dtype == want.dtype, (
                f"{where}: output {index}: got {got_tensor.dtype}{list(got_tensor.shape)}, "
                f"expected {want.dtype}{list(want.shape)}")
            continue
        torch.testing.assert_close(
            got_tensor, want.detach(), rtol=rtol, atol=atol, equal_nan=True,
            check_dtype=want.dtype != torch.bfloat16,
            msg=lambda m, i=index: f"{where}: output {i}: {m}")


def op_tests(*plugin_names: str, distribution: str | None = None,
             front_ends: Iterable[str] | None = None) -> Callable[..., None]:
    """A pytest test function running the named plugins' (or distribution's) cases on
    their symbolics; cases other packs declare for the same ops are not theirs to pass (a
    symbolic may decline arguments another pack's case uses). ``front_ends`` (default:
    ``OXPORT_TEST_FRONT_ENDS``, else :data:`PACK_FRONT_ENDS`, the tracer and torch.export)
    picks the front ends they run through."""
    import pytest

    registry = registry_view()
    entries = entries_of(registry, plugin_names or None, distribution)
    if not entries:  # an empty parametrization would only skip: say why instead
        loaded = sorted({e.provenance.plugin for e in registry.entries()})
        raise LookupError(
            f"op_tests({', '.join(map(repr, plugin_names))}"
            f"{f', distribution={distribution!r}' if distribution else ''}): no loaded plugin "
            f"of that name registers a symbolic (loaded: {', '.join(loaded) or 'none'}). Is "
            "the pack pip-installed (pip install -e .) and its entry point named so?")
    providers = {e.provenance for e in entries}
    runs = expand(entries, [c for c in registry.cases if c.provenance in providers],
                  front_ends or front_ends_from_environment(PACK_FRONT_ENDS))

    @pytest.mark.parametrize("case_run", runs, ids=[r.id for r in runs])
    def test_op_case(case_run: CaseRun) -> None:
        run(case_run)

    return test_op_case


def roundtrip_bytes(model: Any, args: Any, **kwargs: Any) -> bytes:
    """Export to memory and return the file bytes (for tests)."""
    import oxport

    buffer = io.BytesIO()
    oxport.export(model, args, buffer, **kwargs)
    return buffer.getvalue()
