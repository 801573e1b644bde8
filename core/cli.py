"""The ``oxport`` command line.

Each subcommand is one ``_add_<name>_command(subparsers)`` function that adds
its parser and sets ``run`` to a function ``(args) -> exit status``; add a
command by writing one and listing it in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from oxport import plugins, support_table
from oxport.cli_doctor import add_doctor_command
from oxport.cli_export import add_export_command
from oxport.errors import OnnxExporterError
from oxport.registry import RegistryView, SymbolicEntry, newest_known_opset
from oxport.types import DEFAULT_OPSET, MIN_OPSET


# -- oxport plugins ---------------------------------------------------------------
def _add_plugins_command(sub: Any) -> None:
    p = sub.add_parser("plugins", help="list loaded plugins and broken ones",
                       description="List every loaded plugin: name, distribution, version, "
                                   "layer, what it registers, and the broken ones with their "
                                   "error. Exits 1 when a plugin is broken.")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(run=_plugins)


def _plugins(args: argparse.Namespace) -> int:
    infos = plugins.load().plugins
    if args.json:
        print(json.dumps([info.to_json() for info in infos], indent=2))
    else:
        for info in infos:
            status = "ok" if info.ok else f"BROKEN: {info.error}"
            dist = f"{info.distribution} {info.version}" if info.distribution else "(no dist)"
            what = ", ".join(f"{n} {k}" for k, n in info.registered.items()) or "nothing"
            print(f"{info.name:24} {dist:24} {info.layer.name.lower():9} {status}; "
                  f"registers {what}")
    return 0 if all(i.ok for i in infos) else 1


# -- oxport ops -------------------------------------------------------------------
def _add_ops_command(sub: Any) -> None:
    p = sub.add_parser("ops", help="list every symbolic, its provider and opset range",
                       description="List every registered symbolic: its op, opset range, "
                                   "provider, distribution, layer and what it shadows.")
    p.add_argument("--opset", type=_opset, default=None,
                   help="only symbolics serving this opset, and which one is active "
                        f"(default: all opsets; exports default to {DEFAULT_OPSET})")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print a JSON list")
    form.add_argument("--markdown", action="store_true",
                      help="the support table (op, opset range, provider, per family, with "
                           "per-opset coverage counts) as Markdown; see docs/supported_ops.md")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="with --markdown: write the table to PATH instead of printing it")
    p.set_defaults(run=_ops)


def _opset(text: str) -> int:
    newest = newest_known_opset()
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not MIN_OPSET <= value <= newest:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an opset: pass an int from {MIN_OPSET} to {newest}")
    return value


def _ops(args: argparse.Namespace) -> int:
    if args.output and not args.markdown:
        print("oxport ops: error: -o/--output needs --markdown", file=sys.stderr)
        return 2
    if args.markdown:
        return _ops_markdown(args)
    registry = RegistryView(plugins.load().registry, plugins.runtime_registry())
    rows = []
    for entry in registry.entries():
        if args.opset is not None and not entry.serves(args.opset):
            continue
        shadows = [e for e in registry.shadowed_by(entry)
                   if args.opset is None or e.serves(args.opset)]
        row = _entry_json(entry)
        row["shadows"] = [_entry_json(e) for e in shadows]
        if args.opset is not None:
            row["active"] = registry.lookup(entry.name, args.opset) is entry
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        upper = row["until"] if row["until"] is not None else "+"
        provider = row["provider"] + (f" ({row['distribution']})" if row["distribution"] else "")
        notes = [f"shadows {', '.join(_short(s) for s in row['shadows'])}"] if row["shadows"] else []
        if row.get("active") is False:
            notes.append("shadowed")
        suffix = f"  [{'; '.join(notes)}]" if notes else ""
        print(f"{row['op']:40} {row['since']:>2}..{upper:<3} {row['layer']:9} {provider}{suffix}")
    return 0


def _ops_markdown(args: argparse.Namespace) -> int:
    """Every loaded plugin's symbolics (``--opset`` keeps those serving it)."""
    entries = [e for e in plugins.load().registry.entries()
               if args.opset is None or e.serves(args.opset)]
    text = support_table.render(entries)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _entry_json(entry: SymbolicEntry) -> dict[str, Any]:
    return {
        "op": entry.name, "since": entry.since, "until": entry.until,
        "provider": entry.provenance.plugin, "distribution": entry.provenance.distribution,
        "version": entry.provenance.version, "layer": entry.layer.name.lower(),
        "override": entry.override,
    }


def _short(row: dict[str, Any]) -> str:
    upper = row["until"] if row["until"] is not None else "+"
    return f"{row['provider']} {row['since']}..{upper}"


# -- entry point --------------------------------------------------------------------
#: The subcommands, in the order ``oxport --help`` lists them.
COMMANDS: list[Callable[[Any], None]] = [_add_plugins_command, _add_ops_command,
                                         add_export_command, add_doctor_command]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oxport", description="oxport: PyTorch to ONNX, "
                                     "built from plugins.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except OnnxExporterError as exc:
        print(f"oxport: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
