"""Check an export against eager PyTorch, and find where they part.

* :func:`verify` exports in memory, runs ONNX Runtime and compares with eager PyTorch
  at the example inputs and, for every dynamic axis, at a second size of that axis; an
  axis that turns out static is reported with the source line that fixed it.
* :func:`find_mismatch` (from :mod:`oxport.diagnose.mismatch`) bisects the TorchScript graph
  into partitions, exports each with oxport's walker and compares it with the
  TorchScript graph run on the same inputs, down to the smallest partitions that differ
  (the seed's ``GraphInfo`` tree).

Both name the source line and the plugin behind what they find.
"""

from __future__ import annotations

import dataclasses
import os
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import torch
from torch.utils import _pytree as pytree

from oxport import api, serialize
from oxport.diagnose import report
from oxport.errors import OnnxExporterError
from oxport.exporter.result import ExportResult
from oxport.exporter.state import exporting, select_model_mode_for_export
from oxport.frontends import arguments
from oxport.frontends.arguments import dynamic_axis_pairs
from oxport.frontends.torchscript import trace
from oxport.types import TrainingMode
from oxport.walk import source_of

_TORCH_DIR = os.path.dirname(torch.__file__)
_OXPORT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (name, new shape, the example tensor) -> the input to use at that shape.
InputGenerator = Callable[[str, tuple[int, ...], torch.Tensor], torch.Tensor]
#: (input name, axis, traced size) -> the size(s) to try instead.
SecondShape = Callable[[str, int, int], "int | Sequence[int]"]


class VerificationError(OnnxExporterError):
    """The export does not behave like the model; ``result`` holds the details."""

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


@dataclasses.dataclass
class VerificationOptions:
    """How :func:`verify` and :func:`find_mismatch` compare ONNX Runtime with PyTorch.

    An element matches when ``|onnx - torch| <= atol + rtol * |torch|`` (NaNs match
    NaNs). ``acceptable_error_percentage`` lets that percentage of elements differ.
    ``input_generator(name, shape, example)`` makes an input at a new shape (default:
    random values like the example's: normal floats, ints within its range).
    ``second_shape`` picks the other size tried for each dynamic axis: ``"grow"``
    (size+1, then 2*size, size+2, 3*size), ``"shrink"`` (size-1, size//2, then grow),
    a callable ``(input name, axis, size) -> size or sizes``, or None to skip.
    ``ignore_none=False`` notes outputs that are None (ONNX drops them).
    ``raise_on_failure`` makes :func:`verify` raise :class:`VerificationError`.
    """

    rtol: float = 1e-3
    atol: float = 1e-7
    ignore_none: bool = True
    check_shape: bool = True
    check_dtype: bool = True
    acceptable_error_percentage: float | None = None
    input_generator: InputGenerator | None = None
    second_shape: str | SecondShape | None = "grow"
    raise_on_failure: bool = True
    seed: int = 0


# -- comparing ------------------------------------------------------------------------
@dataclasses.dataclass
class OutputComparison:
    """One output of ONNX Runtime against PyTorch's."""

    name: str
    expected_shape: tuple[int, ...]
    actual_shape: tuple[int, ...]
    expected_dtype: str
    actual_dtype: str
    max_abs_error: float
    max_rel_error: float
    mismatched: int
    total: int
    ok: bool
    message: str = ""


