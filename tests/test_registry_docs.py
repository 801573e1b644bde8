"""Every built-in symbolic's docstring opens with the schema it serves, as onnxscript's
torchlib does: ``elu(Tensor self, Scalar alpha=1, ...) -> Tensor`` (namespace dropped),
one line per op or overload, then a blank line and what the ONNX form is."""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from oxport import testing


def _served_by_function() -> dict[Callable[..., Any], set[str]]:
    registry = testing.registry_view()
    served: dict[Callable[..., Any], set[str]] = defaultdict(set)
    for entry in testing.entries_of(registry, distribution="oxport"):
        served[entry.fn].add(entry.name)
    return served


def _schema_lines(fn: Callable[..., Any]) -> list[str]:
    """The docstring's opening paragraph: its schema lines."""
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].splitlines()


def _names(op: str) -> tuple[str, ...]:
    """How a schema line may start for ``op``: ``add(`` / ``add.Tensor(`` for ``aten::add``;
    ``add.int(`` for ``aten::add.int``."""
    name = op.split("::", 1)[1]
    return (f"{name}(",) if "." in name else (f"{name}(", f"{name}.")


def _where(fn: Callable[..., Any]) -> str:
    code = inspect.unwrap(fn).__code__
    return f"{code.co_filename}:{code.co_firstlineno} {fn.__name__}"


def test_every_builtin_symbolic_opens_with_its_schema():
    served = _served_by_function()
    assert served, "no built-in symbolics were loaded"
    wrong = []
    for fn, ops in served.items():
        lines = _schema_lines(fn)
        if not lines or not lines[0].startswith(tuple(p for op in ops for p in _names(op))):
            wrong.append(f"{_where(fn)} serves {sorted(ops)}; its docstring opens with "
                         f"{lines[0] if lines else 'nothing'!r}")
    assert not wrong, ("symbolics whose docstring does not open with the schema they serve "
                       "(torch.ops.aten.NAME.OVERLOAD._schema):\n" + "\n".join(wrong))


def test_every_op_a_symbolic_serves_is_in_its_schema_lines():
    """A symbolic serving several ops lists each (an in-place ``x_`` beside ``x`` may be
    left to ``x``'s line)."""
    missing = []
    for fn, ops in _served_by_function().items():
        lines = _schema_lines(fn)
        for op in sorted(ops):
            covered = any(line.startswith(_names(op)) for line in lines)
            in_place_of = op[:-1] if op.endswith("_") and not op.endswith("__") else None
            if not covered and not (in_place_of in ops and any(
                    line.startswith(_names(in_place_of)) for line in lines)):
                missing.append(f"{_where(fn)}: {op}")
    assert not missing, "ops missing from their symbolic's schema lines:\n" + "\n".join(missing)
