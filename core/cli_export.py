"""``oxport export``: a model (``MODULE:FACTORY`` or a built-in example) to an ONNX file,
optionally verified with ONNX Runtime against eager PyTorch."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from oxport import examples, progress, serialize
from oxport.cli_common import (
    EXIT_FAILED,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    comma_list,
    load_target,
    opset_arg,
    shape_arg,
)
from oxport.errors import InvalidExportArgumentError, OnnxExporterError
from oxport.trace import normalize_args

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


def add_export_command(sub: Any) -> None:
    """Add ``oxport export`` to the subcommand parsers."""
    p = sub.add_parser(
        "export", help="export a model to ONNX (and verify it with ONNX Runtime)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Export a PyTorch model to ONNX.\n\nTARGET is MODULE:FACTORY, where "
                    "FACTORY is an nn.Module or a callable returning one (MODULE is importable "
                    "from the current folder, or a path to a .py file); or use --example.",
        epilog=f"examples:\n{EXAMPLE_LIST}\n\n{EXIT_CODES}")
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="MODULE:FACTORY, e.g. my_models:make_net or models/net.py:Net")
    p.add_argument("--example", metavar="NAME", choices=list(examples.EXAMPLES),
                   help=f"a built-in example model: {', '.join(examples.EXAMPLES)}")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="the ONNX file to write (default: NAME.onnx in the current folder)")
    p.add_argument("--input", action="append", type=shape_arg, default=[], metavar="SHAPE",
                   help="an input as SIZExSIZE...[:DTYPE], e.g. 1x3x224x224:float32 "
                        "(repeatable, in forward's order; random values: floats normal, "
                        "ints in [0, 10), bools either)")
    p.add_argument("--inputs-from", metavar="MODULE:FN",
                   help="a function returning the args tuple (or a tensor), or the tuple itself")
    p.add_argument("--input-names", type=comma_list, metavar="A,B", help="names of the inputs")
    p.add_argument("--output-names", type=comma_list, metavar="A,B",
                   help="names of the outputs")
    p.add_argument("--dynamic-axis", action="append", type=_dynamic_axis_arg, default=[],
                   metavar="NAME:AXIS[:LABEL]",
                   help="an axis whose size may change at run time, e.g. input:0:batch "
                        "(repeatable; NAME is an input or output name)")
    p.add_argument("--opset", type=opset_arg, help="the ai.onnx opset (default: oxport's)")
    p.add_argument("--fallback", action="append", default=[], metavar="NAME",
                   help="enable a fallback for ops without a conversion: aten (every aten op "
                        "as ATen), aten-fallback (only the unconverted ones), fallthrough "
                        "(kept as custom ops); repeatable")
    p.add_argument("--script", action="store_true",
                   help="torch.jit.script the model instead of tracing it (keeps control flow)")
    p.add_argument("--external-data", action="store_true",
                   help="write the weights to PATH.data beside the model (automatic past 2 GB)")
    p.add_argument("--verify", action="store_true",
                   help="run the model in ONNX Runtime and compare with eager PyTorch; with "
                        "dynamic axes, at a second size too")
    p.add_argument("--rtol", type=float, default=1e-3, help="--verify's relative tolerance")
    p.add_argument("--atol", type=float, default=1e-5, help="--verify's absolute tolerance")
    p.add_argument("--plugins", type=comma_list, metavar="A,B",
                   help="load only these plugins (see `oxport plugins`)")
    p.add_argument("--no-plugin", action="append", default=[], metavar="NAME",
                   help="do not load this plugin (repeatable)")
    p.add_argument("--json", action="store_true", help="print a JSON summary (or error)")
    p.add_argument("--debug", action="store_true",
                   help="show tracebacks and oxport's log on errors")
    p.set_defaults(run=run_export)


def _dynamic_axis_arg(text: str) -> tuple[str, int, str | None]:
    name, _, rest = text.partition(":")
    axis_text, _, label = rest.partition(":")
    try:
        axis = int(axis_text)
    except ValueError:
        axis = None
    if not name or axis is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not NAME:AXIS[:LABEL]; write e.g. input:0:batch (axis 0 of the "
            "input called 'input' is named 'batch').")
    return name, axis, label or None


@dataclasses.dataclass
class Check:
    """One ONNX Runtime run compared with eager PyTorch."""

    shapes: dict[str, list[int]]
    max_error: float
    ok: bool


def run_export(args: argparse.Namespace) -> int:
    """``oxport export``; returns the exit status."""
    if args.debug:
        logging.getLogger("oxport").setLevel(logging.INFO)
        if not logging.getLogger("oxport").handlers:
            logging.getLogger("oxport").addHandler(logging.StreamHandler())
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            summary = _export(args)
    except UsageError as exc:
        return _fail(args, EXIT_USAGE, str(exc))
    except InvalidExportArgumentError as exc:
        return _fail(args, EXIT_USAGE, str(exc))
    except VerificationFailed as exc:
        return _fail(args, EXIT_MISMATCH, str(exc))
    except OnnxExporterError as exc:
        return _fail(args, EXIT_FAILED, str(exc))
    except Exception as exc:  # noqa: BLE001 - the user's code raised: one paragraph, no trace
        return _fail(args, EXIT_FAILED, f"{type(exc).__name__}: {exc}")
    summary["warnings"] = list(dict.fromkeys(_warning_text(w) for w in caught))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for text in summary["warnings"]:
            print(f"oxport: warning: {text}", file=sys.stderr)
        print(_human(summary))
    failed = [c for c in summary.get("verification") or [] if not c["ok"]]
    if failed:
        print(f"oxport export: error: ONNX Runtime differs from eager PyTorch by up to "
              f"{max(c['max_error'] for c in failed):.3g} (rtol {args.rtol}, atol "
              f"{args.atol}). Check the model's ops with `oxport ops`, or loosen the "
              "tolerance with --rtol/--atol if the difference is expected.", file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def _fail(args: argparse.Namespace, status: int, message: str) -> int:
    if args.debug:
        traceback.print_exc()
    if args.json:
        print(json.dumps({"error": message, "exit_status": status}, indent=2))
    hint = "" if args.debug else " (--debug shows the traceback)"
    print(f"oxport export: error: {message}{hint if status == EXIT_FAILED else ''}",
          file=sys.stderr)
    return status


def _warning_text(message: warnings.WarningMessage) -> str:
    text = " ".join(str(message.message).split())
    return f"{message.category.__name__}: {text}"


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
        input_names = args.input_names or names[0]
        output_names = args.output_names or names[1]
        dynamic_axes: dict[str, dict[int, str]] = {}
        for name, axis, label in args.dynamic_axis:
            dynamic_axes.setdefault(name, {})[axis] = label or f"{name}_dim{axis}"
        if args.script:
            model = _script(model)
        path = args.output or f"{args.example or args.target.rpartition(':')[2]}.onnx"
        result = oxport.export(
            model, inputs, path, input_names=input_names or None,
            output_names=output_names or None, opset_version=args.opset,
            dynamic_axes=dynamic_axes or None, fallbacks=args.fallback,
            plugins=args.plugins, disable_plugins=args.no_plugin or None,
            external_data=True if args.external_data else None)
        exported = time.perf_counter() - started
        checks = None
        if args.verify:
            with progress.phase("verify", result.timings):
                checks = verify(path, model, inputs, dynamic_axes, args.rtol, args.atol)
    return _summary(path, type(model).__name__, args, result, exported, checks)


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
    if args.inputs_from:
        inputs = _inputs_from(args.inputs_from)
    elif args.input:
        inputs = tuple(random_input(shape, dtype) for shape, dtype in args.input)
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


def _inputs_from(target: str) -> tuple[Any, ...]:
    obj = load_target(target)
    if callable(obj):
        obj = obj()
    if isinstance(obj, list):
        obj = tuple(obj)
    return obj if isinstance(obj, tuple) else (obj,)


def random_input(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A random tensor: normal floats, ints in [0, 10), random bools."""
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    return torch.randint(0, 10, shape, dtype=dtype)