def compare(name: str, expected: Any, actual: Any, options: VerificationOptions
            ) -> OutputComparison:
    """Compare PyTorch's ``expected`` with ONNX Runtime's ``actual`` under ``options``."""
    exp = torch.as_tensor(expected).detach().cpu()
    act = torch.as_tensor(np.asarray(actual))
    problems = []
    if options.check_dtype and exp.dtype != act.dtype:
        problems.append(f"dtype differs: ONNX Runtime gives {act.dtype}, PyTorch {exp.dtype}")
    shape_ok = tuple(exp.shape) == tuple(act.shape)
    if not shape_ok and options.check_shape:
        problems.append(f"shape differs: ONNX Runtime gives {tuple(act.shape)}, PyTorch "
                        f"{tuple(exp.shape)}")
    total = exp.numel()
    max_abs = max_rel = 0.0
    mismatched = total
    if shape_ok or exp.numel() == act.numel():
        e = exp.reshape(act.shape).to(torch.float64) if not shape_ok else exp.to(torch.float64)
        a = act.to(torch.float64)
        same = (a == e) | (torch.isnan(a) & torch.isnan(e))
        diff = torch.where(same, torch.zeros_like(a), (a - e).abs())
        diff = torch.nan_to_num(diff, nan=float("inf"))
        bad = diff > options.atol + options.rtol * e.abs()
        mismatched = int(bad.sum())
        rel = diff / e.abs()
        rel = torch.where(diff == 0, torch.zeros_like(rel), rel)
        if total:
            max_abs, max_rel = float(diff.max()), float(rel.max())
        if total and mismatched:
            abs_at = _index(int(diff.argmax()), a.shape)
            rel_at = _index(int(rel.argmax()), a.shape)
            percent = 100.0 * mismatched / total
            allowed = options.acceptable_error_percentage
            if allowed is None or percent > allowed:
                problems.append(
                    f"Tensor-likes are not close!\nMismatched elements: {mismatched} / {total} "
                    f"({percent:.1f}%)\nGreatest absolute difference: {max_abs} at index "
                    f"{abs_at} (up to {options.atol} allowed)\nGreatest relative difference: "
                    f"{max_rel} at index {rel_at} (up to {options.rtol} allowed)")
    return OutputComparison(name, tuple(exp.shape), tuple(act.shape), str(exp.dtype),
                            str(act.dtype), max_abs, max_rel, mismatched, total,
                            not problems, "\n".join(problems))


def _index(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, tuple(shape))) if shape else ()


# -- ONNX Runtime -----------------------------------------------------------------------
_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16,
    "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def ort_session(model: onnx.ModelProto) -> Any:
    """An ONNX Runtime CPU session for ``model``."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # failures come back as exceptions; no log lines
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def run_ort(session: Any, names: Sequence[str], values: Sequence[Any]) -> list[np.ndarray]:
    """Run ``session`` with ``values`` fed to the inputs ``names`` (tensors or numbers);
    a Sequence output gives its items, as eager's list output flattens to them."""
    types = {i.name: i.type for i in session.get_inputs()}
    feeds = {}
    for name, value in zip(names, values):
        if name not in types:
            continue  # an input the graph does not read
        if isinstance(value, torch.Tensor):
            feeds[name] = value.detach().cpu().numpy()
        else:
            feeds[name] = np.asarray(value, dtype=_ORT_TYPES.get(types[name]))
    outputs: list[np.ndarray] = []
    for output in session.run(None, feeds):
        outputs.extend(output if isinstance(output, list) else [output])
    return outputs


# -- verify ---------------------------------------------------------------------------
@dataclasses.dataclass
class ShapeRun:
    """One comparison, at the example inputs or at a second size of a dynamic axis."""

    label: str
    input_shapes: dict[str, tuple[int, ...]]
    outputs: list[OutputComparison] = dataclasses.field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and all(o.ok for o in self.outputs)

    def describe(self) -> str:
        shapes = ", ".join(f"{n} {tuple(s)}" for n, s in self.input_shapes.items())
        if self.error:
            return f"{self.label} ({shapes}): {self.error}"
        lines = [f"{self.label} ({shapes}): {'ok' if self.ok else 'MISMATCH'}"]
        for out in self.outputs:
            status = "ok" if out.ok else "differs"
            lines.append(f"  {out.name} {out.actual_shape}: {status}, max abs error "
                         f"{out.max_abs_error:.3g}, max rel error {out.max_rel_error:.3g}")
            if out.message:
                lines += ["    " + line for line in out.message.splitlines()]
        return "\n".join(lines)


@dataclasses.dataclass
class AxisProblem:
    """A dynamic axis that is not dynamic in the exported model, and why."""

    dim_name: str
    where: str
    message: str
    #: Source lines (with what happens there) that fixed the size.
    culprits: list[str] = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        lines = [f"dynamic axis {self.dim_name!r} ({self.where}): {self.message}"]
        lines += [f"    caused at {c}" for c in self.culprits]
        return "\n".join(lines)


