"""The differential test against torch.onnx's TorchScript exporter (the oracle).

For every model the suite exports (the op packs' declared cases, the ``torch.nn`` layer
table of ``tests/test_nn_modules.py``, the model fixtures of ``tests/models``) at each
opset of :data:`OPSETS` that oxport serves, and for scripted models (the scripted models of
``tests/test_scripting_conformance.py``, and the traced op cases run through
``torch.jit.script``, ``script:`` ids) at :data:`SCRIPT_OPSETS`: where ``torch.onnx.export(dynamo=False)``
succeeds, oxport's file must have the same number, order, dtypes and ranks of inputs and
outputs, and both files must give matching results in ONNX Runtime on the same feeds.
A difference is a bug unless a row of the intended-differences table in
``docs/differences.md`` covers it.

``tests/test_differential.py`` runs this in the suite (CI); ``python -m tests.differential
--write`` runs the same corpus plus the large models and rewrites the summary in
``docs/differences.md``.

The same machinery compares oxport's torch.export front end with torch.onnx's dynamo
exporter (``front_end="dynamo"``: both called with ``dynamo=True``) over the op cases
torch.export can capture, the layers and the small models, at :data:`DYNAMO_OPSETS`
(:func:`dynamo_corpus`; ``tests/test_differential_dynamo.py`` in the suite,
``python -m tests.differential --front-end dynamo --write`` for the full run); its
differences are listed in the dynamo section of ``docs/differences.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import io
import json
import pathlib
import re
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
import torch

import oxport
from oxport import testing
from oxport.diagnose import verification

OPSETS = (9, 13, 17, 20)
#: The opsets the dynamo path (torch.onnx's starts at 18) is compared at.
DYNAMO_OPSETS = (18, 20, 23)
FRONT_ENDS = ("trace", "dynamo")
#: The opsets scripted subjects are compared at.
SCRIPT_OPSETS = testing.SCRIPT_OPSETS
DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "differences.md"
#: Export options both exporters take (an op case with any other option is oxport's alone).
_SHARED_OPTIONS = {"operator_export_type", "do_constant_folding", "keep_initializers_as_inputs",
                   "custom_opsets", "export_params", "output_names"}
#: The options both exporters' dynamo paths take.
_DYNAMO_OPTIONS = {"export_params", "output_names"}


@dataclasses.dataclass
class Subject:
    """One model and its args, exported by both exporters."""

    id: str
    build: Callable[[], tuple[Any, tuple[Any, ...]]]
    opsets: tuple[int, ...]
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    rtol: float = 1e-3
    atol: float = 1e-5
    check: str = "values"


@dataclasses.dataclass
class Outcome:
    """What comparing one subject at one opset found. ``status`` is ``same``, one of the
    differences (``oxport-fails``, ``signature``, ``values``, ``oxport-runtime-fails``), or
    a case there is nothing to judge (:data:`UNJUDGED`)."""

    id: str
    opset: int
    status: str
    detail: str = ""
    #: For a ``values`` difference: whether oxport's outputs match eager PyTorch and
    #: whether torch.onnx's do.
    oxport_matches_eager: bool | None = None
    torch_matches_eager: bool | None = None

    @property
    def is_difference(self) -> bool:
        return self.status not in ("same", *UNJUDGED)


#: Outcomes with nothing to compare: torch.onnx cannot export the model or run its file,
#: or (a traced op case run scripted) torch.jit.script refuses the model.
UNJUDGED = ("torch-fails", "torch-runtime-fails", "not-scriptable")


class NotScriptable(Exception):
    """torch.jit.script refuses a subject's model (there is no scripted model to compare)."""


