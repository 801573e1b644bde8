"""``oxport doctor``: a pre-flight check of a model, without writing a file.

It lists every op that would not convert (with its count, source line, the lowest
opset that serves it, the installed plugins that serve it at other opsets and the
fallback modes that would take it) and the tracing pitfalls the model shows (Python
values from ``.item()``, NumPy, ``Tensor.data``, in-place updates of sizes), and exits
non-zero when the export would fail. ``--dynamo`` checks the torch.export front end's
reading of the model (``export(..., dynamo=True)``) instead of the tracer's: the source
lines come from the FX nodes' stack traces.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from oxport import api, plugins
from oxport.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_input_options,
    dynamic_axes_of,
    given_inputs,
    load_target,
    opset_arg,
    unknown_axis_name,
)
from oxport.diagnose import report
from oxport.errors import DynamicAxesWarning, OnnxExporterError, advising_cli, how_to_set
from oxport.exporter import pipeline
from oxport.exporter.options import check_opset
from oxport.registry import RegistryView
from oxport.types import DEFAULT_OPSET, TrainingMode

EXIT_CODES = f"""exit status:
  {EXIT_OK}  the export would succeed (pitfalls, if any, are warnings)
  {EXIT_FAILED}  the export would fail: unconvertible ops (all listed), or another export error
  {EXIT_USAGE}  usage error: a bad shape string, a target that cannot be loaded"""


def add_doctor_command(sub: Any, help: str) -> None:
    """Add ``oxport doctor`` to the subcommand parsers."""
    p = sub.add_parser(
        "doctor", help=help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Check that a model would export, without writing anything: every op "
                    "that would not convert (count, source line, minimum opset, plugins and "
                    "fallback modes that could serve it) and the tracing pitfalls of its "
                    "code (.item(), NumPy, Tensor.data, in-place updates of shape values, "
                    "sizes of --dynamic-axis axes made Python numbers). The inputs, their "
                    "names and dynamic axes are given as to `oxport export`.",
        epilog=EXIT_CODES)
    p.add_argument("target", metavar="MODULE:FACTORY",
                   help="an nn.Module, or a callable returning one, e.g. my_models:make_net")
    add_input_options(p)
    p.add_argument("--opset", type=opset_arg, default=None,
                   help=f"the target opset (default {DEFAULT_OPSET})")
    p.add_argument("--dynamo", action="store_true",
                   help="check the torch.export front end (oxport export --dynamo) instead of "
                        "the TorchScript tracer")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(run=run_doctor)


@dataclasses.dataclass
class OpFinding:
    """One op kind that would not convert."""

    op: str
    count: int
    sources: list[str]
    min_opset: int | None
    reason: str
    #: Installed symbolics for the op: "plugin (dist version) serves opsets N..M".
    providers: list[str]
    #: Fallback modes that would export it, with how to enable each.
    fallbacks: list[str]

    def describe(self, opset: int) -> str:
        uses = f"{self.count} use{'s' if self.count != 1 else ''}"
        where = f", first at {self.sources[0]}" if self.sources and self.sources[0] else ""
        lines = [f"  {self.op} ({uses}{where})"]
        if self.min_opset is not None and self.min_opset > opset:
            lines.append(f"    served from opset {self.min_opset}: export with --opset "
                         f"{self.min_opset} or higher")
        elif self.reason:
            lines.append(f"    {self.reason}")
        lines += [f"    plugin: {p}" for p in self.providers]
        if not self.providers:
            lines.append("    no installed plugin serves it at any opset")
        lines += [f"    fallback: {f}" for f in self.fallbacks]
        return "\n".join(lines)


@dataclasses.dataclass
class Diagnosis:
    """What ``oxport doctor`` found."""

    opset: int
    ops: list[OpFinding]
    pitfalls: list[report.Pitfall]
    #: Another reason the export would fail (tracing, a symbolic's error, the checker).
    error: str = ""

    @property
    def would_fail(self) -> bool:
        return bool(self.ops or self.error)

    def to_json(self) -> dict[str, Any]:
        return {"opset": self.opset, "would_fail": self.would_fail,
                "unconvertible": [dataclasses.asdict(op) for op in self.ops],
                "pitfalls": [p.to_json() for p in self.pitfalls], "error": self.error}

    def to_text(self) -> str:
        lines = []
        if self.ops:
            lines.append(f"Unconvertible ops at opset {self.opset} ({len(self.ops)}):")
            lines += [op.describe(self.opset) for op in self.ops]
        if self.error:
            lines.append(f"Export error: {self.error}")
        if self.pitfalls:
            lines += ["", f"Tracing pitfalls ({len(self.pitfalls)}):"]
            lines += ["  " + p.describe().replace("\n", "\n  ") for p in self.pitfalls]
        verdict = ("the export would FAIL" if self.would_fail else "the export would succeed")
        lines += ["", f"Result: {verdict} at opset {self.opset}."]
        return "\n".join(lines).lstrip("\n")


def diagnose(model: Any, args: Any, opset_version: int | None = None, *,
             dynamo: bool = False, input_names: Sequence[str] | None = None,
             dynamic_axes: Mapping[str, Any] | None = None) -> Diagnosis:
    """Check ``model`` on ``args`` without writing anything: unconvertible ops (through
    the walker's collect-only mode) and tracing pitfalls; when every op converts, a full
    in-memory conversion (with ``input_names`` and ``dynamic_axes``, whose warnings about
    sizes of dynamic axes become pitfalls) catches any other failure. ``dynamo=True``
    checks the torch.export front end (as ``export(..., dynamo=True)`` reads the model).
    A ``dynamic_axes`` key naming no input or output raises :class:`DynamicAxesWarning`."""
    opset = check_opset(opset_version)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            graph, details = pipeline.collect_unconvertible(model, args, TrainingMode.EVAL,
                                                            opset, dynamo)
        except OnnxExporterError as exc:
            return Diagnosis(opset, [], report.source_pitfalls(model), str(exc))
    traced = list(caught)
    pitfalls = [report.warning_pitfalls(traced), report.source_pitfalls(model)]
    registry = RegistryView(plugins.load().registry, plugins.runtime_registry())
    ops = [_finding(info, graph, registry) for info in details]
    error = ""
    if not ops:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                warnings.simplefilter("error", DynamicAxesWarning)
                result = api.convert(model, args, opset_version=opset, dynamo=dynamo,
                                     input_names=input_names, dynamic_axes=dynamic_axes)
            names = [i.name for i in result.serialized.model.graph.input]
            pitfalls += [report.graph_pitfalls(result.graph, names),
                         report.dynamic_axis_pitfalls(caught)]
        except OnnxExporterError as exc:
            error = str(exc)
    return Diagnosis(opset, ops, report.merge_pitfalls(*pitfalls), error)


def _finding(info: Any, graph: Any, registry: RegistryView) -> OpFinding:
    providers = []
    for entry in registry.entries(info.kind):
        upper = f"..{entry.until}" if entry.until is not None else "+"
        providers.append(f"{entry.provenance} serves opsets {entry.since}{upper}")
    nodes = _nodes_of_kind(graph, info.kind)
    modes = {name: export_type for export_type, names in pipeline.EXPORT_TYPE_FALLBACKS.items()
             for name in names}
    fallbacks = []
    for name, fallback in sorted(registry.fallbacks.items()):
        if any(fallback.claims(node) for node in nodes):
            how = how_to_set("fallbacks", name)
            if name in modes and not advising_cli():
                how = f"operator_export_type=OperatorExportTypes.{modes[name].name} or {how}"
            fallbacks.append(f"the {name!r} fallback ({registry.fallback_providers[name]}) "
                             f"would export it: {how}")
    return OpFinding(info.kind, info.count, list(info.sources), info.min_opset, info.reason,
                     providers, fallbacks)


def _nodes_of_kind(block: Any, kind: str) -> list[Any]:
    """The nodes of ``kind`` in a source graph (either front end's), blocks included."""
    found = []
    for node in block.nodes():
        if node.kind() == kind:
            found.append(node)
        for inner in node.blocks():
            found += _nodes_of_kind(inner, kind)
    return found


def run_doctor(args: argparse.Namespace) -> int:
    """The ``oxport doctor`` command; returns the exit status."""
    try:
        model = _model(args.target)
        torch.manual_seed(0)
        inputs = given_inputs(args)
        if inputs is None:
            raise UsageError(
                f"Give the inputs of {type(model).__name__}.forward: --input SHAPE[:DTYPE] "
                "for each, e.g. --input 1x3x224x224:float32, or --inputs-from MODULE:FN "
                "returning the args tuple.")
        try:
            diagnosis = diagnose(model, inputs, args.opset, dynamo=args.dynamo,
                                 input_names=args.input_names or None,
                                 dynamic_axes=dynamic_axes_of(args) or None)
        except DynamicAxesWarning as exc:
            raise unknown_axis_name(exc) from None
    except UsageError as exc:
        print(f"oxport doctor: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps({"target": args.target, **diagnosis.to_json()}, indent=2))
    else:
        how = " through torch.export (--dynamo)" if args.dynamo else ""
        print(f"oxport doctor: {args.target} with inputs {_shapes(inputs)}{how}\n")
        print(diagnosis.to_text())
        if diagnosis.error and not args.inputs_from:
            print("\nThe inputs are random (ints in [0, 10)): if the model needs valid values "
                  "(token ids, indices), give them with --inputs-from MODULE:FN.")
    return EXIT_FAILED if diagnosis.would_fail else EXIT_OK


def _shapes(inputs: Sequence[Any]) -> str:
    """``2x3:float32, scalar:int64`` (other values by their type)."""
    return ", ".join(
        f"{'x'.join(map(str, x.shape)) or 'scalar'}:{str(x.dtype).removeprefix('torch.')}"
        if isinstance(x, torch.Tensor) else type(x).__name__ for x in inputs)


def _model(target: str) -> Any:
    """The model a ``MODULE:FACTORY`` target names (called when it is not a module)."""
    obj = load_target(target)
    if not isinstance(obj, torch.nn.Module) and callable(obj):
        try:
            obj = obj()
        except TypeError as exc:
            raise UsageError(f"Calling {target!r} with no arguments failed: {exc}.") from exc
    if not isinstance(obj, (torch.nn.Module, torch.jit.ScriptFunction)):
        raise UsageError(f"{target!r} gives a {type(obj).__name__}, not a torch.nn.Module.")
    if isinstance(obj, torch.nn.Module):
        obj.eval()
    return obj


__all__: Sequence[str] = ["Diagnosis", "OpFinding", "add_doctor_command", "diagnose",
                          "run_doctor"]
