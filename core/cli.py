"""The ``oxport`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from oxport import plugins
from oxport.registry import RegistryView
from oxport.types import DEFAULT_OPSET


def _plugins(args: argparse.Namespace) -> int:
    manager = plugins.load()
    infos = manager.plugins
    if args.json:
        print(json.dumps([info.to_json() for info in infos], indent=2))
        return 0
    for info in infos:
        status = "ok" if info.ok else f"BROKEN: {info.error}"
        dist = f"{info.distribution} {info.version}" if info.distribution else "(not installed)"
        what = ", ".join(f"{n} {k}" for k, n in info.registered.items()) or "nothing"
        print(f"{info.name:24} {dist:24} {info.layer.name.lower():9} {status}; registers {what}")
    return 0 if all(i.ok for i in infos) else 1


def _ops(args: argparse.Namespace) -> int:
    manager = plugins.load()
    registry = RegistryView(manager.registry, plugins.runtime_registry())
    rows = []
    for entry in registry.entries():
        if args.opset is not None and not entry.serves(args.opset):
            continue
        shadows = [str(e.provenance) for e in registry.shadowed_by(entry)]
        rows.append({
            "op": entry.name, "since": entry.since, "until": entry.until,
            "provider": entry.provenance.plugin, "distribution": entry.provenance.distribution,
            "layer": entry.layer.name.lower(), "shadows": shadows,
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        upper = row["until"] if row["until"] is not None else "+"
        shadow = f"  (shadows {', '.join(row['shadows'])})" if row["shadows"] else ""
        print(f"{row['op']:40} {row['since']:>2}..{upper:<3} {row['provider']}{shadow}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oxport", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plugins", help="list loaded plugins and broken ones")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_plugins)
    p = sub.add_parser("ops", help="list every symbolic, its provider and opset range")
    p.add_argument("--opset", type=int, default=None,
                   help=f"only symbolics serving this opset (default: all; exports use {DEFAULT_OPSET})")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
