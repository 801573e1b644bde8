"""``oxport export``: a model (``MODULE:FACTORY`` or a built-in example) to an ONNX file,
optionally verified with ONNX Runtime against eager PyTorch."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import sysconfig
import time
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from oxport import serialize
from oxport.cli import examples
from oxport.cli.common import (
    EXIT_FAILED,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_input_options,
    comma_list,
    dynamic_axes_of,
    given_inputs,
    load_target,
    opset_arg,
    report_failure,
    unknown_axis_name,
)
from oxport.diagnose import report
from oxport.errors import (
    DynamicAxesWarning,
    InvalidExportArgumentError,
    OnnxExporterError,
)
from oxport.exporter import progress
from oxport.exporter.options import check_target
from oxport.types import DEFAULT_OPSET

#: oxport's own code and the folder of console-script launchers (the ``oxport`` command).
_OXPORT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SCRIPTS_DIR = os.path.join(sysconfig.get_path("scripts"), "")

EXIT_CODES = f"""exit status:
  {EXIT_OK}  the model was written (and, with --verify, matches eager PyTorch)
  {EXIT_FAILED}  the export failed: building or tracing the model raised, an op has no
     conversion (every such op is listed), the ONNX checker rejected the model, or a
     plugin failed
  {EXIT_USAGE}  usage error: a bad option or shape string, a module or attribute that
     cannot be found, a target that is not a model, onnxruntime missing for --verify
  {EXIT_MISMATCH}  --verify failed: ONNX Runtime's outputs differ from eager PyTorch beyond
     the tolerance, or ONNX Runtime cannot run the model

Errors are printed as one paragraph; --debug adds the traceback and oxport's log."""

EXAMPLE_LIST = "\n".join(f"  {e.name:8} {e.description}" for e in examples.EXAMPLES.values())


class VerificationFailed(Exception):
    """ONNX Runtime disagrees with eager PyTorch, or cannot run the model."""


