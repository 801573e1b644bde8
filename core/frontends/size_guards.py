"""Orderings and bounds of input sizes that torch.export captured a branch on.

A model that compares two sizes derived from one dynamic axis (SEW's
``if upsampled.shape[1] < n_input_timesteps``, true only at some lengths) is captured on the
branch its example took, with a guard such as ``2*(n // 2) >= n``. The ONNX model cannot
check it. :func:`branch_conditions` finds such guards: orderings that hold at the example
sizes but not with every dynamic size at ``2 * size + 1`` (bounds such as ``n >= 10`` hold
there; a parity or a rounding that the branch depended on does not). :func:`user_bounds`
finds the bounds the model's own code tested (``if x.shape[0] > 2:``, ``not (n > 2)``):
torch.export narrows the dim's range to the example's side, and other sizes would take the
other branch in eager."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import torch

#: A size in torch.export's guards: ``L['x'].size()[1]``, or ``L['tensors'][0].size()[1]``.
_SIZE = re.compile(r"L\['(\w+)'\](?:\[(\d+)\])?\.size\(\)\[(\d+)\]")
_ORDERING = re.compile(r"(?<![<>=!])(<=|>=|<|>)(?!=)")


class _Input:
    """An input as a guard reads it: ``.size()``, and ``[i]`` for a wrapped list."""

    def __init__(self, sizes: Sequence[Sequence[int]], index: int | None) -> None:
        self.sizes, self.index = sizes, index

    def __getitem__(self, index: int) -> _Input:
        return _Input(self.sizes, index)

    def size(self) -> Sequence[int]:
        if self.index is None and len(self.sizes) != 1:
            raise KeyError("an input of an unknown position")
        return self.sizes[self.index or 0]


class _Inputs(dict):
    """``L``: an input by its name (its position among ``names``), or the wrapped list."""

    def __init__(self, sizes: Sequence[Sequence[int]], names: Sequence[str]) -> None:
        super().__init__()
        self.sizes, self.names = sizes, list(names)

    def __missing__(self, name: str) -> _Input:
        index = self.names.index(name) if name in self.names else None
        return _Input(self.sizes, index)


def example_sizes(program: torch.export.ExportedProgram) -> list[list[int | None]]:
    """Each user tensor input's example sizes (None for an unbacked dim)."""
    kinds = torch.export.graph_signature.InputKind
    sizes = []
    for node, spec in zip(program.graph.find_nodes(op="placeholder"),
                          program.graph_signature.input_specs):
        value = node.meta.get("val")
        if spec.kind == kinds.USER_INPUT and isinstance(value, torch.Tensor):
            sizes.append([_hint(size) for size in value.shape])
    return sizes


def _hint(size: Any) -> int | None:
    if isinstance(size, int):
        return size
    hint = size.node.hint
    return int(hint) if hint is not None else None


def _holds(guard: str, sizes: Sequence[Sequence[int | None]], names: Sequence[str]) -> bool | None:
    """The guard's value at ``sizes`` (None when it cannot be evaluated)."""
    try:
        return bool(eval(guard, {"__builtins__": {}, "min": min, "max": max},
                         {"L": _Inputs(sizes, names)}))
    except Exception:  # noqa: BLE001 - a guard of another form (sympy functions): skipped
        return None


def branch_conditions(program: torch.export.ExportedProgram, names: Sequence[str]) -> list[str]:
    """The ordering guards between sizes of dynamic axes that hold at the example sizes but
    not at a second size, written with ``name.shape[axis]``."""
    traced = example_sizes(program)
    dynamic = _dynamic_dims(program)
    second = [[2 * size + 1 if (index, axis) in dynamic and size is not None else size
               for axis, size in enumerate(shape)] for index, shape in enumerate(traced)]
    found = []
    for guard in getattr(program, "_guards_code", None) or ():
        if "==" in guard or "!=" in guard or " and " in guard or not _ORDERING.search(guard):
            continue
        sides = _ORDERING.split(guard)
        if len(sides) != 3 or not all(_SIZE.search(side) for side in sides[::2]):
            continue  # a bound of one size (n >= 10), not an ordering of two
        if _holds(guard, traced, names) and _holds(guard, second, names) is False:
            found.append(_SIZE.sub(lambda m: _named(m, names), guard))
    return found


