"""The ``oxport`` command line.

Each subcommand is one ``add_<name>_command(subparsers, help)`` function that adds
its parser and sets ``run`` to a function ``(args) -> exit status``; add a
command by writing one and listing it in :data:`COMMANDS`. Only the command being
run is imported, so ``oxport --help`` and ``oxport plugins`` do not import torch.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from oxport import __version__
from oxport.advice import PluginError, RegistryError, advice_for_cli
from oxport.opset_versions import DEFAULT_OPSET

#: Exit status after Ctrl-C, as shells report a process that SIGINT ended.
EXIT_INTERRUPTED = 130
#: Exit status when the reader of the output went away (``oxport ops | head``): SIGPIPE's.
EXIT_BROKEN_PIPE = 141


# -- oxport plugins ---------------------------------------------------------------
def _add_plugins_command(sub: Any, help: str) -> None:
    p = sub.add_parser("plugins", help=help,
                       description="List every installed plugin: name, distribution, version, "
                                   "layer, whether this environment's settings load it, and "
                                   "the object it names. --check imports each one (and torch) "
                                   "to show what it registers and the broken ones with their "
                                   "error; it exits 1 when a plugin is broken.")
    p.add_argument("--check", action="store_true",
                   help="load every plugin: what each registers, and the broken ones")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="as --check, and print each broken plugin's full traceback")
    p.add_argument("--declare-ops", metavar="PLUGIN", nargs="+",
                   help="print the oxport.ops entry points (for pyproject.toml) that declare "
                        "the ops these plugins register, so that each loads only when an "
                        "export meets one of them")
    p.add_argument("--sync-pyproject", metavar="PYPROJECT", nargs="?", const="pyproject.toml",
                   help="rewrite the oxport.ops entry points of PYPROJECT (default: "
                        "./pyproject.toml) from the ops its declaring plugins register now; "
                        "reinstall (pip install --no-deps -e .) to apply them")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(run=_plugins)


def _plugins(args: argparse.Namespace) -> int:
    from oxport import plugin_manager

    if args.declare_ops:
        return _declare_ops(args.declare_ops)
    if args.sync_pyproject:
        return _sync_pyproject(args.sync_pyproject)
    if not (args.check or args.verbose):
        installed = plugin_manager.discover()
        if args.json:
            print(json.dumps([i.to_json() for i in installed], indent=2))
        else:
            _print_table([[i.name, _dist(i), i.layer.name.lower(),
                           "enabled" if i.enabled else "disabled", i.value] for i in installed])
        return 0
    manager = plugin_manager.load()
    manager.load_deferred()
    manager.check_symbolics()
    infos = manager.plugins
    if args.json:
        print(json.dumps([info.to_json(verbose=args.verbose) for info in infos], indent=2))
    else:
        _print_table([[info.name, _dist(info), info.layer.name.lower(),
                       f"{'ok' if info.ok else f'BROKEN: {info.error}'}"
                       f"{' (loads on demand)' if info.on_demand else ''}; registers "
                       f"{_registered(info.registered)}"] for info in infos])
        if args.verbose:
            for info in infos:
                if info.traceback:
                    print(f"\n{info.name} ({_dist(info)}): {info.error}\n"
                          f"{info.traceback.rstrip()}")
    return 0 if all(i.ok for i in infos) else 1


def _sync_pyproject(path: str) -> int:
    from pathlib import Path

    from oxport import plugin_manager

    pyproject = Path(path)
    if not pyproject.is_file():
        print(f"oxport: {pyproject} is not a file: pass the pyproject.toml whose "
              f"{plugin_manager.OPS_ENTRY_POINT_GROUP} entry points to rewrite.", file=sys.stderr)
        return 2
    text = pyproject.read_text()
    synced = plugin_manager.synced_pyproject(text)
    if synced == text:
        print(f"{pyproject}: the {plugin_manager.OPS_ENTRY_POINT_GROUP} entry points are current")
        return 0
    pyproject.write_text(synced)
    print(f"{pyproject}: rewrote the {plugin_manager.OPS_ENTRY_POINT_GROUP} entry points; "
          "reinstall (pip install --no-deps -e .) to apply them")
    return 0


def _declare_ops(names: list[str]) -> int:
    from oxport import plugin_manager

    manager = plugin_manager.load()
    manager.load_deferred()
    infos = {info.name: info for info in manager.plugins}
    unknown = [name for name in names if name not in infos]
    if unknown:
        print(f"oxport: no loaded plugin is called {', '.join(unknown)}; `oxport plugins` "
              "lists the installed ones.", file=sys.stderr)
        return 2
    print(f'[project.entry-points."{plugin_manager.OPS_ENTRY_POINT_GROUP}"]')
    for name in names:
        for op in infos[name].ops:
            print(f'"{plugin_manager.entry_name_of_op(op)}" = "{infos[name].value}"')
    return 0


def _registered(counts: dict[str, int]) -> str:
    """``{"symbolics": 2, "passes": 1}`` -> ``2 symbolics, 1 pass``."""
    return ", ".join(_count(n, kind) for kind, n in counts.items()) or "nothing"


def _dist(info: Any) -> str:
    return f"{info.distribution} {info.version}" if info.distribution else "(no dist)"


def _count(number: int, plural: str) -> str:
    """``1 symbolic``, ``2 symbolics``, ``1 pass``, ``3 passes``."""
    if number != 1:
        return f"{number} {plural}"
    return f"{number} {plural[:-2] if plural.endswith('sses') else plural[:-1]}"


def _print_table(rows: list[list[str]]) -> None:
    """Rows as columns as wide as their widest cell (the last one unpadded)."""
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(len(rows[0]))] \
        if rows else []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths)]
        print("  ".join([*cells, row[-1]]))


# -- oxport ops -------------------------------------------------------------------
def _add_ops_command(sub: Any, help: str) -> None:
    from oxport.cli.common import opset_arg

    p = sub.add_parser("ops", help=help,
                       description="List every registered symbolic: its op, opset range, "
                                   "provider, distribution, layer and what it shadows.")
    p.add_argument("--opset", type=opset_arg, default=None,
                   help="only symbolics serving this opset, and which one is active "
                        f"(default: all opsets; exports default to {DEFAULT_OPSET})")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print a JSON list")
    form.add_argument("--markdown", action="store_true",
                      help="the support table (op, opset range, provider, per family, with "
                           "per-opset coverage counts) as Markdown; see docs/supported_ops.md")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="with --markdown: write the table to PATH instead of printing it")
    p.add_argument("--export-results", metavar="JSON",
                   help="with --markdown: a column saying how each op's cases fare through "
                        "the torch.export front end, from this run of "
                        "`python -m benchmarks.export_cases --json JSON`")
    p.set_defaults(run=_ops)


def _ops(args: argparse.Namespace) -> int:
    from oxport import plugins
    from oxport.registry import RegistryView

    for given, flag in ((args.output, "-o/--output"), (args.export_results, "--export-results")):
        if given and not args.markdown:
            print(f"oxport ops: error: {flag} needs --markdown", file=sys.stderr)
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
    from oxport import plugins
    from oxport.cli import support_table

    entries = [e for e in plugins.load().registry.entries()
               if args.opset is None or e.serves(args.opset)]
    try:
        results = (support_table.load_export_results(args.export_results)
                   if args.export_results else None)
    except (OSError, ValueError) as exc:
        print(f"oxport ops: error: --export-results: {exc}", file=sys.stderr)
        return 2
    text = support_table.render(entries, results)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _entry_json(entry: Any) -> dict[str, Any]:
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
#: The subcommands in ``oxport --help``'s order: name -> (one-line help, the
#: ``module:function(sub, help)`` adding its parser, imported only when the command runs).
COMMANDS: dict[str, tuple[str, str]] = {
    "plugins": ("list the installed plugins (--check: what each registers, broken ones)",
                "oxport.cli.main:_add_plugins_command"),
    "ops": ("list every symbolic, its provider and opset range",
            "oxport.cli.main:_add_ops_command"),
    "export": ("export a model to ONNX (and verify it with ONNX Runtime)",
               "oxport.cli.export:add_export_command"),
    "tasks": ("list the export tasks (oxport export CKPT_DIR --task TASK -o OUT_DIR)",
              "oxport.cli.tasks:add_tasks_command"),
    "doctor": ("pre-flight check: unconvertible ops and tracing pitfalls, no file",
               "oxport.cli.doctor:add_doctor_command"),
    "new-pack": ("create a pip-installable op pack that passes its own tests",
                 "oxport.cli.new_pack:add_new_pack_command"),
}


class _Parser(argparse.ArgumentParser):
    """The top-level parser: an argument the chosen command does not know is reported with
    that command's usage (argparse's own parser would print the top-level one)."""

    commands: Any = None  # the subparsers action, set by build_parser

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(argv, namespace)
        if extras:
            name = getattr(parsed, "command", None)
            after = name in argv and extras[0] in argv[argv.index(name) + 1:]
            parser = self.commands.choices[name] if after else self
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser. Only the command ``argv`` names gets its options (importing its module,
    and torch for most): ``oxport --help`` lists the commands without importing any."""
    parser = _Parser(prog="oxport", description="oxport: PyTorch to ONNX, built from plugins.")
    parser.add_argument("--version", action="version", version=f"oxport {__version__}")
    sub = parser.commands = parser.add_subparsers(dest="command", required=True,
                                                  metavar="COMMAND")
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (help, where) in COMMANDS.items():
        if name == chosen:
            module, _, function = where.partition(":")
            getattr(importlib.import_module(module), function)(sub, help)
        else:
            sub.add_parser(name, help=help)
    return parser