# -- the corpus -----------------------------------------------------------------------------
def op_case_subjects(scripted: bool = False, front_end: str = "trace") -> list[Subject]:
    """Every declared op case, at the opsets of OPSETS its op's symbolic serves; with
    ``scripted``, every case declared traced, run through ``torch.jit.script`` instead
    (``script:`` ids), at the SCRIPT_OPSETS its symbolic serves; with ``front_end="dynamo"``,
    every case torch.export can capture, at the DYNAMO_OPSETS its symbolic serves."""
    registry = testing.registry_view()
    subjects, seen = [], {}
    dynamo = front_end == "dynamo"
    for case in registry.cases:
        if set(case.export_kwargs) - (_DYNAMO_OPTIONS if dynamo else _SHARED_OPTIONS):
            continue  # oxport-only options: nothing to compare with
        if scripted and case.script:
            continue  # declared scripted: op_case_subjects() has it
        if dynamo and not (testing.exportable(case) or case.not_traceable) or (
                not dynamo and case.not_traceable):
            continue  # a model the front end cannot read
        if dynamo and case.training:
            continue  # torch.onnx's dynamo path exports the eval graph only
        low, high = case.min_opset or 0, case.max_opset or 99
        candidates = SCRIPT_OPSETS if scripted else DYNAMO_OPSETS if dynamo else OPSETS
        opsets = tuple(o for o in candidates
                       if low <= o <= high and registry.lookup(case.op, o) is not None)
        if not opsets:
            continue
        name = str(case)
        seen[name] = seen.get(name, 0) + 1
        options = dict(case.export_kwargs)
        if case.dynamic_axes:
            options["dynamic_axes"] = case.dynamic_axes
        if case.input_names:
            options["input_names"] = case.input_names
        if case.training:
            options["training"] = oxport.TrainingMode.TRAINING
        subject_id = f"{name}#{seen[name]}" if seen[name] > 1 else name
        subjects.append(Subject(
            f"script:{subject_id}" if scripted else subject_id,
            _case_builder(case, scripted), opsets, options, case.rtol, case.atol, case.check))
    return subjects


def _case_builder(case: Any, scripted: bool = False
                  ) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        model = case.model
        if isinstance(model, type) and issubclass(model, torch.nn.Module):
            model = model()
        if case.script and not isinstance(model, (torch.jit.ScriptModule,
                                                  torch.jit.ScriptFunction)):
            model = testing._script(model)
        elif scripted:
            try:
                model = testing.script_case_model(model)
            except Exception as exc:  # noqa: BLE001 - TorchScript's refusals have many types
                raise NotScriptable(_first_line(exc)) from exc
        inputs = testing.make_inputs(case)
        return testing.as_module(model), (*inputs, case.kwargs) if case.kwargs else inputs
    return build


def layer_subjects(opsets: tuple[int, ...] = OPSETS) -> list[Subject]:
    """The ``torch.nn`` layer table of tests/test_nn_modules.py (the supported layers), at
    the ``opsets`` each serves."""
    from tests import test_nn_modules as layers

    subjects = []
    for name, spec in layers.CASES.items():
        if name in layers.EXPECTED_UNSUPPORTED:
            continue
        served = tuple(o for o in opsets if o >= spec.min_opset)

        def build(spec: Any = spec) -> tuple[Any, tuple[Any, ...]]:
            return layers._model(spec), layers._inputs(spec)
        subjects.append(Subject(f"nn.{name}", build, served, rtol=spec.rtol, atol=spec.atol))
    return subjects


def model_subjects(large: bool = False, opsets: tuple[int, ...] = OPSETS) -> list[Subject]:
    """The model fixtures of tests/models at small inputs, at ``opsets``; ``large`` adds
    the ImageNet models at 224x224 (minutes each: only in the full run)."""
    from tests.models import (
        alexnet,
        dcgan,
        densenet,
        inception,
        mlp,
        resnet,
        super_resolution,
        vgg,
        word_language_model,
    )

    def seeded(make: Callable[[], torch.nn.Module], *shapes: Any
               ) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
        def build() -> tuple[Any, tuple[Any, ...]]:
            torch.manual_seed(0)
            model = make().eval()
            return model, tuple(s() if callable(s) else torch.randn(*s) for s in shapes)
        return build

    tokens = lambda: torch.randint(0, 50, (5, 2))  # noqa: E731 - (seq, batch) ids

    def lm(kind: str) -> Callable[[], torch.nn.Module]:
        return lambda: _LanguageModel(word_language_model.RNNModel(kind, 50, 16, 16, 2))

    subjects = [
        Subject("model.mlp", seeded(lambda: mlp.mlp_stack(4), (2, 16)), opsets),
        Subject("model.dcgan.generator", seeded(dcgan.Generator, (2, 100, 1, 1)), opsets),
        Subject("model.dcgan.discriminator", seeded(dcgan.Discriminator, (2, 3, 64, 64)),
                opsets),
        Subject("model.super_resolution",
                seeded(lambda: super_resolution.SuperResolutionNet(3), (1, 1, 32, 32)), opsets),
        Subject("model.resnet18.narrow",
                seeded(lambda: resnet.resnet18(num_classes=10, width=8), (1, 3, 64, 64)),
                opsets),
        *(Subject(f"model.word_language_model.{kind}", seeded(lm(kind), tokens), opsets,
                  atol=1e-4) for kind in ("LSTM", "GRU", "RNN_TANH")),
    ]
    if large:
        subjects += [
            Subject("model.alexnet", seeded(alexnet.alexnet, (1, 3, 224, 224)), opsets,
                    atol=1e-4),
            Subject("model.vgg16", seeded(vgg.vgg16, (1, 3, 224, 224)), opsets, atol=1e-4),
            Subject("model.resnet50", seeded(resnet.resnet50, (1, 3, 224, 224)), opsets,
                    atol=1e-4),
            Subject("model.densenet121", seeded(densenet.densenet121, (1, 3, 224, 224)),
                    opsets, atol=1e-4),
            Subject("model.inception_v3", seeded(inception.inception_v3, (1, 3, 299, 299)),
                    opsets, atol=1e-4),
        ]
    return subjects


