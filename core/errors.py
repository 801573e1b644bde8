"""The errors oxport raises. Every one is an :class:`OnnxExporterError`."""

from __future__ import annotations

from typing import Any


class OnnxExporterError(RuntimeError):
    """Base class of every error raised while exporting."""


class InvalidExportArgumentError(OnnxExporterError, ValueError):
    """An argument of ``export()`` (or a related call) is malformed."""


class UnsupportedOperatorError(OnnxExporterError):
    """One or more operators could not be converted.

    ``ops`` lists every unconvertible operator of the model, not just the first.
    """

    def __init__(self, message: str, ops: list[Any] | None = None) -> None:
        super().__init__(message)
        self.ops = list(ops or [])


class CheckerError(OnnxExporterError):
    """The ONNX checker rejected the exported model (the file is still written)."""


class SymbolicValueError(OnnxExporterError):
    """A symbolic function received a value it cannot use."""

    def __init__(self, msg: str, value: Any = None) -> None:
        detail = ""
        if value is not None and hasattr(value, "debugName"):
            detail = f" [value: %{value.debugName()}]"
        super().__init__(msg + detail)
        self.value = value


class SymbolicDeclined(OnnxExporterError):
    """Raised by a symbolic to say it cannot convert *these* arguments.

    The walker then treats the node as unconvertible by that symbolic: enabled
    fallback plugins get a chance, otherwise the op is reported as unsupported.
    This is the only exception that triggers a fallback.
    """

    def __init__(self, op: str, reason: str) -> None:
        super().__init__(f"{op}: {reason}")
        self.op = op
        self.reason = reason


class PluginError(OnnxExporterError):
    """A plugin failed to import or to register (raised in strict mode)."""


class RegistryError(OnnxExporterError, ValueError):
    """A registration is malformed or conflicts with another one."""


class SymbolicError(OnnxExporterError):
    """A symbolic function raised an unexpected exception, or returned something other
    than its op's outputs."""


class FallbackWarning(UserWarning):
    """A fallback plugin (ATen, fallthrough...) converted an op that no symbolic converted."""