def add_export_command(sub: Any, help: str) -> None:
    """Add ``oxport export`` to the subcommand parsers."""
    p = sub.add_parser(
        "export", help=help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Export a PyTorch model to ONNX.\n\nTARGET is MODULE:FACTORY: FACTORY is "
                    "an nn.Module or a callable returning one, MODULE is\nimportable from the "
                    "current folder or a path to a .py file. Or use --example NAME.\n\n"
                    "With --task TASK (or a TARGET that is a checkpoint folder, written by\n"
                    "save_pretrained: --task auto), the task writes a folder of ONNX files and\n"
                    "what goes beside them to -o OUT_DIR (`oxport tasks` lists the tasks).",
        epilog=f"examples:\n{EXAMPLE_LIST}\n\n{EXIT_CODES}")
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="MODULE:FACTORY, e.g. my_models:make_net or models/net.py:Net")
    p.add_argument("--example", metavar="NAME", choices=list(examples.EXAMPLES),
                   help=f"a built-in example model: {', '.join(examples.EXAMPLES)}")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="the ONNX file to write (default: FACTORY.onnx, or NAME.onnx for "
                        "--example NAME); with --task, the folder to write")
    p.add_argument("--task", metavar="TASK",
                   help="export for a task (e.g. text-generation-with-past, or auto): TARGET "
                        "is a checkpoint folder or MODULE:FACTORY, -o the output folder")
    add_input_options(p)
    p.add_argument("--output-names", type=comma_list, metavar="A,B",
                   help="names of the outputs")
    p.add_argument("--opset", type=opset_arg,
                   help=f"the ai.onnx opset (default: {DEFAULT_OPSET})")
    p.add_argument("--target", dest="runtime_target", metavar="NAME",
                   help="the runtime profile: onnx (default), ort, ort==X.Y (caps the opset "
                        "and IR version), or one a plugin registers (docs/targets.md)")
    p.add_argument("--dtype", choices=["fp32", "fp16", "bf16"],
                   help="weights and compute in this dtype (default: the model's)")
    p.add_argument("--quantize", choices=["int4", "int8"],
                   help="weight-only quantization of the MatMul weights")
    p.add_argument("--quantize-block-size", type=int, default=32, metavar="N",
                   help="--quantize's block size (default: 32)")
    p.add_argument("--fallback", action="append", default=[], metavar="NAME",
                   help="enable a fallback for ops without a conversion: aten (every aten op "
                        "as ATen), aten-fallback (only the unconverted ones), fallthrough "
                        "(kept as custom ops); repeatable")
    p.add_argument("--script", action="store_true",
                   help="torch.jit.script the model instead of tracing it (keeps control flow)")
    p.add_argument("--dynamo", action="store_true",
                   help="capture the model with torch.export instead of tracing it")
    p.add_argument("--stream-weights", action=argparse.BooleanOptionalAction, default=None,
                   help="with --task and --dynamo: build the model on the meta device and "
                        "stream its weights from the checkpoint into the file (models larger "
                        "than memory; the default for a folder of safetensors); "
                        "--no-stream-weights loads the model in memory")
    p.add_argument("--external-data", action="store_true",
                   help="write the weights to PATH.data beside the model (automatic past 2 GB)")
    p.add_argument("--verify", action="store_true",
                   help="run the model in ONNX Runtime and compare with eager PyTorch; with "
                        "dynamic axes, at a second size too")
    p.add_argument("--rtol", type=float, default=1e-3,
                   help="--verify's relative tolerance (default: 1e-3)")
    p.add_argument("--atol", type=float, default=1e-5,
                   help="--verify's absolute tolerance (default: 1e-5)")
    p.add_argument("--plugins", type=comma_list, metavar="A,B",
                   help="load only these plugins (see `oxport plugins`)")
    p.add_argument("--no-plugin", action="append", default=[], metavar="NAME",
                   help="do not load this plugin (repeatable)")
    p.add_argument("--json", action="store_true", help="print a JSON summary (or error)")
    p.add_argument("--debug", action="store_true",
                   help="show tracebacks and oxport's log on errors")
    p.add_argument("--show-tracer-warnings", action="store_true",
                   help="also show the TracerWarnings raised in torch's and other libraries' "
                        "code (by default they are counted in one line)")
    p.set_defaults(run=run_export, model_source="")