def conformance_subjects() -> list[Subject]:
    """The scripted models of tests/test_scripting_conformance.py (one per construct
    scripted code uses), at SCRIPT_OPSETS."""
    from tests import test_scripting_conformance as conformance

    subjects = []
    for name, spec in conformance.CASES.items():
        def build(spec: Any = spec) -> tuple[Any, tuple[Any, ...]]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                return torch.jit.script(spec.make().eval()), spec.args
        subjects.append(Subject(f"script:conformance.{name}", build, SCRIPT_OPSETS))
    return subjects


class _LanguageModel(torch.nn.Module):
    """The word language model with a zero initial state (the forward tests export)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> Any:
        return self.model(tokens, self.model.init_hidden(tokens.shape[1]))


def corpus(large: bool = False) -> list[Subject]:
    return [*op_case_subjects(), *layer_subjects(), *model_subjects(large),
            *conformance_subjects(), *op_case_subjects(scripted=True)]


def dynamo_corpus(large: bool = False) -> list[Subject]:
    """What the dynamo path is compared over: the op cases torch.export can capture, the
    layers and the models, at DYNAMO_OPSETS."""
    return [*op_case_subjects(front_end="dynamo"), *layer_subjects(DYNAMO_OPSETS),
            *model_subjects(large, DYNAMO_OPSETS)]


# -- one comparison -------------------------------------------------------------------------
def _cloned(args: tuple[Any, ...]) -> tuple[Any, ...]:
    from torch.utils import _pytree as pytree
    return pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, args)


def signature(proto: onnx.ModelProto) -> tuple[list[tuple[str, int | None]], ...]:
    """(inputs, outputs) of a model, each a list of (dtype name, rank or None)."""
    def describe(values: Any) -> list[tuple[str, int | None]]:
        result = []
        for value in values:
            tensor = value.type.tensor_type
            rank = len(tensor.shape.dim) if tensor.HasField("shape") else None
            result.append((onnx.TensorProto.DataType.Name(tensor.elem_type), rank))
        return result
    return describe(proto.graph.input), describe(proto.graph.output)


def _same_signature(ours: list[Any], theirs: list[Any]) -> bool:
    return len(ours) == len(theirs) and all(
        a[0] == b[0] and (a[1] == b[1] or None in (a[1], b[1])) for a, b in zip(ours, theirs))


def _session(proto: bytes) -> Any:
    return verification.ort_session(onnx.load_from_string(proto))


def _run(proto: bytes | Any, names: list[str], values: list[np.ndarray]) -> list[np.ndarray]:
    """Run a file (or a session made by :func:`_session`) on ``values`` fed to ``names``."""
    session = _session(proto) if isinstance(proto, bytes) else proto
    return session.run(None, dict(zip(names, values)))


def _items(outputs: list[Any]) -> list[Any]:
    """Outputs with each Sequence output (a list) replaced by its items."""
    return [item for output in outputs
            for item in (output if isinstance(output, list) else [output])]


def _close(want: list[Any], got: list[Any], subject: Subject) -> bool:
    want, got = _items(want), _items(got)
    if len(want) != len(got):
        return False
    for a, b in zip(want, got):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if subject.check == "values" and not np.allclose(
                a.astype(np.float64) if a.dtype.kind == "f" else a,
                b.astype(np.float64) if b.dtype.kind == "f" else b,
                rtol=subject.rtol, atol=subject.atol, equal_nan=True):
            return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def _prepared(subject: Subject, opset: int
              ) -> tuple[Any, tuple[Any, ...], dict[str, Any], Callable[..., Outcome]]:
    """The subject's model and args (:func:`_built`), the export options at ``opset``, and
    its outcome maker."""
    model, args = _built(subject)
    return model, args, {"opset_version": opset, **subject.options}, _outcome_maker(
        subject, opset)


def _torch_onnx_file(model: Any, args: tuple[Any, ...], options: dict[str, Any],
                     front_end: str) -> bytes:
    """torch.onnx's file of ``model`` through ``front_end`` (its dynamo path as it is
    called by default: optimized, no report)."""
    if front_end == "dynamo":
        program = torch.onnx.export(model, _cloned(args), dynamo=True, **options)
        return program.model_proto.SerializeToString()
    buffer = io.BytesIO()
    torch.onnx.export(model, _cloned(args), buffer, dynamo=False, **options)
    return buffer.getvalue()


def compare(subject: Subject, opset: int, front_end: str = "trace") -> Outcome:
    """Export ``subject`` with both exporters at ``opset`` through ``front_end`` (``trace``:
    ``dynamo=False``, ``dynamo``: ``dynamo=True``) and compare the files."""
    try:
        model, args, options, outcome = _prepared(subject, opset)
    except NotScriptable as exc:
        return Outcome(subject.id, opset, "not-scriptable", str(exc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            theirs = _torch_onnx_file(model, args, options, front_end)
        except Exception as exc:  # noqa: BLE001 - the oracle cannot export it: nothing to judge
            return outcome("torch-fails", _first_line(exc))
        model, args = _built(subject)
        try:  # a file ONNX Runtime refuses to load (types it lacks) has no signature to match
            their_session = _session(theirs)
        except Exception as exc:  # noqa: BLE001
            return outcome("torch-runtime-fails", _first_line(exc))
        try:
            result = oxport.convert(model, _cloned(args), check=False,
                                    dynamo=front_end == "dynamo", **options)
        except Exception as exc:  # noqa: BLE001 - a difference, reported with its message
            return outcome("oxport-fails", _first_line(exc))
        ours = result.to_bytes()
        our_sig = signature(onnx.load_from_string(ours))
        their_sig = signature(onnx.load_from_string(theirs))
        if not (_same_signature(our_sig[0], their_sig[0])
                and _same_signature(our_sig[1], their_sig[1])):
            eager = _eager_signature(subject, options)
            return outcome("signature", f"oxport {our_sig}, torch.onnx {their_sig}",
                           _same_signature(our_sig[1], eager),
                           _same_signature(their_sig[1], eager))
        feeds = result.feeds(args)
        values = list(feeds.values())
        their_names = [i.name for i in onnx.load_from_string(theirs).graph.input][:len(values)]
        try:
            expected_theirs = _run(their_session, their_names, values)
        except Exception as exc:  # noqa: BLE001 - torch.onnx's file does not run
            return outcome("torch-runtime-fails", _first_line(exc))
        try:
            got = _run(ours, list(feeds), values)
        except Exception as exc:  # noqa: BLE001
            return outcome("oxport-runtime-fails", _first_line(exc))
        if _close(expected_theirs, got, subject):
            return outcome("same")
        eager = [testing.to_numpy(t) for t in _eager(subject, options)]
    return outcome("values", "outputs differ", _close(eager, got, subject),
                   _close(eager, expected_theirs, subject))


def oxport_alone(subject: Subject, opset: int, front_end: str = "trace") -> Outcome:
    """Where torch.onnx gives nothing to compare: oxport's file must match eager, or oxport
    must refuse with one of its own errors (``refused``); anything else is a difference."""
    model, args, options, outcome = _prepared(subject, opset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = oxport.convert(model, _cloned(args), check=False,
                                    dynamo=front_end == "dynamo", **options)
        except oxport.errors.OnnxExporterError as exc:
            return outcome("refused", _first_line(exc))
        except Exception as exc:  # noqa: BLE001 - not one of oxport's errors: a crash
            return outcome("oxport-fails", _first_line(exc))
        feeds = result.feeds(args)
        try:
            got = _run(result.to_bytes(), list(feeds), list(feeds.values()))
        except Exception as exc:  # noqa: BLE001
            return outcome("oxport-runtime-fails", _first_line(exc))
        eager = [testing.to_numpy(t) for t in _eager(subject, options)]
    if _close(eager, got, subject):
        return outcome("same")
    return outcome("values", "oxport differs from eager", False, None)


def _built(subject: Subject) -> tuple[Any, tuple[Any, ...]]:
    """The subject's model and args, built afresh under a fixed seed: each exporter and
    eager get their own (exporting runs the model, which may update its buffers)."""
    torch.manual_seed(0)
    return subject.build()


def _eager(subject: Subject, options: dict[str, Any]) -> list[torch.Tensor]:
    model, args = _built(subject)
    training = options.get("training", oxport.TrainingMode.EVAL)
    positional, named = oxport.frontends.arguments.normalize_args(_cloned(args))
    call = model
    if isinstance(model, torch.jit.ScriptModule) and not hasattr(model, "forward"):
        # a scripted nn.LSTM has only its forward overloads to call
        call = model._c._get_method(oxport.frontends.torchscript.trace._forward_name(model, positional))
    # In the grad mode the exports assume: a trace runs in the caller's (as torch.onnx's),
    # a scripted graph's torch.is_grad_enabled() is False.
    scripted = isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
    with oxport.select_model_mode_for_export(model, training), \
            torch.set_grad_enabled(torch.is_grad_enabled() and not scripted):
        return [t.detach() for t in testing.flatten_expected(call(*positional, **named))]


def _eager_signature(subject: Subject, options: dict[str, Any]
                     ) -> list[tuple[str, int | None]]:
    """Eager PyTorch's outputs as (ONNX dtype name, rank)."""
    from oxport.types import onnx_dtype
    return [(onnx.TensorProto.DataType.Name(onnx_dtype(t.dtype)), t.dim())
            for t in _eager(subject, options)]