@dataclasses.dataclass
class VerificationResult:
    """What :func:`verify` found."""

    export: ExportResult
    runs: list[ShapeRun] = dataclasses.field(default_factory=list)
    axis_problems: list[AxisProblem] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs) and not self.axis_problems

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for r in self.runs for o in r.outputs), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((o.max_rel_error for r in self.runs for o in r.outputs), default=0.0)

    def summary(self) -> str:
        lines = [f"oxport verification {'passed' if self.ok else 'FAILED'} (opset "
                 f"{self.export.opset})"]
        lines += [run.describe() for run in self.runs]
        if self.axis_problems:
            lines.append("Dynamic axes that are static:")
            lines += ["  " + p.describe().replace("\n", "\n  ") for p in self.axis_problems]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = summary

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise VerificationError(self.summary(), self)


def verify(model: Any, args: Any, *, opset_version: int | None = None,
           dynamic_axes: dict[str, Any] | None = None,
           input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None,
           options: VerificationOptions | None = None, **export_kwargs: Any
           ) -> VerificationResult:
    """Export ``model`` in memory and check it with ONNX Runtime against eager PyTorch.

    It runs at the example ``args``, then once per dynamic axis name at a second size
    (``options.second_shape``, new inputs from ``options.input_generator``): outputs must
    match there too, and output axes declared dynamic must follow. An axis that turns out
    static is reported with the line that fixed it. Other keyword arguments go to
    :func:`oxport.convert`. Raises :class:`VerificationError` on failure unless
    ``options.raise_on_failure`` is False; returns a :class:`VerificationResult`.
    """
    result = api.convert(model, args, opset_version=opset_version, dynamic_axes=dynamic_axes,
                         input_names=input_names, output_names=output_names, **export_kwargs)
    return verify_result(model, args, result, dynamic_axes=dynamic_axes,
                         training=export_kwargs.get("training", TrainingMode.EVAL),
                         options=options)


def verify_result(model: Any, args: Any, result: ExportResult, *,
                  dynamic_axes: Mapping[str, Any] | None = None,
                  training: TrainingMode = TrainingMode.EVAL,
                  options: VerificationOptions | None = None) -> VerificationResult:
    """:func:`verify`'s checks on an export already made (``export(verify=True)``)."""
    options = options or VerificationOptions()
    checker = _Checker(model, args, result, options, training)
    checker.run(dict(dynamic_axes or {}))
    if options.raise_on_failure:
        checker.verdict.raise_if_failed()
    return checker.verdict