def run_export(args: argparse.Namespace) -> int:
    """``oxport export``; returns the exit status."""
    from oxport.cli import tasks

    if tasks.wants_task(args):
        return tasks.run_task_export(args)
    if args.debug:
        logging.getLogger("oxport").setLevel(logging.INFO)
        if not logging.getLogger("oxport").handlers:
            logging.getLogger("oxport").addHandler(logging.StreamHandler())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            summary = _export(args)
        except UsageError as exc:
            return _fail(args, EXIT_USAGE, str(exc), caught)
        except DynamicAxesWarning as exc:
            return _fail(args, EXIT_USAGE, str(unknown_axis_name(exc)), caught)
        except InvalidExportArgumentError as exc:
            return _fail(args, EXIT_USAGE, str(exc), caught)
        except VerificationFailed as exc:
            return _fail(args, EXIT_MISMATCH, str(exc), caught)
        except OnnxExporterError as exc:
            return _fail(args, EXIT_FAILED, str(exc), caught)
        except Exception as exc:  # noqa: BLE001 - the user's code raised: one paragraph
            return _fail(args, EXIT_FAILED, f"{type(exc).__name__}: {exc}", caught)
    summary["warnings"] = _print_warnings(args, caught)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_human(summary))
    verification = summary["verification"]
    if verification and not verification["ok"]:
        print(f"oxport export: error: the ONNX model does not match eager PyTorch (rtol "
              f"{args.rtol}, atol {args.atol}); the file is written, for inspection.\n"
              f"{verification['report']}", file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def _fail(args: argparse.Namespace, status: int, message: str,
          caught: list[warnings.WarningMessage]) -> int:
    if args.debug:
        traceback.print_exc()
    return report_failure(args, status, message, _print_warnings(args, caught))


def _print_warnings(args: argparse.Namespace, caught: list[warnings.WarningMessage]
                    ) -> list[str]:
    """Each distinct warning as one line on stderr (unless --json), with the file and line
    that caused it in the model's code (see :func:`_where`); returns them. TracerWarnings
    raised in torch's or another library's code are counted in one line instead, unless
    --show-tracer-warnings."""
    hidden = [] if args.show_tracer_warnings else [w for w in caught if _from_library(w)]
    hidden_ids = {id(w) for w in hidden}
    texts = list(dict.fromkeys(_warning_text(w, args.model_source)
                               for w in caught if id(w) not in hidden_ids))
    count = len(dict.fromkeys(_warning_text(w, "") for w in hidden))
    if count:
        texts.append(f"{count} TracerWarning{'s were' if count != 1 else ' was'} raised in "
                     "torch's or another library's code, not in the model's: "
                     "--show-tracer-warnings shows them")
    if not args.json:
        for text in texts:
            print(f"oxport: warning: {text}", file=sys.stderr)
    return texts


def _warning_text(warning: warnings.WarningMessage, model_source: str) -> str:
    """``models.py:12: UserWarning: the message on one line``."""
    return (f"{_where(warning, model_source)}{warning.category.__name__}: "
            f"{' '.join(str(warning.message).split())}")


def _from_library(warning: warnings.WarningMessage) -> bool:
    """A TracerWarning whose line is in torch's or another installed library's code."""
    return issubclass(warning.category, torch.jit.TracerWarning) \
        and report.library_file(warning.filename)


def _where(warning: warnings.WarningMessage, model_source: str) -> str:
    """``models/net.py:12: `` (relative to the current folder when inside it): where the
    warning was raised, or, when that is oxport's own code or its launcher rather than a
    line of the model or a library it calls, ``model_source`` (the model's ``forward``)."""
    filename = warning.filename or ""
    if filename.startswith("<") or filename == "sys" or _oxports(filename):
        return f"{model_source}: " if model_source else ""
    return f"{_shown_path(filename)}:{warning.lineno}: "


def _oxports(filename: str) -> bool:
    """Whether ``filename`` is oxport's code (its built-in examples aside) or a launcher."""
    path = os.path.abspath(filename)
    return path != examples.__file__ and (path.startswith(_OXPORT_DIR)
                                          or path.startswith(_SCRIPTS_DIR))


def _shown_path(filename: str) -> str:
    """A path relative to the current folder when inside it, else as it is."""
    path = os.path.relpath(filename)
    return filename if path.startswith("..") else path


def _model_source(model: Any) -> str:
    """``models/net.py:12``: where the model's ``forward`` is defined ('' when unknown)."""
    code = getattr(getattr(type(model), "forward", None), "__code__", None)
    return f"{_shown_path(code.co_filename)}:{code.co_firstlineno}" if code else ""


# -- the export ---------------------------------------------------------------------------
def _export(args: argparse.Namespace) -> dict[str, Any]:
    import oxport

    if (args.target is None) == (args.example is None):
        raise UsageError("Give either a TARGET (MODULE:FACTORY) or --example NAME, e.g. "
                         "`oxport export --example alexnet` or `oxport export my_models:make_net "
                         "--input 1x3x224x224`.")
    started = time.perf_counter()
    with progress.display():
        with progress.phase("load"):
            model, inputs, names = _model_and_inputs(args)
        args.model_source = _model_source(model)
        input_names = args.input_names or names[0]
        output_names = args.output_names or names[1]
        dynamic_axes = dynamic_axes_of(args)
        if args.script:
            model = _script(model)
        path = args.output or f"{args.example or args.target.rpartition(':')[2]}.onnx"
        # A --dynamic-axis naming no input or output is a usage error here, not a warning.
        warnings.simplefilter("error", DynamicAxesWarning)
        check_target(path)
        result = oxport.convert(
            model, inputs, input_names=input_names or None, output_names=output_names or None,
            opset_version=args.opset, dynamic_axes=dynamic_axes or None,
            fallbacks=args.fallback, plugins=args.plugins,
            disable_plugins=args.no_plugin or None, dynamo=args.dynamo, check=False,
            target=args.runtime_target, dtype=args.dtype, quantize=args.quantize,
            quantize_block_size=args.quantize_block_size)
        # Verified before it is written: a Ctrl-C while verifying leaves no file. A model
        # that fails verification is written, for inspection.
        verdict = None
        try:
            if args.verify:
                with progress.phase("verify", result.timings):
                    verdict = verify(model, inputs, args, input_names, output_names,
                                     dynamic_axes)
        except VerificationFailed:
            _write(result, path, args)
            raise
        _write(result, path, args)
        exported = time.perf_counter() - started - result.timings.get("verify", 0.0)
    return _summary(path, type(model).__name__, args, result, exported, verdict)


def _write(result: Any, path: str, args: argparse.Namespace) -> None:
    """Write the model to ``path``, then check it (an invalid model stays written, for
    inspection, as :func:`oxport.export` leaves it)."""
    result.save(path, external_data=True if args.external_data else None)
    with progress.phase("check", result.timings):
        serialize.check(result.serialized)


def _model_and_inputs(args: argparse.Namespace
                      ) -> tuple[Any, tuple[Any, ...], tuple[Sequence[str], Sequence[str]]]:
    """The model, its example args and its default (input, output) names."""
    torch.manual_seed(0)
    names: tuple[Sequence[str], Sequence[str]] = ((), ())
    inputs: tuple[Any, ...] | None = None
    if args.example:
        example = examples.get(args.example)
        model, inputs = examples.build(example)
        names = (example.input_names, example.output_names)
    else:
        model = _model(args.target)
    given = given_inputs(args)
    inputs = given if given is not None else inputs
    if inputs is None:
        raise UsageError(
            f"Give the inputs of {type(model).__name__}.forward: --input SHAPE[:DTYPE] for "
            "each (e.g. --input 1x3x224x224:float32), or --inputs-from MODULE:FN returning "
            "the args tuple.")
    if isinstance(model, torch.nn.Module):
        model.eval()
    return model, inputs, names


def _model(target: str) -> Any:
    obj = load_target(target)
    if not isinstance(obj, (torch.nn.Module, torch.jit.ScriptFunction)):
        if not callable(obj):
            raise UsageError(f"{target!r} is a {type(obj).__name__}, neither a model nor a "
                             "callable returning one.")
        try:
            obj = obj()
        except TypeError as exc:
            raise UsageError(f"Calling {target!r} with no arguments failed: {exc}. Point "
                             "TARGET at a function that builds the model without "
                             "arguments.") from exc
    if not isinstance(obj, (torch.nn.Module, torch.jit.ScriptFunction)):
        raise UsageError(f"{target!r} returned a {type(obj).__name__}, not a torch.nn.Module.")
    return obj


def _script(model: Any) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r".*torch\.jit\.script.*", DeprecationWarning)
            return torch.jit.script(model)
    except Exception as exc:  # noqa: BLE001 - TorchScript's own error, summarized
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OnnxExporterError(
            f"torch.jit.script cannot compile {type(model).__name__}: {first}. Export it "
            "traced (without --script), or make forward TorchScript-compatible.") from exc


