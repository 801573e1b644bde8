"""The operator support table (``oxport ops --markdown``), rendered from registry entries.

``docs/supported_ops.md`` is this table for the built-in packs; a test regenerates it
and fails when the committed file differs from the registry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from oxport.registry import SymbolicEntry
from oxport.types import MAX_OPSET, MIN_OPSET

REGENERATE = "oxport ops --markdown -o docs/supported_ops.md"


def render(entries: Iterable[SymbolicEntry]) -> str:
    """Markdown: per-opset coverage counts, then one table per provider (op family)."""
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
    for provider in sorted(by_provider):
        own = by_provider[provider]
        ops = sorted({e.name for e in own})
        lines += ["", f"## {provider} ({len(ops)} operators)", "",
                  "| operator | opsets | variants | provider |", "| --- | --- | --- | --- |"]
        for name in ops:
            variants = sorted((e for e in own if e.name == name), key=lambda e: e.since)
            lines.append(f"| `{name}` | {_range(variants)} | "
                         f"{', '.join(str(e.since) for e in variants)} | {provider} |")
    return "\n".join(lines) + "\n"


def _range(variants: list[SymbolicEntry]) -> str:
    """``7+`` when the newest variant is open-ended, else ``first-last``."""
    until = variants[-1].until
    return f"{variants[0].since}+" if until is None else f"{variants[0].since}-{until}"


def _namespaces(names: set[str]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[name.split("::")[0]] += 1
    return ", ".join(f"{counts[ns]} {ns}" for ns in sorted(counts))
