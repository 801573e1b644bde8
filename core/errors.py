"""The errors oxport raises. Every one is an :class:`OnnxExporterError`."""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

_OXPORT_DIR = os.path.dirname(os.path.abspath(__file__))
#: A source line as the walker records each node's: ``path/to/model.py(12): forward``.
_SOURCE_LINE = re.compile(r"(?P<path>[^\n]+?)\((?P<line>\d+)\)(?::|$)")


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


# -- advice in the caller's words ----------------------------------------------------------
#: Export parameters as the command line spells them (``oxport export``'s flags).
_CLI_FLAGS = {
    "opset_version": "--opset", "input_names": "--input-names",
    "output_names": "--output-names", "dynamic_axes": "--dynamic-axis",
    "fallbacks": "--fallback", "plugins": "--plugins", "disable_plugins": "--no-plugin",
}
#: Parameters taking a list, whose flags take one item and repeat.
_LIST_PARAMS = {"fallbacks", "plugins", "disable_plugins"}
_from_cli: contextvars.ContextVar[bool] = contextvars.ContextVar("oxport_from_cli",
                                                                 default=False)


@contextlib.contextmanager
def advice_for_cli() -> Iterator[None]:
    """Inside, advice in error messages names ``oxport export``'s flags, not Python
    parameters (the command line runs its commands in here)."""
    token = _from_cli.set(True)
    try:
        yield
    finally:
        _from_cli.reset(token)


def advising_cli() -> bool:
    """Whether advice should name the command line's flags (see :func:`advice_for_cli`)."""
    return _from_cli.get()


def spelled(param: str) -> str:
    """An export parameter's name in the caller's words: ``input_names`` from Python,
    ``--input-names`` from the command line."""
    if advising_cli():
        return _CLI_FLAGS.get(param, f"--{param.replace('_', '-')}")
    return param


def how_to_set(param: str, value: Any = None) -> str:
    """How to set an export parameter, in the caller's words: ``opset_version=13`` or
    ``fallbacks=['fallthrough']`` from Python, ``--opset 13`` or ``--fallback fallthrough``
    from the command line; without a value, just the parameter or flag."""
    if advising_cli():
        return spelled(param) if value is None else f"{spelled(param)} {value}"
    if value is None:
        return f"{param}="
    return f"{param}={[value]!r}" if param in _LIST_PARAMS else f"{param}={value!r}"


def front_end(dynamo: bool) -> str:
    """How to choose a front end, in the caller's words: ``with dynamo=False`` from Python,
    ``without --dynamo`` from the command line (``export {front_end(False)}``)."""
    if advising_cli():
        return "with --dynamo" if dynamo else "without --dynamo"
    return f"with dynamo={dynamo}"


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
