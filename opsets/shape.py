"""Shape ops: size, view/reshape, flatten, cat, and no-op conversions."""

from __future__ import annotations

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value

pack = OpPack("oxport.shape")


@pack.symbolic("aten::size", since=7)
def size(g, self: Value, dim: Value | None = None) -> Value:
    """``x.size()`` as a Shape; ``x.size(d)`` as a 0-d int64 (a constant when static)."""
    if dim is None:
        return g.op("Shape", self).setType(Type.tensor(torch.int64, [self.type().dim()]))
    index = sh._maybe_get_const(dim, "i")
    if not isinstance(index, Value):
        return sh._squeeze_helper(g, sh._slice_helper(
            g, g.op("Shape", self), [0], [index], [index + 1 if index != -1 else 2**62]), [0])
    return g.op("Gather", g.op("Shape", self), index, axis_i=0)


def _shape_input(g, shape: Value) -> Value:
    if sh._is_packed_list(shape) or shape.is_const:
        return g.graph.materialize(shape) if not shape.is_const else g.constant(
            torch.tensor(sh._maybe_get_const(shape, "is"), dtype=torch.int64))
    return sh._cast_to(g, shape, torch.int64)


@pack.symbolic("aten::view", since=7)
def view(g, self: Value, size: Value) -> Value:
    return g.op("Reshape", self, _shape_input(g, size))


pack.alias(view, "aten::reshape", since=7)


@pack.symbolic("aten::flatten", since=7)
@sh.parse_args("v", "i", "i")
def flatten(g, input: Value, start_dim: int, end_dim: int) -> Value:
    """Flatten when the dims run to the end; Reshape over Shape slices otherwise."""
    rank = input.type().dim()
    if rank is None:
        sh._unimplemented("aten::flatten", "an input of unknown rank")
    start, end = start_dim % max(rank, 1), end_dim % max(rank, 1)
    if rank == 0:
        return sh._reshape_helper(g, input, [1])
    if end == rank - 1:
        flat = g.op("Flatten", input, axis_i=start)
        if start == 0:
            return sh._squeeze_helper(g, flat, [0])
        if start == 1 or rank == 2:
            return flat
    shape = g.op("Shape", input)
    parts = []
    if start > 0:
        parts.append(sh._slice_helper(g, shape, [0], [0], [start]))
    parts.append(g.constant(torch.tensor([-1], dtype=torch.int64)))
    if end < rank - 1:
        parts.append(sh._slice_helper(g, shape, [0], [end + 1], [rank]))
    return g.op("Reshape", input, g.op("Concat", *parts, axis_i=0))


@pack.symbolic("aten::cat", since=7)
def cat(g, tensors: Value, dim: Value) -> Value:
    axis = sh._maybe_get_const(dim, "i")
    items = [t for t in sh._unpack_list(tensors)
             if not (t.type().dim() == 1 and t.type().varyingSizes() == [0])]
    return g.op("Concat", *items, axis_i=axis)


def _identity(name: str):
    def symbolic(g, self: Value, *_: Value) -> Value:
        return self
    symbolic.__name__ = name
    symbolic.__doc__ = f"``aten::{name}`` changes nothing an ONNX graph can see."
    return symbolic


for _name in ("contiguous", "detach", "clone"):
    pack.symbolic(f"aten::{_name}", since=7)(_identity(_name))


pack.case("aten::size", lambda x: x.view(x.size(0), -1), (2, 3, 4), input_names=["x"],
          dynamic_axes={"x": [0]})
pack.case("aten::size", lambda x: x.view(x.size()[::-1]), (2, 3), name="whole")
pack.case("aten::view", lambda x: x.view(4, -1), (2, 3, 4))
pack.case("aten::reshape", lambda x: x.reshape(-1, 2), (2, 3, 4))
pack.case("aten::flatten", lambda x: torch.flatten(x, 1), (2, 3, 4, 5), name="tail")
pack.case("aten::flatten", lambda x: torch.flatten(x, 1, 2), (2, 3, 4, 5), name="middle")
pack.case("aten::flatten", lambda x: torch.flatten(x), (2, 3), name="all")
pack.case("aten::cat", lambda x, y: torch.cat([x, y], 1), (2, 3), (2, 4))
pack.case("aten::contiguous", lambda x: x.contiguous() * 2, (2, 3))
pack.case("aten::detach", lambda x: x.detach() * 2, (2, 3))
pack.case("aten::clone", lambda x: x.clone() * 2, (2, 3))
