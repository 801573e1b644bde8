"""Helpers shared by the ``oxport`` subcommands: the options giving a model's inputs, shape
strings, ``MODULE:ATTR`` targets, and the exit statuses.

Every problem with what the user typed raises :class:`UsageError`, whose message is one
paragraph naming the problem and the fix; commands turn it into :data:`EXIT_USAGE`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from typing import Any

import torch

from oxport.errors import DynamicAxesWarning
from oxport.types import MAX_OPSET, MIN_OPSET

#: Exit statuses shared by the commands (``oxport export --help`` documents them).
EXIT_OK = 0
EXIT_FAILED = 1  # the export failed: unsupported op, checker, a plugin's error
EXIT_USAGE = 2  # bad command line: shape string, target, option values (argparse's too)
EXIT_MISMATCH = 3  # --verify: ONNX Runtime differs from eager PyTorch

#: dtype names accepted in shape strings (``1x3:float16``), with their torch dtypes.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float": torch.float32, "float16": torch.float16,
    "half": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
    "double": torch.float64, "int64": torch.int64, "long": torch.int64,
    "int32": torch.int32, "int": torch.int32, "int16": torch.int16, "int8": torch.int8,
    "uint8": torch.uint8, "bool": torch.bool,
}


class UsageError(Exception):
    """What the user typed cannot work; the message says why and what to type instead."""


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """The options giving the model's inputs, their names and dynamic axes (``oxport export``
    and ``oxport doctor`` share them): read them with :func:`given_inputs` and
    :func:`dynamic_axes_of`."""
    parser.add_argument("--input", action="append", type=shape_arg, default=[],
                        metavar="SHAPE",
                        help="an input as SIZExSIZE...[:DTYPE], e.g. 1x3x224x224:float32 "
                             "(repeatable, in forward's order; random values: floats normal, "
                             "ints in [0, 10), bools either)")
    parser.add_argument("--inputs-from", metavar="MODULE:FN",
                        help="a function returning the args tuple (or a tensor), or the tuple "
                             "itself (instead of --input: e.g. valid token ids)")
    parser.add_argument("--input-names", type=comma_list, metavar="A,B",
                        help="names of the inputs")
    parser.add_argument("--dynamic-axis", action="append", type=dynamic_axis_arg, default=[],
                        metavar="NAME:AXIS[:LABEL]",
                        help="an axis whose size may change at run time, e.g. input:0:batch "
                             "(repeatable; NAME is an input or output name)")


def given_inputs(args: argparse.Namespace) -> tuple[Any, ...] | None:
    """The inputs ``--inputs-from`` or ``--input`` give (random values for the latter), or
    None when neither is given."""
    if args.inputs_from:
        return inputs_from(args.inputs_from)
    if args.input:
        return tuple(random_input(shape, dtype) for shape, dtype in args.input)
    return None


def inputs_from(target: str) -> tuple[Any, ...]:
    """The args tuple ``--inputs-from MODULE:FN`` names (FN called when callable)."""
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


def dynamic_axis_arg(text: str) -> tuple[str, int, str | None]:
    """An argparse ``type`` for ``--dynamic-axis``: ``"input:0:batch"`` ->
    ``("input", 0, "batch")`` (the label is optional)."""
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


def dynamic_axes_of(args: argparse.Namespace) -> dict[str, dict[int, str]]:
    """The ``dynamic_axes`` the ``--dynamic-axis`` options give (unlabelled axes are named
    ``NAME_dimAXIS``)."""
    dynamic_axes: dict[str, dict[int, str]] = {}
    for name, axis, label in args.dynamic_axis:
        dynamic_axes.setdefault(name, {})[axis] = label or f"{name}_dim{axis}"
    return dynamic_axes


def unknown_axis_name(warning: DynamicAxesWarning) -> UsageError:
    """The error for a ``--dynamic-axis`` that names neither an input nor an output: the
    user named it on purpose, so it is refused rather than ignored (as the Python API, like
    torch.onnx, ignores such a ``dynamic_axes`` key with a warning)."""
    return UsageError(
        f"--dynamic-axis names {warning.key!r}, which is neither an input nor an output of "
        f"the model (inputs: {', '.join(warning.inputs) or 'none'}; outputs: "
        f"{', '.join(warning.outputs) or 'none'}). Use one of these names, or name them with "
        "--input-names and --output-names first.")


def parse_shape(text: str) -> tuple[tuple[int, ...], torch.dtype]:
    """``"1x3x224x224:float32"`` -> ``((1, 3, 224, 224), torch.float32)``.

    The dtype defaults to float32; ``scalar`` (or an empty shape, ``:int64``) is a 0-d tensor.
    """
    shape_text, _, dtype_text = text.strip().partition(":")
    dtype_text = dtype_text.strip().lower() or "float32"
    if dtype_text not in DTYPES:
        raise UsageError(
            f"{text!r}: unknown dtype {dtype_text!r}. Use one of "
            f"{', '.join(sorted(DTYPES))}, e.g. 1x3x224x224:float32.")
    shape_text = shape_text.strip().lower()
    if shape_text in ("", "scalar", "()"):
        return (), DTYPES[dtype_text]
    dims = []
    for part in shape_text.split("x"):
        if not part.strip().isdigit():
            raise UsageError(
                f"{text!r} is not a shape: write the sizes separated by 'x' with an optional "
                "dtype after a colon, e.g. 1x3x224x224:float32 (or scalar:int64 for a 0-d "
                "tensor).")
        dims.append(int(part))
    return tuple(dims), DTYPES[dtype_text]


def shape_arg(text: str) -> tuple[tuple[int, ...], torch.dtype]:
    """:func:`parse_shape` as an argparse ``type``."""
    try:
        return parse_shape(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def opset_arg(text: str) -> int:
    """An argparse ``type`` for ``--opset``: an int from the oldest to the newest opset."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not MIN_OPSET <= value <= MAX_OPSET:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an opset oxport exports: pass an int from {MIN_OPSET} to "
            f"{MAX_OPSET}")
    return value


