"""Export each generated model, check it, run it in ONNX Runtime and compare with eager.

A front end is ``"trace"`` (``dynamo=False``, torch.onnx's TorchScript path the oracle) or
``"dynamo"`` (``dynamo=True``, the torch.export front end; torch.onnx's dynamo path the
oracle).

Outcomes (``Outcome.kind``):

- ``ok``: the full checker passes, ONNX Runtime runs the file and matches eager at the
  export size and at the second size of the dynamic axes;
- ``error``: oxport raised a clear :class:`oxport.errors.OnnxExporterError` (not a
  ``SymbolicError``, which wraps an unexpected exception inside a symbolic, nor a
  ``CheckerError``);
- ``warned``: the file fails at the second size and oxport warned that a dynamic axis sets
  a size the capture fixed (the detail says whether torch.onnx, the oracle, got that size
  right: e.g. a chunk whose number of pieces changes);
- ``same_as_torch_onnx``: the file fails and so does the oracle's, without a warning — at
  the second size a size the trace fixed where oxport cannot tell, at the export size a
  difference both share (ties in topk/sort, precision);
- the defects: ``wrong`` (different values, dtype or shape), ``invalid`` (the checker or
  ONNX Runtime rejects a file reported as a success) and ``crash`` (any other exception).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import warnings
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

import oxport
from oxport.errors import CheckerError, OnnxExporterError, SymbolicError

from .generator import FuzzCase

ort.set_default_logger_severity(4)  # the outcomes say what failed; no ORT log lines

DEFECTS = ("wrong", "invalid", "crash")
KINDS = ("ok", "error", "warned", "same_as_torch_onnx", *DEFECTS)
FRONT_ENDS = ("trace", "dynamo")
# What oxport warns when a dynamic axis sets a size the capture fixed, per front end.
_FIXED_SIZE_WARNINGS = {
    "trace": ("dynamic_axes makes dynamic",),
    "dynamo": ("torch.export fixed dynamic axes", "torch.export captured the model's code"),
}


@dataclasses.dataclass
class Outcome:
    kind: str
    case: FuzzCase
    opset: int
    detail: str = ""
    warned: bool = False
    front_end: str = "trace"

    def report(self) -> str:
        return (f"== {self.kind} at opset {self.opset} ({self.front_end})"
                f"{' (oxport warned)' if self.warned else ''}: {self.detail}\n"
                f"{self.case.describe()}")


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return (1e-2, 1e-2) if dtype in (torch.float16, torch.bfloat16) else (1e-3, 1e-4)


def _outputs(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, tuple) else [result]


def mismatch(expected: list[torch.Tensor], actual: list[np.ndarray]) -> str | None:
    """Why ``actual`` (ONNX Runtime's outputs) differs from eager, or None."""
    if len(expected) != len(actual):
        return f"{len(actual)} outputs, eager has {len(expected)}"
    for index, (want, got) in enumerate(zip(expected, actual)):
        got_tensor = torch.from_numpy(np.asarray(got))
        if got_tensor.dtype != want.dtype or got_tensor.shape != want.shape:
            return (f"output {index}: {got_tensor.dtype}{list(got_tensor.shape)}, eager gives "
                    f"{want.dtype}{list(want.shape)}")
        rtol, atol = _tolerance(want.dtype)
        try:
            torch.testing.assert_close(got_tensor, want, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as exc:
            return f"output {index}: {str(exc).splitlines()[0]} {str(exc).splitlines()[-1]}"
    return None


def _run(model_bytes: bytes, case: FuzzCase, inputs: tuple[torch.Tensor, ...],
         expected: list[torch.Tensor]) -> tuple[str, str] | None:
    """(kind, detail) when ONNX Runtime rejects the file or differs from eager, else None."""
    try:
        session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        used = {i.name for i in session.get_inputs()}  # the trace drops unused inputs
        actual = session.run(None, {n: t.numpy() for n, t in zip(case.input_names, inputs)
                                    if n in used})
    except Exception as exc:  # noqa: BLE001 - any runtime failure is the finding
        return "invalid", f"ONNX Runtime: {str(exc).splitlines()[0][:300]}"
    problem = mismatch(expected, actual)
    return ("wrong", problem) if problem else None


def _eager(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    with torch.no_grad():
        return _outputs(model(*(t.clone() for t in inputs)))


def _torch_onnx(case: FuzzCase, opset: int, front_end: str) -> bytes | None:
    """The oracle's file, or None when torch.onnx cannot export the model (it gets a copy
    of ``dynamic_axes``: torch.onnx rewrites the dict it is given)."""
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(case.build(), case.inputs, buffer, opset_version=opset,
                              input_names=case.input_names, dynamo=front_end == "dynamo",
                              dynamic_axes={k: list(v) for k, v in case.dynamic_axes.items()})
    except Exception:  # noqa: BLE001 - the oracle failing only tells us it cannot help
        return None
    return buffer.getvalue()


def _oracle_fails_too(case: FuzzCase, opset: int, front_end: str,
                      inputs: tuple[torch.Tensor, ...], expected: list[torch.Tensor]) -> bool:
    """Whether torch.onnx's file for ``front_end`` fails at ``inputs`` too; when its dynamo
    path cannot export the model, its TorchScript path's file is the oracle."""
    oracle = _torch_onnx(case, opset, front_end)
    if oracle is None and front_end == "dynamo":
        oracle = _torch_onnx(case, opset, "trace")
    return oracle is None or _run(oracle, case, inputs, expected) is not None


def check(case: FuzzCase, opset: int, front_end: str = "trace") -> Outcome:
    """Export ``case`` at ``opset`` through ``front_end`` and classify what happens."""
    outcome = _classify(case, opset, front_end)
    outcome.front_end = front_end
    return outcome


def _classify(case: FuzzCase, opset: int, front_end: str) -> Outcome:
    model = case.build()
    expected = _eager(model, case.inputs)
    buffer = io.BytesIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            oxport.export(model, tuple(t.clone() for t in case.inputs), buffer,
                          opset_version=opset, input_names=case.input_names,
                          dynamic_axes=case.dynamic_axes, dynamo=front_end == "dynamo")
        except CheckerError as exc:
            return Outcome("invalid", case, opset, str(exc)[:400])
        except SymbolicError as exc:
            return Outcome("crash", case, opset, str(exc)[:400])
        except OnnxExporterError as exc:
            return Outcome("error", case, opset, str(exc)[:400])
        except Exception as exc:  # noqa: BLE001 - anything else is a crash to report
            return Outcome("crash", case, opset, f"{type(exc).__name__}: {str(exc)[:400]}")
    warned = any(text in str(w.message) for w in caught
                 for text in _FIXED_SIZE_WARNINGS[front_end])
    model_bytes = buffer.getvalue()
    try:
        onnx.checker.check_model(onnx.load_from_string(model_bytes), full_check=True)
    except Exception as exc:  # noqa: BLE001 - the checker's verdict is the finding
        return Outcome("invalid", case, opset, f"checker: {str(exc)[:300]}", warned)
    attempts = [("export size", case.inputs, expected)]
    if case.second_inputs is not None:
        attempts.append(("second size", case.second_inputs, _eager(model, case.second_inputs)))
    for where, inputs, want in attempts:
        failure = _run(model_bytes, case, inputs, want)
        if failure is None:
            continue
        kind, detail = failure
        if kind == "wrong" or where == "second size":
            oracle_fails = _oracle_fails_too(case, opset, front_end, inputs, want)
            if warned and where == "second size":
                kind = "warned"
                detail += "; torch.onnx fails too" if oracle_fails else "; torch.onnx is right"
            elif oracle_fails:
                kind = "same_as_torch_onnx"
        return Outcome(kind, case, opset, f"{where}: {detail}", warned)
    return Outcome("ok", case, opset, warned=warned)