# -- verification -------------------------------------------------------------------------
def verify(model: Any, inputs: tuple[Any, ...], args: argparse.Namespace, input_names: Any,
           output_names: Any, dynamic_axes: dict[str, dict[int, str]]) -> Any:
    """:func:`oxport.diagnose.verification.verify` with the export's settings: ONNX Runtime against
    eager PyTorch at the example inputs and, per dynamic axis, at a second size."""
    try:
        import onnxruntime  # noqa: F401 - only to say clearly that it is missing
    except ImportError:
        raise UsageError("--verify needs onnxruntime, which is not installed: run "
                         "`pip install onnxruntime`.") from None
    from oxport.diagnose import verification

    options = verification.VerificationOptions(rtol=args.rtol, atol=args.atol,
                                               raise_on_failure=False)
    try:
        return verification.verify(
            model, inputs, opset_version=args.opset, dynamic_axes=dynamic_axes or None,
            input_names=input_names or None, output_names=output_names or None,
            options=options, fallbacks=args.fallback, plugins=args.plugins,
            disable_plugins=args.no_plugin or None, dynamo=args.dynamo,
            target=args.runtime_target, dtype=args.dtype, quantize=args.quantize,
            quantize_block_size=args.quantize_block_size)
    except OnnxExporterError:
        raise
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise VerificationFailed(
            f"ONNX Runtime cannot run the model: {' '.join(str(exc).split())}. (Ops kept by "
            "a fallback, ATen or custom, run only in runtimes that implement them.)") from exc


