"""oxport: a plugin-based exporter from PyTorch models to ONNX."""

from __future__ import annotations

__version__ = "0.1.0"

from oxport import errors, symbolic_helper, verification
from oxport.api import (
    ExportResult,
    convert,
    disable_log,
    enable_log,
    export,
    export_to_pretty_string,
    is_in_onnx_export,
    register_custom_op_symbolic,
    select_model_mode_for_export,
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
from oxport.hookspecs import hookimpl
from oxport.registry import OpPack
from oxport.types import JitScalarType, OperatorExportTypes, TrainingMode

__all__ = [
    "CheckerError", "ExportResult", "GraphContext", "JitScalarType", "OnnxExporterError",
    "OpPack", "OperatorExportTypes", "SymbolicValueError", "TrainingMode",
    "UnsupportedOperatorError", "__version__", "convert", "disable_log", "enable_log", "errors",
    "export", "export_to_pretty_string", "hookimpl", "is_in_onnx_export",
    "register_custom_op_symbolic", "select_model_mode_for_export", "symbolic_helper",
    "SymbolicContext", "unconvertible_op_details", "unconvertible_ops",
    "unregister_custom_op_symbolic", "verification",
]
