"""Reliability: export state per thread, symbolic results checked by the walker, clear
messages for bad input."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import oxport
from oxport.exporter import state as exporting

TOL = {"rtol": 1e-5, "atol": 1e-6}


# -- is_in_onnx_export: per thread, per export ---------------------------------------------
class Branching(nn.Module):
    """Doubles its input inside an export, adds one in eager code. With ``meet`` (a barrier)
    every party's forward asks ``is_in_onnx_export()`` while all of them are inside theirs,
    so the exports and the eager call overlap."""

    def __init__(self, meet: threading.Barrier | None = None) -> None:
        super().__init__()
        self.meet = meet
        self.seen: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.meet is not None:
            self.meet.wait()
        exporting = oxport.is_in_onnx_export()
        self.seen.append(exporting)
        if self.meet is not None:
            self.meet.wait()
        return x * 2 if exporting else x + 1


def test_two_threads_export_while_a_third_runs_eager_forwards(tmp_path):
    meet = threading.Barrier(3, timeout=60)
    exporters = [Branching(meet) for _ in range(2)]
    eager = Branching(meet)
    x = torch.randn(2, 3)
    eager_results: list[torch.Tensor] = []
    errors: list[BaseException] = []

    def run(fn) -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            meet.abort()

    def export(index: int) -> None:
        oxport.export(exporters[index], (x,), str(tmp_path / f"m{index}.onnx"))
        assert not oxport.is_in_onnx_export()

    threads = [threading.Thread(target=run, args=(lambda i=i: export(i),)) for i in range(2)]
    threads.append(threading.Thread(target=run, args=(lambda: eager_results.append(eager(x)),)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert [m.seen[:1] for m in exporters] == [[True], [True]]
    assert eager.seen == [False]
    torch.testing.assert_close(eager_results[0], x + 1)
    for index in range(2):
        path = str(tmp_path / f"m{index}.onnx")
        onnx.checker.check_model(onnx.load(path), full_check=True)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name:
                                                      x.numpy()})[0], (x * 2).numpy(), **TOL)
    assert not oxport.is_in_onnx_export()
    assert Branching()(x).equal(x + 1)  # later eager calls take the eager branch


def test_export_state_nests_and_is_restored():
    assert not oxport.is_in_onnx_export()
    with exporting.exporting():
        with exporting.exporting():
            assert oxport.is_in_onnx_export()
        assert oxport.is_in_onnx_export()  # the inner export does not end the outer one
        seen: list[bool] = []
        other = threading.Thread(target=lambda: seen.append(oxport.is_in_onnx_export()))
        other.start()
        other.join()
        assert seen == [False]
    assert not oxport.is_in_onnx_export()


class Waiting(nn.Module):
    """Warns ``say`` and sets ``entered`` when its forward runs, then waits for ``leave``
    before it calls its submodule ``act``."""

    def __init__(self, entered: threading.Event, leave: threading.Event, say: str = "") -> None:
        super().__init__()
        self.entered, self.leave, self.say = entered, leave, say
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.say:
            warnings.warn(self.say, UserWarning)
        self.entered.set()
        assert self.leave.wait(60)
        return self.act(x + 1)


def _overlap(first: nn.Module, second: nn.Module, events, export, middle=lambda: None) -> None:
    """Run ``export(first)`` and ``export(second)`` in two threads, overlapping: the first
    starts first and ends first (``events``: first entered, second entered, second may
    leave); ``middle()`` runs between the two ends."""
    first_in, second_in, second_may_leave = events
    errors: list[BaseException] = []

    def run(model: nn.Module) -> None:
        try:
            export(model)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            second_in.set()

    threads = [threading.Thread(target=run, args=(m,)) for m in (first, second)]
    try:
        threads[0].start()
        assert first_in.wait(60)
        threads[1].start()
        threads[0].join(60)
        middle()
    finally:
        second_may_leave.set()
        threads[1].join(60)
    assert not errors, errors


def test_overlapping_exports_record_their_own_warnings_and_leave_the_rest_alone(recwarn):
    """Each trace records its model's warnings; afterwards warnings reach the process's
    handler again (the second trace to end restored the first one's recording)."""
    events = [threading.Event() for _ in range(3)]
    first = Waiting(events[0], events[1], say="from the first model")
    second = Waiting(events[1], events[2], say="from the second model")
    results: dict[str, list[str]] = {}

    def export(model: Waiting) -> None:
        result = oxport.convert(model, torch.randn(2))
        results[model.say] = [str(w.message) for w in result.warnings]

    _overlap(first, second, events, export)
    assert results == {"from the first model": ["from the first model"],
                       "from the second model": ["from the second model"]}
    recwarn.clear()
    warnings.warn("after both exports", UserWarning)
    assert [str(w.message) for w in recwarn] == ["after both exports"]


def test_overlapping_exports_record_their_own_module_scopes():
    """The second trace still records its submodule calls after the first trace ended (the
    tracer's module map is one per process)."""
    events = [threading.Event() for _ in range(3)]
    scopes: list[list[str]] = []
    _overlap(Waiting(events[0], events[1]), Waiting(events[1], events[2]), events,
             lambda model: scopes.append([n.scope for n in oxport.convert(
                 model, torch.randn(2)).graph.nodes if n.op_type == "Relu"]))
    assert scopes == [["act"], ["act"]]
    assert torch.jit._trace._trace_module_map is None


def test_overlapping_verbose_exports_leave_the_log_as_it_was(capsys):
    """The first export to start ends first: the second must not restore the log state it
    saw (turned on by the first) when it ends."""
    logger = logging.getLogger("oxport")
    before = (logger.level, logger.disabled, list(logger.handlers))
    events = [threading.Event() for _ in range(3)]

    def second_still_logs() -> None:
        assert logger.handlers and logger.level == logging.INFO

    try:
        _overlap(Waiting(events[0], events[1]), Waiting(events[1], events[2]), events,
                 lambda model: oxport.convert(model, torch.randn(2), verbose=True),
                 second_still_logs)
        assert (logger.level, logger.disabled, list(logger.handlers)) == before
    finally:
        logger.setLevel(before[0])
        logger.disabled = before[1]
        logger.handlers[:] = before[2]
    capsys.readouterr()


# -- what a symbolic returns is checked ------------------------------------------------------
class Erf(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.erf(x)


@pytest.fixture
def erf_symbolic():
    """``erf_symbolic(fn)`` registers ``fn`` as the symbolic of aten::erf for the test."""
    registered = []

    def register(fn) -> None:
        oxport.register_custom_op_symbolic("aten::erf", fn, 9)
        registered.append(fn)

    yield register
    if registered:
        oxport.unregister_custom_op_symbolic("aten::erf", 9)


@pytest.mark.parametrize("returns, message", [
    (lambda g, x: (g.op("Neg", x), g.op("Erf", x)), "returned 2 values for an op with 1 output"),
    (lambda g, x: 3, "returned int 3, not its output"),
    (lambda g, x: torch.ones(3), "returned a torch.Tensor, not its output"),
    (lambda g, x: "Erf", "returned str 'Erf', not its output"),
    (lambda g, x: [g.op("Erf", x), 2.0][1:], "returned float 2.0 among its outputs"),
], ids=["two_values", "int", "tensor", "str", "float_in_a_list"])
def test_a_symbolic_returning_something_else_than_its_outputs_is_a_clear_error(
        erf_symbolic, returns, message):
    erf_symbolic(returns)
    with pytest.raises(oxport.errors.SymbolicError) as info:
        oxport.convert(Erf(), torch.randn(3))
    text = str(info.value)
    assert message in text
    assert "The symbolic for aten::erf from register_custom_op_symbolic" in text
    assert "it must return a Value" in text and "test_reliability.py" in text


def test_a_symbolic_may_return_its_one_output_in_a_tuple(erf_symbolic):
    erf_symbolic(lambda g, x: (g.op("Erf", x),))
    x = torch.randn(3)
    session = ort.InferenceSession(oxport.convert(Erf(), x).model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0],
                               torch.erf(x).numpy(), **TOL)


# -- bad input gets a message naming the problem and the fix ---------------------------------
class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


@pytest.mark.parametrize("argument, names, message", [
    ("input_names", [1], r"input_names\[0\] is 1 \(int\), not a str"),
    ("output_names", ["y", None], r"output_names\[1\] is None \(NoneType\), not a str"),
    ("input_names", "image", r"input_names is the str 'image', not a list of names: pass "
                             r"input_names=\['image'\]"),
])
def test_names_that_are_not_strings(tmp_path, argument, names, message):
    with pytest.raises(oxport.errors.InvalidExportArgumentError, match=message):
        oxport.export(Linear(), torch.randn(1, 3), str(tmp_path / "m.onnx"), **{argument: names})
    assert list(tmp_path.iterdir()) == []


class Add(nn.Module):
    def forward(self, x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        return x + offset


@pytest.mark.parametrize("front_end", ["trace", "script", "dynamo"])
def test_a_numpy_array_in_args_is_named(front_end):
    model = torch.jit.script(Add()) if front_end == "script" else Add()
    with pytest.raises(oxport.errors.InvalidExportArgumentError,
                       match=r"Input 'offset' in args is a numpy.ndarray; export takes torch "
                             r"tensors: pass torch.from_numpy\(offset\) instead"):
        oxport.convert(model, (torch.randn(3), np.ones(3, dtype=np.float32)),
                       dynamo=front_end == "dynamo")


def test_meta_parameters_and_inputs_are_clear_errors(tmp_path):
    with torch.device("meta"):
        model = Linear()
    with pytest.raises(oxport.errors.InvalidExportArgumentError,
                       match=r"'fc.weight', 'fc.bias' are on the meta device .* model.to_empty"):
        oxport.export(model, torch.randn(1, 3), str(tmp_path / "m.onnx"))
    with pytest.raises(oxport.errors.InvalidExportArgumentError,
                       match="Input 'x' in args is on the meta device"):
        oxport.convert(Linear(), torch.randn(1, 3, device="meta"))
    assert list(tmp_path.iterdir()) == []


def test_oxport_plugins_works_in_a_fresh_interpreter():
    script = "import oxport; oxport.plugins.reset(); print(callable(oxport.plugins.load))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr


def test_runtime_registration_below_opset_7_means_every_opset_as_in_torch_onnx(erf_symbolic):
    """Intended, and documented in docs/modes.md: torch.onnx takes any opset from 1 (the seeds
    register prim::PythonOp at 1); oxport exports nothing below 7, so 1-6 mean "from 7"."""
    oxport.register_custom_op_symbolic("aten::erf", lambda g, x: g.op("Neg", x), 6)
    try:
        proto = oxport.convert(Erf(), torch.randn(3), opset_version=7).model_proto
    finally:
        oxport.unregister_custom_op_symbolic("aten::erf", 6)
    assert [n.op_type for n in proto.graph.node] == ["Neg"]
    with pytest.raises(oxport.errors.RegistryError, match="from 7 .* to 26"):
        oxport.register_custom_op_symbolic("aten::erf", lambda g, x: g.op("Neg", x), 27)
