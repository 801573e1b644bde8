"""Recognising symbolic functions written against torch.onnx's own modules.

torch.onnx's ``symbolic_helper`` and ``symbolic_opsetN`` work on torch.onnx's graph
objects; a symbolic that imports them needs its import changed to
``from oxport import symbolic_helper``. This module finds such symbolics without
importing torch (plugins load without it).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Iterator
from types import CodeType, TracebackType
from typing import Any

#: The package whose symbolic modules are recognised, by name only: nothing here imports
#: or calls it.
_TORCH_ONNX = "torch.onnx"
_HELPER_MODULE = f"{_TORCH_ONNX}.symbolic_helper"
#: Its modules of symbolic helpers and symbolics (public alias or internal path).
_TORCH_SYMBOLIC_MODULE = re.compile(
    re.escape(_TORCH_ONNX)
    + r"\.(?:_internal\.torchscript_exporter\.)?(symbolic_helper|symbolic_opset\d+)$")


def torch_onnx_advice(fn: Any, error: BaseException | None = None) -> str:
    """When symbolic ``fn`` relies on torch.onnx's ``symbolic_helper`` or
    ``symbolic_opsetN`` (whose helpers expect torch's own graph objects), or ``error`` was
    raised inside them: a sentence naming the import to change; else ""."""
    modules = sorted(set(_modules_used(fn)) | set(_torch_modules_in(error)))
    if not modules:
        return ""
    fixes = []
    if _HELPER_MODULE in modules:
        fixes.append("change the import to `from oxport import symbolic_helper` (the same "
                     "helpers, for oxport's graph)")
    if any(m != _HELPER_MODULE for m in modules):
        fixes.append("oxport has no symbolic_opsetN modules: emit the nodes with g.op(...) "
                     "instead of calling torch.onnx's symbolics")
    return (f"It uses {' and '.join(modules)}, which works only inside torch.onnx's own "
            f"exporter: {'; '.join(fixes)}.")


def _torch_module(name: str) -> str | None:
    if not name or "symbolic_" not in name:  # most names: no regex needed
        return None
    match = _TORCH_SYMBOLIC_MODULE.match(name)
    return f"{_TORCH_ONNX}.{match.group(1)}" if match else None


def _modules_used(fn: Any) -> tuple[str, ...]:
    """:func:`_torch_modules_used`, once per function (one function often serves several
    ops: in-place variants, overloads)."""
    try:
        return _modules_used_cached(fn)
    except TypeError:  # an unhashable callable object
        return tuple(_torch_modules_used(fn))


@functools.lru_cache(maxsize=None)
def _modules_used_cached(fn: Any) -> tuple[str, ...]:
    return tuple(_torch_modules_used(fn))


#: Values a symbolic's defaults and closures mostly hold (parse_args' descriptors, flags):
#: made of no code, so nothing to follow.
_PLAIN_VALUES = (str, int, float, bool, bytes, tuple, frozenset, type(None))


def _torch_modules_used(fn: Any) -> Iterator[str]:
    """torch.onnx symbolic modules ``fn`` is made of or reads: through its decorators'
    wrappers, closures, default arguments, nested functions, the globals and dotted
    imports its code names; a callable object through its ``__call__``."""
    pending, seen = [fn], set()
    while pending:
        func = pending.pop()
        if isinstance(func, _PLAIN_VALUES) or id(func) in seen:
            continue
        seen.add(id(func))
        found = _torch_module(_module_name(func))
        if found is not None and inspect.ismodule(func):
            yield found
            continue
        pending.extend(getattr(func, attr) for attr in ("__wrapped__", "__func__")
                       if hasattr(func, attr))
        code, globals_ = getattr(func, "__code__", None), getattr(func, "__globals__", None)
        if not isinstance(code, CodeType) or globals_ is None:
            if callable(func) and not isinstance(func, type):
                pending.append(getattr(type(func), "__call__", None))
            continue
        own = _torch_module(globals_.get("__name__", ""))
        if own is not None:  # torch.onnx's own function (its parse_args wrapper)
            yield own
            continue
        pending.extend((func.__defaults__ or ()) + tuple((func.__kwdefaults__ or {}).values()))
        for cell in func.__closure__ or ():
            try:
                pending.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        resolved, bound = _global_names(globals_)
        for names in _code_names(code):
            for name in names - resolved:
                resolved.add(name)
                found = _torch_module(name) or _torch_module(_module_name(globals_.get(name)))
                if found is not None:
                    bound[name] = found
            if bound:
                for name in names & bound.keys():
                    yield bound[name]
            if "onnx" in names:  # an attribute chain through the package, or a local import
                yield from filter(None, (_torch_module(f"{_TORCH_ONNX}.{n}") for n in names))


#: id(a module's globals) -> (those globals, the names looked up in them, those that are or
#: come from a torch.onnx symbolic module): one module's symbolics read mostly the same names.
_GLOBAL_NAMES: dict[int, tuple[dict[str, Any], set[str], dict[str, str]]] = {}


def _global_names(globals_: dict[str, Any]) -> tuple[set[str], dict[str, str]]:
    entry = _GLOBAL_NAMES.get(id(globals_))
    if entry is None or entry[0] is not globals_:
        entry = _GLOBAL_NAMES[id(globals_)] = (globals_, set(), {})
    return entry[1], entry[2]


@functools.lru_cache(maxsize=None)
def _code_names(code: CodeType) -> tuple[frozenset[str], ...]:
    """Per code object (its nested ones included): the names it reads, and its string
    constants (``import_module("…")``)."""
    own = frozenset(code.co_names + tuple(c for c in code.co_consts if isinstance(c, str)))
    nested = (names for const in code.co_consts if isinstance(const, CodeType)
              for names in _code_names(const))
    return (own, *nested)


def _module_name(obj: Any) -> str:
    if inspect.ismodule(obj):
        return obj.__name__
    name = getattr(obj, "__module__", None)
    return name if isinstance(name, str) else ""


def _torch_modules_in(error: BaseException | None) -> Iterator[str]:
    trace: TracebackType | None = error.__traceback__ if error is not None else None
    while trace is not None:
        found = _torch_module(trace.tb_frame.f_globals.get("__name__", ""))
        if found is not None:
            yield found
        trace = trace.tb_next