def _outcome_maker(subject: Subject, opset: int) -> Callable[..., Outcome]:
    def make(status: str, detail: str = "", ours: bool | None = None,
             theirs: bool | None = None) -> Outcome:
        return Outcome(subject.id, opset, status, detail, ours, theirs)
    return make


# -- the intended differences ---------------------------------------------------------------
@dataclasses.dataclass
class Intended:
    """A row of the intended-differences table."""

    status: str
    cases: str
    opsets: str
    reason: str
    #: "intended" or "open bug" (the table it comes from).
    section: str = "intended"

    def covers(self, outcome: Outcome) -> bool:
        if self.status.endswith(" (torch.onnx wrong)"):
            status_ok = (outcome.status == self.status.split()[0]
                         and outcome.oxport_matches_eager is True
                         and outcome.torch_matches_eager is False)
        else:
            status_ok = outcome.status == self.status
        opsets_ok = self.opsets == "all" or str(outcome.opset) in re.split(r"[, ]+", self.opsets)
        # A row naming an op case covers the case run scripted too (its ``script:`` id).
        ids = {outcome.id, outcome.id.removeprefix("script:")}
        return status_ok and opsets_ok and any(
            fnmatch.fnmatchcase(i, p.strip().strip("`").replace("[", "[[]"))
            for p in self.cases.split(",") for i in ids)  # only * is a wildcard: [name] is literal