class _CtrlC:
    """SIGINT raises KeyboardInterrupt as usual and is remembered: should a library swallow
    that exception (a C++ callback that ignores a Python error), the next phase of the
    export raises it again, so a command interrupted never goes on to succeed."""

    def __init__(self) -> None:
        self.pressed = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.pressed = True
        raise KeyboardInterrupt

    def raise_if_pressed(self) -> None:
        if self.pressed:
            raise KeyboardInterrupt

    def phase_started(self, name: str) -> None:
        self.raise_if_pressed()

    def phase_advanced(self, name: str, done: int, total: int) -> None:
        self.raise_if_pressed()

    def phase_finished(self, name: str, seconds: float) -> None:
        self.raise_if_pressed()


@contextlib.contextmanager
def _ctrl_c_stops_the_command() -> Iterator[None]:
    from oxport.exporter import progress

    if threading.current_thread() is not threading.main_thread():  # signals reach only it
        yield
        return
    ctrl_c = _CtrlC()
    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        with progress.listening(ctrl_c):
            yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _is_oxport_error(exc: Exception) -> bool:
    """Whether ``exc`` is one of oxport's errors: plugin loading's, or an export's (whose
    module, which loads torch, is loaded once an export raised one)."""
    errors = sys.modules.get("oxport.errors")
    return isinstance(exc, (PluginError, RegistryError)) or (
        errors is not None and isinstance(exc, errors.OnnxExporterError))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Errors are one line on stderr; Ctrl-C exits with :data:`EXIT_INTERRUPTED` and a reader
    that stops early (``| head``) with :data:`EXIT_BROKEN_PIPE`, both without a traceback.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        with advice_for_cli(), _ctrl_c_stops_the_command():
            args = build_parser(argv).parse_args(argv)
            status = args.run(args)
            sys.stdout.flush()  # a closed pipe raises here, not at exit
        return status
    except KeyboardInterrupt:
        print("oxport: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that is silent too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - oxport's own errors are one line; others raise
        if not _is_oxport_error(exc):
            raise
        print(f"oxport: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
