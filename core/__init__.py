"""oxport: a plugin-based exporter from PyTorch models to ONNX.

The public names load on first use (PEP 562), so ``import oxport`` and the command line's
``--help`` and ``plugins`` do not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it (a submodule itself when the name is the module's).
_SOURCES = {
    "errors": "oxport.errors", "plugins": "oxport.plugins",
    "symbolic_helper": "oxport.symbolic_helper", "verification": "oxport.verification",
    **dict.fromkeys([
        "convert", "export", "export_to_pretty_string", "register_custom_op_symbolic",
        "unconvertible_op_details", "unconvertible_ops", "unregister_custom_op_symbolic"],
        "oxport.api"),
    **dict.fromkeys(["disable_log", "enable_log", "is_in_onnx_export",
                     "select_model_mode_for_export"], "oxport.exporter.state"),
    **dict.fromkeys(["ExportResult", "ExportWarning"], "oxport.exporter.result"),
    "GraphContext": "oxport.context", "SymbolicContext": "oxport.context",
    **dict.fromkeys(["CheckerError", "OnnxExporterError", "SymbolicValueError",
                     "UnsupportedOperatorError"], "oxport.errors"),
    "hookimpl": "oxport.hookspecs",
    "export_task": "oxport.tasks", "tasks": "oxport.tasks",
    "OpPack": "oxport.registry",
    **dict.fromkeys(["JitScalarType", "OperatorExportTypes", "TrainingMode"], "oxport.types"),
}

__all__ = sorted([*_SOURCES, "__version__"])


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'oxport' has no attribute {name!r}")
    module = importlib.import_module(source)
    value = module if source == f"oxport.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SOURCES})


if TYPE_CHECKING:
    from oxport import errors, plugins, symbolic_helper, tasks, verification
    from oxport.api import (
        convert,
        export,
        export_to_pretty_string,
        register_custom_op_symbolic,
        unconvertible_op_details,
        unconvertible_ops,
        unregister_custom_op_symbolic,
    )
    from oxport.context import GraphContext, SymbolicContext
    from oxport.errors import (
        CheckerError,
        OnnxExporterError,
        SymbolicValueError,
        UnsupportedOperatorError,
    )
    from oxport.exporter.result import ExportResult, ExportWarning
    from oxport.exporter.state import (
        disable_log,
        enable_log,
        is_in_onnx_export,
        select_model_mode_for_export,
    )
    from oxport.hookspecs import hookimpl
    from oxport.registry import OpPack
    from oxport.tasks import export_task
    from oxport.types import JitScalarType, OperatorExportTypes, TrainingMode