def comma_list(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]`` (empty items dropped)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def load_target(target: str) -> Any:
    """The object a ``MODULE:ATTR`` target names.

    MODULE is a dotted module name (imported with the current folder first on
    ``sys.path``, as ``python -m`` does) or a path to a ``.py`` file; ATTR may be dotted
    (``Class.create``).
    """
    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise UsageError(
            f"{target!r} is not a target: write MODULE:FACTORY, e.g. my_models:make_net "
            "(a module importable from here, or a path such as models/net.py:make_net).")
    module = _import(module_name, target)
    obj: Any = module
    for i, attr in enumerate(attr_path.split(".")):
        if not hasattr(obj, attr):
            where = module_name if i == 0 else ".".join([module_name, *attr_path.split(".")[:i]])
            names = sorted(n for n in dir(obj) if not n.startswith("_"))
            shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            raise UsageError(
                f"{where!r} has no attribute {attr!r} (target {target!r}). It defines: "
                f"{shown or 'nothing public'}.")
        obj = getattr(obj, attr)
    return obj


def _import(module_name: str, target: str) -> Any:
    if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
        path = os.path.abspath(module_name)
        if not os.path.isfile(path):
            raise UsageError(f"{module_name!r} (target {target!r}) is not a file.")
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"{module_name!r} (target {target!r}) is not a Python file.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module failed: say which
            raise UsageError(f"Importing {path!r} raised {type(exc).__name__}: {exc}") from exc
        return module
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and module_name != missing and not module_name.startswith(missing + "."):
            raise UsageError(
                f"Importing {module_name!r} (target {target!r}) failed: it needs the module "
                f"{missing!r}, which is not installed. Install it and retry.") from exc
        raise UsageError(
            f"No module named {module_name!r} (target {target!r}). Check the spelling, run "
            "oxport from the folder that holds it or add that folder to PYTHONPATH, or give "
            "a file path such as models/net.py:make_net.") from exc
    except Exception as exc:  # noqa: BLE001 - the user's module failed: say which
        raise UsageError(
            f"Importing {module_name!r} (target {target!r}) raised {type(exc).__name__}: "
            f"{exc}") from exc


def report_failure(args: argparse.Namespace, status: int, message: str, shown: list[str]) -> int:
    """Print a failed ``oxport export``'s error (as JSON too with ``--json``, with the
    warnings ``shown``) and return its exit ``status``."""
    if args.json:
        print(json.dumps({"error": message, "exit_status": status, "warnings": shown},
                         indent=2))
    hint = "" if args.debug else " (--debug shows the traceback)"
    print(f"oxport export: error: {message}{hint if status == EXIT_FAILED else ''}",
          file=sys.stderr)
    return status