class _Checker:
    """The state of one :func:`verify` call."""

    def __init__(self, model: Any, args: Any, result: ExportResult,
                 options: VerificationOptions, training: TrainingMode) -> None:
        self.model, self.args, self.options, self.training = model, args, options, training
        #: What runs eagerly: an ExportedProgram's graph module, else the model.
        self.runner = model.module() if isinstance(model, torch.export.ExportedProgram) \
            else model
        self.result = result
        self.verdict = VerificationResult(result)
        proto = result.serialized.model
        self.inputs = [i.name for i in proto.graph.input][:len(result.graph.inputs)]
        self.outputs = [o.name for o in proto.graph.output]
        self.session = ort_session(result.model_proto)
        positional, kwargs = arguments.normalize_args(args)
        self.leaves, self.spec = pytree.tree_flatten((positional, kwargs))
        self.leaves = [arguments.as_input(leaf) for leaf in self.leaves]
        self.slots = result.input_leaves()
        if self.slots is None:  # the front end did not say: the tensors, in order
            self.slots = [i for i, leaf in enumerate(self.leaves)
                          if isinstance(leaf, torch.Tensor)]
        self.generator = torch.Generator().manual_seed(options.seed)

    def run(self, dynamic_axes: dict[str, Any]) -> None:
        expected = self.eager(self.leaves)  # the model failing here is the caller's error
        self.verdict.runs.append(self.compare_at(self.leaves, "at the example inputs",
                                                 expected))
        if self.options.second_shape is None:
            return
        groups, declared = self._axes(dynamic_axes)
        changed: dict[tuple[int, int], bool] = {}
        for name, members in groups.items():
            self.check_axis(name, members, declared, changed)
        self.verdict.notes += [axis.describe() for axis in report.static_axes(self.result)
                               if axis.dim_name not in {p.dim_name
                                                        for p in self.verdict.axis_problems}]
        for (out, axis), moved in changed.items():
            dim_name = declared[out][axis]
            if not moved and dim_name not in groups:
                self.verdict.axis_problems.append(AxisProblem(
                    dim_name, f"output {self.outputs[out]!r} axis {axis}",
                    "declared dynamic, but it kept its traced size whenever a dynamic input "
                    "axis changed", self._baked(out, axis)))

    # -- one run ---------------------------------------------------------------------
    def compare_at(self, leaves: list[Any], label: str, expected: list[torch.Tensor]
                   ) -> ShapeRun:
        """Run ONNX Runtime on ``leaves`` and compare with PyTorch's ``expected``."""
        shapes = {n: tuple(leaves[s].shape) for n, s in zip(self.inputs, self.slots)}
        run = ShapeRun(label, shapes)
        try:
            actual = run_ort(self.session, self.inputs, [leaves[s] for s in self.slots])
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime's errors have no common base
            run.error = (f"ONNX Runtime failed: {exc}".strip()
                         + serialize.blame(self.result.serialized, str(exc)))
            return run
        if len(actual) != len(expected):
            run.error = (f"ONNX Runtime returned {len(actual)} outputs, PyTorch "
                         f"{len(expected)}")
            return run
        run.outputs = [compare(n, e, a, self.options)
                       for n, e, a in zip(self.outputs, expected, actual)]
        return run

    def eager(self, leaves: list[Any]) -> list[torch.Tensor]:
        positional, kwargs = pytree.tree_unflatten(leaves, self.spec)
        with select_model_mode_for_export(self.model, self.training), torch.no_grad():
            out = self.runner(*positional, **kwargs)
        if not self.options.ignore_none and any(
                leaf is None for leaf in pytree.tree_leaves(out, is_leaf=lambda x: x is None)):
            self.verdict.notes.append("the model returns None, which the ONNX model drops")
        return list(arguments.flatten_outputs(out, []))

    # -- dynamic axes ---------------------------------------------------------------
    def _axes(self, dynamic_axes: dict[str, Any]
              ) -> tuple[dict[str, list[tuple[int, int]]], dict[int, dict[int, str]]]:
        """Dynamic input axes grouped by name, and the declared output axes."""
        groups: dict[str, list[tuple[int, int]]] = {}
        declared: dict[int, dict[int, str]] = {}
        for key, spec in dynamic_axes.items():
            pairs = dict(dynamic_axis_pairs(key, spec))
            if key in self.inputs:
                index = self.inputs.index(key)
                rank = self.leaves[self.slots[index]].dim()
                for axis, name in pairs.items():
                    groups.setdefault(name, []).append((index, axis % rank))
            elif key in self.outputs:
                index = self.outputs.index(key)
                rank = len(self.result.graph.outputs[index].type().shape or ()) or 1
                declared[index] = {axis % rank: name for axis, name in pairs.items()}
        return groups, declared

    def check_axis(self, name: str, members: list[tuple[int, int]],
                   declared: dict[int, dict[int, str]], changed: dict[tuple[int, int], bool]
                   ) -> None:
        first, axis = members[0]
        size = self.leaves[self.slots[first]].shape[axis]
        where = ", ".join(f"input {self.inputs[i]!r} axis {a}" for i, a in members)
        failures = []
        for new in self._sizes(self.inputs[first], axis, size):
            leaves = self._resized(members, size, new)
            try:
                expected = self.eager(leaves)
            except Exception as exc:  # noqa: BLE001 - the user's model failed: say where
                failures.append((new, f"{_user_frame(exc.__traceback__)}: "
                                      f"{type(exc).__name__}: {_first_line(str(exc))}"))
                continue
            run = self.compare_at(leaves, f"with {name!r} {size} -> {new}", expected)
            self.verdict.runs.append(run)
            if failures:
                self.verdict.notes.append(
                    f"PyTorch rejects {name!r} = {', '.join(str(f[0]) for f in failures)} "
                    f"({failures[0][1]}); checked at {new}")
            if not run.ok:
                self.verdict.axis_problems.append(AxisProblem(
                    name, where, f"the ONNX model does not follow a change from {size} to "
                    f"{new}: {_first_line(run.error or _first_failure(run))}",
                    self.diagnose(leaves, run)))
            self._check_outputs(name, size, new, run, expected, declared, changed)
            return
        if failures:
            self.verdict.axis_problems.append(AxisProblem(
                name, where, f"PyTorch itself fails when it is not {size} (tried "
                f"{', '.join(str(f[0]) for f in failures)})", [failures[0][1]]))

    def _check_outputs(self, name: str, size: int, new: int, run: ShapeRun,
                       expected: list[torch.Tensor], declared: dict[int, dict[int, str]],
                       changed: dict[tuple[int, int], bool]) -> None:
        """Declared output axes must move: with the input axis of the same name, to its size."""
        for out, axes in declared.items():
            traced = self.result.graph.outputs[out].type().shape or ()
            if out >= len(expected):
                continue
            for axis, dim_name in axes.items():
                now = expected[out].shape[axis] if axis < expected[out].dim() else None
                before = traced[axis] if axis < len(traced) else None
                changed[out, axis] = changed.get((out, axis), False) or now != before
                if dim_name == name and now != new and run.ok:
                    self.verdict.axis_problems.append(AxisProblem(
                        name, f"output {self.outputs[out]!r} axis {axis}",
                        f"declared dynamic, but it stays {now} when {name!r} goes from "
                        f"{size} to {new} (PyTorch agrees: the model's code fixes it)",
                        self._baked(out, axis)))

    def _sizes(self, input_name: str, axis: int, size: int) -> list[int]:
        policy = self.options.second_shape
        if callable(policy):
            chosen = policy(input_name, axis, size)
            return [chosen] if isinstance(chosen, int) else list(chosen)
        grow = [size + 1, 2 * size, size + 2, 3 * size]
        if policy == "shrink":
            candidates = [size - 1, size // 2, size - 2, *grow]
        elif policy == "grow":
            candidates = grow
        else:
            raise ValueError(f"second_shape={policy!r}: use 'grow', 'shrink', a callable or "
                             "None.")
        return [c for c in dict.fromkeys(candidates) if c >= 2 and c != size]

    def _resized(self, members: list[tuple[int, int]], size: int, new: int) -> list[Any]:
        leaves = list(self.leaves)
        for index, axis in members:
            slot = self.slots[index]
            example = leaves[slot]
            shape = list(example.shape)
            shape[axis] = max(1, shape[axis] + new - size)
            generate = self.options.input_generator or self._generate
            leaves[slot] = generate(self.inputs[index], tuple(shape), example)
        return leaves

    def _generate(self, name: str, shape: tuple[int, ...], example: torch.Tensor) -> torch.Tensor:
        """Random values like ``example``'s: normal floats, ints within its range."""
        if example.dtype == torch.bool:
            return torch.rand(shape, generator=self.generator) < 0.5
        if example.is_floating_point() or example.is_complex():
            return torch.randn(shape, generator=self.generator).to(example.dtype)
        low = int(example.min()) if example.numel() else 0
        high = int(example.max()) if example.numel() else 1
        return torch.randint(low, high + 1, shape, generator=self.generator,
                             dtype=torch.int64).to(example.dtype)

    # -- diagnosis ------------------------------------------------------------------
    def diagnose(self, leaves: list[Any], run: ShapeRun) -> list[str]:
        """The lines that fixed a size: constants that change when the model is traced at
        the new size, else size inputs holding the traced size; with tracing pitfalls."""
        culprits = []
        named = serialize.named_node(self.result.serialized, run.error) if run.error else None
        if named is not None:
            origin = report.origin_of(*named)
            culprits.append(f"{origin.source or 'an unknown line'} (ONNX Runtime failed in "
                            f"{origin.describe()})")
        culprits += self._trace_differences(leaves)
        if len(culprits) <= 1:
            for index, out in enumerate(run.outputs):
                if not out.ok:
                    traced = self.result.graph.outputs[index].type().shape or ()
                    for axis, dim in enumerate(traced):
                        if axis < len(out.expected_shape) and out.expected_shape[axis] != dim:
                            culprits += self._baked(index, axis)
        for pitfall in report.warning_pitfalls(self.result.warnings):
            culprits.append(f"{pitfall.location}: {pitfall.code} ({pitfall.messages[0]})")
        return list(dict.fromkeys(culprits))

    def _baked(self, out: int, axis: int) -> list[str]:
        traced = self.result.graph.outputs[out].type().shape or ()
        size = traced[axis] if axis < len(traced) else None
        if not isinstance(size, int):
            return []
        return report.baked_sizes(self.result.graph, self.result.graph.outputs[out], size)

    def _trace_differences(self, leaves: list[Any]) -> list[str]:
        if not isinstance(self.model, torch.nn.Module) or \
                isinstance(self.model, torch.jit.ScriptModule):
            return []
        first = self._trace(self.leaves)
        second = self._trace(leaves)
        if first is None or second is None:
            return []
        return trace_differences(first, second)

    def _trace(self, leaves: list[Any]) -> torch._C.Graph | None:
        positional, kwargs = pytree.tree_unflatten(leaves, self.spec)
        args = (*positional, kwargs) if kwargs or (positional and isinstance(
            positional[-1], dict)) else tuple(positional)
        with warnings.catch_warnings(), exporting(), \
                select_model_mode_for_export(self.model, self.training), torch.no_grad():
            warnings.simplefilter("ignore")
            try:
                return trace.trace_module(self.model, args).graph
            except OnnxExporterError:
                return None


def trace_differences(first: torch._C.Graph, second: torch._C.Graph) -> list[str]:
    """Where two traces of one model at different input sizes differ: constants that
    took the size's value (a Python value from a tensor), or a different code path."""
    found = []
    a_nodes, b_nodes = list(first.nodes()), list(second.nodes())
    for a, b in zip(a_nodes, b_nodes):
        if a.kind() != b.kind():
            return found + [f"{source_of(a) or 'an unknown line'} (the traced code takes "
                            f"another path at the new size: {a.kind()} became {b.kind()}; "
                            "Python control flow on a size or value is frozen by tracing)"]
        if a.kind() == "prim::Constant" and a.outputsSize() == 1:
            before, after = a.output().toIValue(), b.output().toIValue()
            if _same(before, after):
                continue
            for user in _consumers(a.output()):
                line = source_of(user) or source_of(a) or "an unknown line"
                found.append(f"{line} ({user.kind()} gets the constant {_show(before)} "
                             f"while tracing but {_show(after)} at the new size: a value "
                             "computed in Python from a tensor was frozen into the graph)")
    if len(a_nodes) != len(b_nodes) and not found:
        extra = (a_nodes if len(a_nodes) > len(b_nodes) else b_nodes)[min(len(a_nodes),
                                                                           len(b_nodes))]
        found.append(f"{source_of(extra) or 'an unknown line'} (the traced code runs "
                     "differently at the new size)")
    return list(dict.fromkeys(found))


def _consumers(value: torch._C.Value) -> list[torch._C.Node]:
    """The nodes using ``value``, looking through the lists it is packed into."""
    users = []
    for use in value.uses():
        if use.user.kind() in ("prim::ListConstruct", "prim::TupleConstruct"):
            users += _consumers(use.user.output())
        else:
            users.append(use.user)
    return users


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and \
            a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    return type(a) is type(b) and a == b


def _show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.numel() <= 6:
            return str(value.tolist())
        return f"<{tuple(value.shape)} tensor>"
    return repr(value)


def _user_frame(tb: Any) -> str:
    """The innermost traceback frame in the user's code (outside torch and oxport)."""
    found = "an unknown line"
    for frame in traceback.extract_tb(tb):
        if not frame.filename.startswith((_TORCH_DIR, _OXPORT_DIR + os.sep)):
            found = f"{frame.filename}:{frame.lineno}: {frame.line or ''}".rstrip(": ")
    return found


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _first_failure(run: ShapeRun) -> str:
    for out in run.outputs:
        if not out.ok:
            return f"output {out.name!r}: {out.message}"
    return ""


def __getattr__(name: str) -> Any:
    """``find_mismatch`` and ``GraphInfo`` live in :mod:`oxport.diagnose.mismatch`."""
    if name in ("find_mismatch", "GraphInfo"):
        from oxport.diagnose import mismatch
        return getattr(mismatch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AxisProblem", "GraphInfo", "OutputComparison", "ShapeRun", "VerificationError",
           "VerificationOptions", "VerificationResult", "compare", "find_mismatch",
           "ort_session", "run_ort", "trace_differences", "verify"]