def _script(model: Any) -> Any:
    try:
        return torch.jit.script(model)
    except Exception as exc:  # noqa: BLE001 - TorchScript's own error, summarized
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OnnxExporterError(
            f"torch.jit.script cannot compile {type(model).__name__}: {first}. Export it "
            "traced (without --script), or make forward TorchScript-compatible.") from exc


# -- verification -------------------------------------------------------------------------
def verify(path: str, model: Any, args: tuple[Any, ...], dynamic_axes: dict[str, dict[int, str]],
           rtol: float, atol: float) -> list[Check]:
    """Run the ONNX file in ONNX Runtime on ``args`` and compare with eager PyTorch; with
    dynamic axes, once more with every dynamic input axis one longer."""
    try:
        import onnxruntime
    except ImportError:
        raise UsageError("--verify needs onnxruntime, which is not installed: run "
                         "`pip install onnxruntime`.") from None
    try:
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise VerificationFailed(f"ONNX Runtime cannot load {path}: {exc}") from exc
    names = [i.name for i in session.get_inputs()]
    checks = [_check(session, names, model, args, rtol, atol)]
    if any(name in names for name in dynamic_axes):
        checks.append(_check(session, names, model, _resized(args, names, dynamic_axes),
                             rtol, atol))
    return checks