#: The headings of each front end's tables (intended, open bugs) and summary in
#: docs/differences.md; a section ends at the next heading of its level or above.
_HEADINGS = {
    "trace": ("## Intended differences", "## Known differences (open bugs)",
              "## Summary of the last full run"),
    "dynamo": ("### Intended differences of the dynamo path",
               "### Known differences of the dynamo path (open bugs)",
               "### Summary of the last full run of the dynamo path"),
}


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of its level or above."""
    level = heading.split(" ", 1)[0]
    body = text.split(heading + "\n", 1)[1]
    ends = [body.find("\n" + "#" * n + " ") for n in range(1, len(level) + 1)]
    ends = [e for e in ends if e >= 0]
    return body[:min(ends)] if ends else body


def intended_differences(text: str | None = None, front_end: str = "trace") -> list[Intended]:
    """The rows of the tables under '## Intended differences' and '## Known differences
    (open bugs)' in docs/differences.md (their ``###`` counterparts in the dynamo section
    for ``front_end="dynamo"``)."""
    text = DOC.read_text() if text is None else text
    intended, open_bugs, _ = _HEADINGS[front_end]
    rows = []
    for heading, section in ((intended, "intended"), (open_bugs, "open bug")):
        part = _section(text, heading)
        for line in part.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 4 and line.startswith("|") and cells[0] not in ("difference", "---"):
                rows.append(Intended(cells[0].strip("`"), cells[1], cells[2], cells[3], section))
    return rows


def check(subject: Subject, opset: int, table: list[Intended], front_end: str = "trace",
          listed_in: str = "docs/differences.md's intended differences") -> None:
    """The pytest check of one comparison: the same as torch.onnx, or a difference ``table``
    explains; where torch.onnx fails, oxport matches eager or refuses cleanly. A difference
    the table lists as an open bug is an expected failure (xfail); a model torch.jit.script
    refuses is skipped."""
    import pytest

    def xfail_if_open_bug(outcome: Outcome) -> None:
        row = next((r for r in table if r.covers(outcome)), None)
        if row is not None and row.section == "open bug":
            pytest.xfail(f"open bug listed in docs/differences.md: {row.reason}")

    outcome = compare(subject, opset, front_end)
    if outcome.status == "not-scriptable":
        pytest.skip(f"torch.jit.script refuses the model: {outcome.detail}")
    if outcome.status in ("torch-fails", "torch-runtime-fails"):
        alone = oxport_alone(subject, opset, front_end)
        if alone.status not in ("same", "refused"):
            xfail_if_open_bug(alone)
        assert alone.status in ("same", "refused"), (
            f"{subject.id} at opset {opset}: torch.onnx {outcome.status} ({outcome.detail}); "
            f"oxport neither matches eager nor refuses cleanly: {alone.status}: {alone.detail}")
        return
    xfail_if_open_bug(outcome)
    assert not unexplained(outcome, table), (
        f"{subject.id} at opset {opset}: {outcome.status}: {outcome.detail} (oxport matches "
        f"eager: {outcome.oxport_matches_eager}, torch.onnx: {outcome.torch_matches_eager}). "
        f"Fix it, or list it with its reason in {listed_in}.")


def unexplained(outcome: Outcome, table: list[Intended]) -> bool:
    return outcome.is_difference and not any(row.covers(outcome) for row in table)


# -- the full run and its summary -----------------------------------------------------------
def run_all(runs: list[tuple[Subject, int]], front_end: str = "trace") -> Iterator[Outcome]:
    for subject, opset in runs:
        yield compare(subject, opset, front_end)


def summary(outcomes: list[Outcome], table: list[Intended], seconds: float,
            front_end: str = "trace", command: str = " --write") -> str:
    """The run's counts and every difference, for docs/differences.md (``command``: the
    options the run was made with)."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    compared = sum(1 for o in outcomes if o.status not in UNJUDGED)
    if front_end == "dynamo":
        run = (f"Run with `python -m tests.differential --front-end dynamo{command}` "
               f"(torch {torch.__version__}, onnxruntime {_ort_version()}, {seconds:.0f} s): "
               f"{len(outcomes)} exports of {len({o.id for o in outcomes})} models at opsets "
               f"{', '.join(map(str, DYNAMO_OPSETS))}, both exporters called with "
               "`dynamo=True`.")
    else:
        run = (f"Run with `python -m tests.differential{command}` (torch {torch.__version__}, "
               f"onnxruntime {_ort_version()}, {seconds:.0f} s): "
               f"{len(outcomes)} exports of {len({o.id for o in outcomes})} models at opsets "
               f"{', '.join(map(str, OPSETS))} ({len({o.id for o in outcomes if _scripted(o)})} "
               f"of them scripted, at {', '.join(map(str, SCRIPT_OPSETS))}: "
               f"{sum(1 for o in outcomes if _scripted(o))} exports).")
    lines = [
        run,
        "",
        "| outcome | count |",
        "| --- | --- |",
        *(f"| {status} | {count} |" for status, count in sorted(counts.items())),
        f"| compared (torch.onnx exported and ran) | {compared} |",
        "",
    ]
    differences = [o for o in outcomes if o.is_difference]
    if differences:
        lines += ["Each difference (one row per model and kind, with the opsets it shows at) and "
                  "the row of the tables above that explains it:", "",
                  "| model | opsets | difference | explained by |", "| --- | --- | --- | --- |"]
        grouped: dict[tuple[str, str], list[Outcome]] = {}
        for o in differences:
            grouped.setdefault((o.id, o.status), []).append(o)
        for (model_id, status), group in grouped.items():
            first = group[0]
            row = next((r for r in table if r.covers(first)), None)
            detail = first.detail.replace("|", "/")[:140]
            if first.oxport_matches_eager is not None:
                detail += (f" (eager: oxport {'✓' if first.oxport_matches_eager else '✗'}, "
                           f"torch.onnx {'✓' if first.torch_matches_eager else '✗'})")
            where = row.section if row else "**unexplained**"
            lines.append(f"| `{model_id}` | {', '.join(str(o.opset) for o in group)} | "
                         f"{status}: {detail} | {where} |")
    return "\n".join(lines) + "\n"