def _dynamic_dims(program: torch.export.ExportedProgram) -> set[tuple[int, int]]:
    """(user input position, axis) of the dims torch.export kept symbolic."""
    kinds = torch.export.graph_signature.InputKind
    dims, position = set(), 0
    for node, spec in zip(program.graph.find_nodes(op="placeholder"),
                          program.graph_signature.input_specs):
        value = node.meta.get("val")
        if spec.kind == kinds.USER_INPUT and isinstance(value, torch.Tensor):
            dims.update((position, axis) for axis, size in enumerate(value.shape)
                        if isinstance(size, torch.SymInt))
            position += 1
    return dims


def _named(match: re.Match[str], names: Sequence[str]) -> str:
    name, index, axis = match.groups()
    if index is not None and int(index) < len(names):
        name = names[int(index)]
    return f"{name}.shape[{axis}]"


#: Where a guard made by torch's own code (an op's size check) comes from.
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_SYMBOL = re.compile(r"\b[a-z]\d+\b")


def user_bounds(program: torch.export.ExportedProgram, names: Sequence[str]) -> list[str]:
    """The bounds on one dynamic size (``x.shape[0] > 2``) that the model's own code
    tested, written with ``name.shape[axis]``. Bounds an op's size check set (a slice, a
    kernel's size) are left out: the ONNX operator checks or handles those itself."""
    symbols = _size_symbols(program, names)
    shape_env = _shape_env(program)
    if not symbols or shape_env is None:
        return []
    found = []
    for guard in shape_env.guards:
        expr = guard.expr
        if not isinstance(expr, _inequality()) or len(expr.free_symbols) != 1 \
                or not _from_user_code(guard):
            continue
        text = _SYMBOL.sub(lambda m: symbols.get(m.group(), m.group()), str(expr))
        if text != str(expr) and text not in found:
            found.append(text)
    return found


def _inequality() -> type:
    """sympy's class of <, <=, >, >= (sympy is imported by torch's symbolic shapes)."""
    import sympy

    return sympy.core.relational._Inequality


def _from_user_code(guard: Any) -> bool:
    """Whether the guard was made by code outside torch and oxport (the model's, testing
    a size)."""
    frame = getattr(getattr(guard, "sloc", None), "framework_loc", None)
    filename = getattr(frame, "filename", None)
    return isinstance(filename, str) and not filename.startswith(_library_dirs())


def _library_dirs() -> tuple[str, ...]:
    """The folders of torch and of oxport's packages (its wrappers around a model)."""
    modules = [sys.modules.get(name) for name in ("oxport", "oxport.opsets", "oxport.plugins")]
    return (_TORCH_DIR, *(os.path.dirname(m.__file__) + os.sep for m in modules
                          if m is not None and getattr(m, "__file__", None)))


def _shape_env(program: torch.export.ExportedProgram) -> Any:
    """The ShapeEnv of the program's symbolic sizes (None when all are static)."""
    for node in program.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        for size in getattr(value, "shape", ()):
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


def _size_symbols(program: torch.export.ExportedProgram, names: Sequence[str]
                  ) -> dict[str, str]:
    """Each dynamic dim's symbol (``s77``) -> ``name.shape[axis]`` of the input it is."""
    kinds = torch.export.graph_signature.InputKind
    symbols: dict[str, str] = {}
    position = 0
    for node, spec in zip(program.graph.find_nodes(op="placeholder"),
                          program.graph_signature.input_specs):
        value = node.meta.get("val")
        if spec.kind != kinds.USER_INPUT or not isinstance(value, torch.Tensor):
            continue
        name = names[position] if position < len(names) else f"input{position}"
        for axis, size in enumerate(value.shape):
            if isinstance(size, torch.SymInt):
                symbols.setdefault(str(size.node.expr), f"{name}.shape[{axis}]")
        position += 1
    return symbols