def _check(session: Any, names: list[str], model: Any, args: tuple[Any, ...], rtol: float,
           atol: float) -> Check:
    positional, kwargs = normalize_args(args)
    tensors = [t for t in pytree.tree_leaves((positional, kwargs)) if isinstance(t, torch.Tensor)]
    feeds = {name: t.detach().cpu().numpy() for name, t in zip(names, tensors)}
    shapes = {name: list(t.shape) for name, t in zip(names, tensors)}
    try:
        got = session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise VerificationFailed(f"ONNX Runtime cannot run the model at input shapes "
                                 f"{shapes}: {exc}") from exc
    with torch.no_grad():
        try:
            eager = model(*positional, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's model failed at this size
            raise VerificationFailed(f"The eager model fails at input shapes {shapes}: "
                                     f"{type(exc).__name__}: {exc}") from exc
    expected = [t for t in pytree.tree_leaves(eager) if isinstance(t, torch.Tensor)]
    if len(expected) != len(got):
        raise VerificationFailed(f"The model returns {len(expected)} tensors in PyTorch but "
                                 f"{len(got)} in ONNX Runtime.")
    worst, ok = 0.0, True
    for want, have in zip(expected, got):
        if list(have.shape) != list(want.shape):
            raise VerificationFailed(f"An output has shape {list(have.shape)} in ONNX Runtime "
                                     f"but {list(want.shape)} in PyTorch (inputs {shapes}).")
        if want.numel() == 0:
            continue
        have_d, want_d = torch.from_numpy(have).double(), want.detach().cpu().double()
        worst = max(worst, float((have_d - want_d).abs().nan_to_num(nan=float("inf")).max()))
        ok = ok and torch.allclose(have_d, want_d, rtol=rtol, atol=atol, equal_nan=True)
    return Check(shapes, worst, ok)


def _resized(args: tuple[Any, ...], names: list[str],
             dynamic_axes: dict[str, dict[int, str]]) -> tuple[Any, ...]:
    """New random args whose dynamic axes are one longer (axes sharing a label alike)."""
    sizes: dict[str, int] = {}
    index = iter(range(len(names)))

    def resize(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            return leaf
        i = next(index, None)
        axes = dynamic_axes.get(names[i], {}) if i is not None else {}
        if not axes:
            return leaf
        shape = list(leaf.shape)
        for axis, label in axes.items():
            sizes.setdefault(label, shape[axis] + 1)
            shape[axis] = sizes[label]
        return _like(leaf, shape)

    positional, kwargs = pytree.tree_map(resize, normalize_args(args))
    return (*positional, kwargs) if kwargs else tuple(positional)


def _like(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """A random tensor of ``shape`` with values like ``tensor``'s (ints within its range)."""
    if tensor.dtype.is_floating_point:
        return torch.randn(shape).to(tensor.dtype)
    if tensor.dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    low, high = (int(tensor.min()), int(tensor.max())) if tensor.numel() else (0, 9)
    return torch.randint(low, high + 1, shape, dtype=tensor.dtype)


# -- the summary --------------------------------------------------------------------------
def _summary(path: str, model_name: str, args: argparse.Namespace, result: Any,
             seconds: float, checks: list[Check] | None) -> dict[str, Any]:
    model = result.serialized.model
    data = path + ".data"
    external = args.external_data or \
        result.serialized.weight_bytes > serialize.EXTERNAL_DATA_THRESHOLD
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
        "max_error": max(c.max_error for c in checks) if checks else None,
        "verification": [dataclasses.asdict(c) for c in checks] if checks is not None else None,
        "fallbacks": sorted({f"{u.kind} ({u.fallback})" for u in result.fallback_uses}),
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
            shape = "x".join(str(d) for d in value["shape"]) if value["shape"] else "scalar"
            lines.append(f"  {kind[:-1]:6} {value['name']}: {value['dtype']} {shape}")
    if summary["fallbacks"]:
        lines.append(f"  fallbacks: {', '.join(summary['fallbacks'])}")
    for check in summary["verification"] or []:
        shapes = ", ".join(f"{n} {'x'.join(map(str, s))}" for n, s in check["shapes"].items())
        verdict = "OK" if check["ok"] else "MISMATCH"
        lines.append(f"Verified with ONNX Runtime at {shapes}: max abs error "
                     f"{check['max_error']:.3g}, {verdict}")
    return "\n".join(lines)