def _scripted(outcome: Outcome) -> bool:
    return outcome.id.startswith("script:")


def _ort_version() -> str:
    import onnxruntime
    return onnxruntime.__version__


def write_summary(text: str, front_end: str = "trace") -> None:
    """Replace the summary section of ``front_end`` in docs/differences.md by ``text``."""
    doc = DOC.read_text()
    heading = _HEADINGS[front_end][2]
    head, rest = doc.split(heading + "\n", 1)
    old = _section(doc, heading)
    DOC.write_text(f"{head}{heading}\n\n{text}{rest[len(old):]}")


def sampled(subjects: list[Subject], every: int) -> list[tuple[Subject, int]]:
    """(subject, opset) runs: with ``every`` > 1, one subject in ``every``, at one of its
    opsets in turn (CI's budget); with 1, every subject at every opset."""
    if every <= 1:
        return [(s, o) for s in subjects for o in s.opsets]
    return [(s, s.opsets[index // every % len(s.opsets)])
            for index, s in enumerate(subjects) if index % every == 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--front-end", choices=FRONT_ENDS, default="trace",
                        help="trace: both exporters with dynamo=False; dynamo: dynamo=True")
    parser.add_argument("--write", action="store_true",
                        help="rewrite the front end's summary in docs/differences.md")
    parser.add_argument("--no-large", action="store_true",
                        help="leave out the 224x224 ImageNet models")
    parser.add_argument("--sample", type=int, default=1,
                        help="one model in this many, at one of its opsets in turn")
    parser.add_argument("-k", default="", help="only models whose id contains this")
    parser.add_argument("--json", help="also save the outcomes to this JSON file")
    parser.add_argument("--load", help="summarise the outcomes saved by --json instead of running")
    options = parser.parse_args()
    started = time.perf_counter()
    if options.load:
        saved = json.loads(pathlib.Path(options.load).read_text())
        outcomes, seconds = [Outcome(**o) for o in saved["outcomes"]], saved["seconds"]
    else:
        everything = (dynamo_corpus if options.front_end == "dynamo" else corpus)(
            large=not options.no_large)
        subjects = [s for s in everything if options.k in s.id]
        outcomes = []
        for outcome in run_all(sampled(subjects, options.sample), options.front_end):
            outcomes.append(outcome)
            if outcome.is_difference:
                print(f"{outcome.id} opset {outcome.opset}: {outcome.status} {outcome.detail}",
                      flush=True)
        seconds = time.perf_counter() - started
    if options.json:
        pathlib.Path(options.json).write_text(json.dumps(
            {"seconds": seconds, "outcomes": [dataclasses.asdict(o) for o in outcomes]}))
    command = "".join([f" --sample {options.sample}" if options.sample > 1 else "",
                       " --no-large" if options.no_large else "",
                       f" -k {options.k}" if options.k else "", " --write"])
    text = summary(outcomes, intended_differences(front_end=options.front_end), seconds,
                   options.front_end, command)
    print(text)
    if options.write:
        write_summary(text, options.front_end)

if __name__ == "__main__":
    main()
