"""Orderings of input sizes that torch.export captured a branch on.

A model that compares two sizes derived from one dynamic axis (SEW's
``if upsampled.shape[1] < n_input_timesteps``, true only at some lengths) is captured on the
branch its example took, with a guard such as ``2*(n // 2) >= n``. The ONNX model cannot
check it. :func:`branch_conditions` finds such guards: orderings that hold at the example
sizes but not with every dynamic size at ``2 * size + 1`` (bounds such as ``n >= 10`` hold
there; a parity or a rounding that the branch depended on does not)."""

from __future__ import annotations

import re
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
