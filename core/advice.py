"""Errors and advice that must not load torch: plugin loading's errors (``oxport plugins``
and ``--help`` run without torch) and advice worded as the caller spells things, Python
parameters or the command line's flags. :mod:`oxport.errors` re-exports them."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any


class PluginError(RuntimeError):
    """A plugin failed to import or to register (raised in strict mode)."""

    __module__ = "oxport.errors"  # its public home, which re-exports it


class RegistryError(ValueError):
    """A registration is malformed or conflicts with another one."""

    __module__ = "oxport.errors"  # its public home, which re-exports it


def listed(names: list[str], shown: int = 3, quote: bool = True) -> str:
    """``'a', 'b', 'c' and 4 more``: the first ``shown`` of ``names`` for a message."""
    parts = [repr(n) if quote else n for n in names[:shown]]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(parts) + more


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
