"""The errors oxport raises. Every one is an :class:`OnnxExporterError`."""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

# Raised where torch is not loaded (plugin loading, the command line's advice): defined
# without torch, re-exported here.
from oxport.advice import (  # noqa: F401
    PluginError,
    RegistryError,
    advice_for_cli,
    advising_cli,
    front_end,
    how_to_set,
    spelled,
)

_OXPORT_DIR = os.path.dirname(os.path.abspath(__file__))
#: A source line as the walker records each node's: ``path/to/model.py(12): forward``.
_SOURCE_LINE = re.compile(r"(?P<path>[^\n]+?)\((?P<line>\d+)\)(?::|$)")


class OnnxExporterError(RuntimeError):
    """Base class of every error raised while exporting. Plugin loading's errors
    (:class:`PluginError`, :class:`RegistryError`) are plain ``RuntimeError``/``ValueError``s,
    defined where the command line can raise them without loading torch."""


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


class SymbolicError(OnnxExporterError):
    """A symbolic function raised an unexpected exception, or returned something other
    than its op's outputs."""


class FallbackWarning(UserWarning):
    """A fallback plugin (ATen, fallthrough...) converted an op that no symbolic converted."""


class DynamicAxesWarning(UserWarning):
    """``dynamic_axes`` names something that is neither an input nor an output: the entry is
    ignored, as torch.onnx does (``warnings.simplefilter("error", DynamicAxesWarning)``
    makes it an error). ``key`` is the name, ``inputs`` and ``outputs`` the model's."""

    def __init__(self, message: str, key: str = "", inputs: Sequence[str] = (),
                 outputs: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.key = key
        self.inputs = list(inputs)
        self.outputs = list(outputs)


# -- warnings at the user's line -----------------------------------------------------------
def user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning to the first caller outside oxport."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_OXPORT_DIR + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def warn_at_source(message: str, category: type[Warning], source: str) -> None:
    """Warn at ``source``, the line of the model's code that caused the warning
    (``path.py(12): forward``, as the walker records each node's): it names the user's
    file whether the export runs from Python or from the command line. Without a source
    line, the warning is attributed to the first caller outside oxport."""
    found = _SOURCE_LINE.match(source.strip()) if source else None
    if found is None:
        warnings.warn(message, category, stacklevel=user_stacklevel())
        return
    path = found["path"]
    warnings.warn_explicit(message, category, path, int(found["line"]),
                           module=os.path.splitext(os.path.basename(path))[0])