# -- the summary --------------------------------------------------------------------------
def _summary(path: str, model_name: str, args: argparse.Namespace, result: Any,
             seconds: float, verdict: Any) -> dict[str, Any]:
    model = result.serialized.model
    data = path + ".data"
    external = args.external_data or \
        result.serialized.weight_bytes > serialize.weights.EXTERNAL_DATA_THRESHOLD
    size = os.path.getsize(path) + (os.path.getsize(data) if external else 0)
    return {
        "path": os.path.abspath(path),
        "external_data": os.path.abspath(data) if external else None,
        "model": model_name,
        "example": args.example,
        "opset": result.opset,
        "nodes": len(model.graph.node),
        "inputs": [_value_json(v) for v in model.graph.input],
        "outputs": [_value_json(v) for v in model.graph.output],
        "file_size": size,
        "seconds": round(seconds, 3),
        "timings": {k: round(v, 3) for k, v in result.timings.items()},
        "max_error": verdict.max_abs_error if verdict is not None else None,
        "verification": _verification_json(verdict) if verdict is not None else None,
        "fallbacks": sorted({f"{u.kind} ({u.fallback})" for u in result.fallback_uses}),
    }


def _verification_json(verdict: Any) -> dict[str, Any]:
    return {
        "ok": verdict.ok,
        "runs": [{"label": run.label, "shapes": {n: list(s) for n, s in run.input_shapes.items()},
                  "ok": run.ok, "error": run.error,
                  "max_error": max((o.max_abs_error for o in run.outputs), default=None)}
                 for run in verdict.runs],
        "axis_problems": [p.describe() for p in verdict.axis_problems],
        "notes": verdict.notes,
        "report": verdict.summary(),
    }


def _value_json(value: Any) -> dict[str, Any]:
    import onnx

    tensor = value.type.tensor_type
    dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else None)
            for d in tensor.shape.dim] if tensor.HasField("shape") else None
    return {"name": value.name,
            "dtype": onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
            if tensor.elem_type else None,
            "shape": dims}


def _human(summary: dict[str, Any]) -> str:
    what = summary["model"] + (f" (example {summary['example']})" if summary["example"] else "")
    lines = [f"Exported {what} to {os.path.relpath(summary['path'])} in "
             f"{summary['seconds']:.1f} s: opset {summary['opset']}, {summary['nodes']} nodes, "
             f"{progress.size(summary['file_size'])}"
             + (" (weights in " + os.path.relpath(summary["external_data"]) + ")"
                if summary["external_data"] else "")]
    for kind in ("inputs", "outputs"):
        for value in summary[kind]:
            shape = "x".join("?" if d is None else str(d) for d in value["shape"]) \
                if value["shape"] else "scalar"
            lines.append(f"  {kind[:-1]:6} {value['name']}: {value['dtype']} {shape}")
    if summary["fallbacks"]:
        lines.append(f"  fallbacks: {', '.join(summary['fallbacks'])}")
    verification = summary["verification"] or {"runs": []}
    for run in verification["runs"]:
        shapes = ", ".join(f"{n} {'x'.join(map(str, s))}" for n, s in run["shapes"].items())
        error = "" if run["max_error"] is None else f": max abs error {run['max_error']:.3g}"
        lines.append(f"Verified with ONNX Runtime at {shapes}{error}, "
                     f"{'OK' if run['ok'] else 'MISMATCH'}")
    return "\n".join(lines)
