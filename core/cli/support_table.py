"""The operator support table (``oxport ops --markdown``), rendered from registry entries.

``docs/supported_ops.md`` is this table for the built-in packs, with a column for the
torch.export front end made from a run of every op-test case through it
(:data:`EXPORT_RESULTS`); a test regenerates it and fails when the committed file differs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from oxport.registry import SymbolicEntry
from oxport.types import MAX_OPSET, MIN_OPSET

#: The committed run of the op-test cases through the torch.export front end, relative to
#: the repository (``python -m benchmarks.export_cases --json`` writes it).
EXPORT_RESULTS = "benchmarks/results/export-cases.json"
REGENERATE = f"oxport ops --markdown --export-results {EXPORT_RESULTS} -o docs/supported_ops.md"
#: How long a failure's message may be in the table.
_MESSAGE_CHARS = 160


def load_export_results(path: str) -> dict[str, Any]:
    """A ``benchmarks/export_cases.py --json`` file; it must hold the counts per op."""
    with open(path, encoding="utf-8") as handle:
        results = json.load(handle)
    if "ops" not in results:
        raise ValueError(f"{path} has no counts per op: write it again with "
                         "`python -m benchmarks.export_cases --json PATH`.")
    return results


def render(entries: Iterable[SymbolicEntry], export_results: Mapping[str, Any] | None = None
           ) -> str:
    """Markdown: per-opset coverage counts, then one table per provider (op family). With
    ``export_results`` (:func:`load_export_results`), each op also says how its cases fare
    through the torch.export front end, and the ops that do not pass are listed with why."""
    entries = list(entries)
    by_provider: dict[str, list[SymbolicEntry]] = defaultdict(list)
    for entry in entries:
        by_provider[entry.provenance.plugin].append(entry)
    names = {e.name for e in entries}
    aten = sorted(n for n in names if n.startswith("aten::"))
    lines = [
        "# Supported operators",
        "",
        f"Generated from the symbolic registry by `{REGENERATE}`; do not edit by hand.",
        "",
        "A symbolic registered *since* opset N serves every later opset until its provider "
        "registers a newer variant (the *variants* column: the opsets where one starts). "
        "`aten::x_` in-place forms and overloads (`aten::x.overload`) are listed as the "
        "registry names them.",
        "",
        "## Coverage",
        "",
        f"**{len(aten)} aten operators** ({len(names)} operators in all: "
        f"{_namespaces(names)}) from {len(by_provider)} providers.",
        "",
        "| opset | aten operators | all operators |",
        "| ---: | ---: | ---: |",
    ]
    for opset in range(MIN_OPSET, MAX_OPSET + 1):
        served = {e.name for e in entries if e.serves(opset)}
        count = sum(n.startswith("aten::") for n in served)
        lines.append(f"| {opset} | {count} | {len(served)} |")
    per_op = dict(export_results.get("ops", {})) if export_results is not None else None
    if per_op is not None:
        lines += ["", *_export_summary(sorted(names), per_op, export_results)]
    header = ["operator", "opsets", "variants", *(["torch.export"] if per_op is not None else []),
              "provider"]
    for provider in sorted(by_provider):
        own = by_provider[provider]
        ops = sorted({e.name for e in own})
        lines += ["", f"## {provider} ({len(ops)} operators)", "",
                  "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        for name in ops:
            variants = sorted((e for e in own if e.name == name), key=lambda e: e.since)
            export = [export_status(per_op.get(name))] if per_op is not None else []
            cells = [f"`{name}`", _range(variants), ", ".join(str(e.since) for e in variants),
                     *export, provider]
            lines.append("| " + " | ".join(cells) + " |")
    if per_op is not None:
        lines += _export_gaps(sorted(names), per_op)
    return "\n".join(lines) + "\n"


def export_status(counts: Mapping[str, Any] | None) -> str:
    """An op's torch.export cell: ``yes`` (every run torch.export captured passed),
    ``P/C runs`` (P of C passed), ``not captured`` (torch.export failed on every run),
    ``scripted only`` / ``not capturable`` (no case it can take: scripted ones, or ones
    declaring why not), ``–`` (no case run recorded)."""
    if not counts:
        return "–"
    captured = counts["runs"] - counts["not_captured"]
    if counts["runs"] and not captured:
        return "not captured"
    if captured:
        return "yes" if counts["passed"] == captured else f"{counts['passed']}/{captured} runs"
    reasons = set(counts.get("not_exportable", {}).values())
    if not reasons:
        return "–"
    return "scripted only" if reasons == {"scripted"} else "not capturable"


def _export_summary(names: list[str], per_op: Mapping[str, Any],
                    results: Mapping[str, Any]) -> list[str]:
    statuses = [export_status(per_op.get(name)) for name in names]
    partly = sum(s.endswith(" runs") for s in statuses)
    return [
        f"**Through the torch.export front end** (`oxport.export(..., dynamo=True)`; every "
        f"case at its lowest and highest opset, run of {results.get('date', 'unknown date')}: "
        f"{results['passed']} of {results['runs']} runs pass): {statuses.count('yes')} operators "
        f"pass every run torch.export captured (`yes` below), {partly} fail some, "
        f"{statuses.count('not captured')} torch.export could not capture, "
        f"{statuses.count('scripted only')} have only scripted cases (TorchScript constructs "
        f"torch.export does not produce), {statuses.count('not capturable')} only cases "
        f"declaring why torch.export cannot take them, and {statuses.count('–')} have no run "
        "recorded. The TorchScript front end passes every case (CI runs them all); "
        "\"Through torch.export: what does not pass\" at the end says why for the rest."]


def _export_gaps(names: list[str], per_op: Mapping[str, Any]) -> list[str]:
    """The ops with a run that failed or a case torch.export cannot take (other than a
    scripted one), with the first failure or the cases' reasons."""
    lines = ["", "## Through torch.export: what does not pass", "",
             "| operator | torch.export | why |", "| --- | --- | --- |"]
    for name in names:
        counts = per_op.get(name)
        if not counts:
            continue
        status = export_status(counts)
        reasons = [r for r in dict.fromkeys(counts.get("not_exportable", {}).values())
                   if r != "scripted"]
        why = []
        if "first_failure" in counts:
            why.append(counts["first_failure"])
        if reasons and status != "yes":
            why += reasons
        if status == "yes" or not why:
            continue
        text = "; ".join(why)
        if len(text) > _MESSAGE_CHARS:
            text = text[:_MESSAGE_CHARS - 1].rstrip() + "…"
        lines.append(f"| `{name}` | {status} | {_cell(text)} |")
    return lines


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return text.replace("\n", " ").replace("|", "\\|")


def _range(variants: list[SymbolicEntry]) -> str:
    """``7+`` when the newest variant is open-ended, else ``first-last``."""
    until = variants[-1].until
    return f"{variants[0].since}+" if until is None else f"{variants[0].since}-{until}"


def _namespaces(names: set[str]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[name.split("::")[0]] += 1
    return ", ".join(f"{counts[ns]} {ns}" for ns in sorted(counts))
