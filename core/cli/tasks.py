"""The task path of ``oxport export`` (``oxport export CKPT_DIR --task TASK -o OUT_DIR``) and
``oxport tasks``, which lists the registered tasks."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from typing import Any

EXIT_OK = 0  # as oxport.cli.common's, which imports torch: `oxport tasks` need not


def wants_task(args: argparse.Namespace) -> bool:
    """Whether ``oxport export``'s arguments ask for the task path: ``--task`` given, or a
    TARGET that is a folder (a checkpoint written by ``save_pretrained``)."""
    return bool(args.task) or (args.target is not None and os.path.isdir(args.target))


def run_task_export(args: argparse.Namespace) -> int:
    """``oxport export SOURCE --task TASK -o OUT_DIR``; returns the exit status. Warnings are
    printed as ``oxport export`` prints them (library TracerWarnings counted in one line)."""
    from oxport.cli.common import report_failure
    from oxport.cli.export import _print_warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, summary, message = _run(args)
    args.model_source = ""
    shown = _print_warnings(args, caught)
    if message:
        return report_failure(args, status, message, shown)
    summary["warnings"] = shown
    print(json.dumps(summary, indent=2, default=str) if args.json else _human(summary))
    verification = summary["verification"]
    if verification and not verification.get("ok"):
        print(f"oxport export: error: --verify failed; the files are written, for inspection."
              f"\n{verification.get('report', '')}", file=sys.stderr)
        return status
    return status


def _run(args: argparse.Namespace) -> tuple[int, dict[str, Any], str]:
    """Run the task: (exit status, summary, error message or '')."""
    from oxport.cli.common import EXIT_FAILED, EXIT_MISMATCH, EXIT_USAGE, UsageError
    from oxport.errors import InvalidExportArgumentError, OnnxExporterError
    from oxport.tasks import export_task

    started = time.perf_counter()
    try:
        source, output_dir = _source_and_folder(args)
        result = export_task(source, output_dir, args.task or "auto", dynamo=args.dynamo,
                             opset=args.opset, verify=args.verify, plugins=args.plugins,
                             disable_plugins=args.no_plugin or None,
                             stream_weights=args.stream_weights,
                             target=args.runtime_target, dtype=args.dtype,
                             quantize=args.quantize,
                             quantize_block_size=args.quantize_block_size)
    except (UsageError, InvalidExportArgumentError) as exc:
        return EXIT_USAGE, {}, str(exc)
    except OnnxExporterError as exc:
        return EXIT_FAILED, {}, str(exc)
    except Exception as exc:  # the model's code raised: one paragraph
        if args.debug:
            raise
        return EXIT_FAILED, {}, f"{type(exc).__name__}: {exc}"
    summary = {"task": result.task, "output_dir": str(result.output_dir),
               "files": result.files, "seconds": round(time.perf_counter() - started, 2),
               "verification": result.verification, **result.details}
    return (EXIT_OK if result.ok else EXIT_MISMATCH), summary, ""


def _source_and_folder(args: argparse.Namespace) -> tuple[Any, str]:
    """The task's source (a folder, or the model MODULE:FACTORY builds) and output folder."""
    from oxport.cli.common import UsageError

    if args.target is None:
        raise UsageError("Give the checkpoint folder to export, e.g. `oxport export ./my-llama "
                         "--task text-generation-with-past -o ./onnx`.")
    if not args.output:
        raise UsageError("Give the output folder with -o OUT_DIR: a task writes several files.")
    unsupported = [flag for flag, given in (
        ("--example", args.example), ("--input", args.input), ("--inputs-from",
                                                                args.inputs_from),
        ("--input-names", args.input_names), ("--output-names", args.output_names),
        ("--dynamic-axis", args.dynamic_axis), ("--script", args.script),
        ("--fallback", args.fallback)) if given]
    if unsupported:
        raise UsageError(f"{', '.join(unsupported)} cannot be combined with a task: the task "
                         "chooses the inputs, their names and dynamic axes.")
    if os.path.isdir(args.target) or ":" not in args.target:
        if not os.path.isdir(args.target):
            raise UsageError(f"{args.target!r} is not a folder: give a checkpoint folder "
                             "(save_pretrained's) or MODULE:FACTORY building the model.")
        return args.target, args.output
    from oxport.cli.export import _model

    return _model(args.target), args.output


def _human(summary: dict[str, Any]) -> str:
    lines = [(f"Exported {summary.get('architecture', 'the model')} for "
              f"{summary['task']} to {summary['output_dir']} in {summary['seconds']:.1f} s: "
              f"{', '.join(summary['files'])}")]
    verification = summary["verification"]
    if verification:
        lines.append(f"verify: {'ok' if verification['ok'] else 'FAILED'}: "
                     f"{verification.get('report', '')}")
    return "\n".join(lines)


def add_tasks_command(sub: Any, help: str) -> None:
    """Add ``oxport tasks``."""
    p = sub.add_parser("tasks", help=help,
                       description="List the export tasks the installed plugins register "
                                   "(`oxport export SOURCE --task NAME -o OUT_DIR`).")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(run=run_tasks)


def run_tasks(args: argparse.Namespace) -> int:
    """``oxport tasks``."""
    from oxport.tasks import registered_tasks

    rows = [{"name": name, "description": entry.task.description,
             "plugin": entry.provenance.plugin} for name, entry in registered_tasks().items()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max((len(row["name"]) for row in rows), default=0)
    for row in rows:
        print(f"{row['name']:{width}}  {row['description']}  [{row['plugin']}]")
    print(f"{'auto':{width}}  the task that fits the source best (its config's architecture)")
    return EXIT_OK if rows else 1
