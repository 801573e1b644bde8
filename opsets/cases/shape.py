"""Test cases of the ``oxport.shape`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.cases import scalar
from oxport.opsets.shape import pack

DYN = {"x": [0, 1]}


# (scripted: a dynamic axis leaves the sizes unknown to the converted graph)
def _unbind_dynamic(x: torch.Tensor) -> torch.Tensor:
    return x * len(x.unbind()) + torch.stack(x.unbind(), 1).sum(1)


def _split_computed_sizes(x: torch.Tensor) -> torch.Tensor:
    first, rest = torch.split(x, (1, x.size(1) - 1), dim=1)
    return rest * first


def _reshape_to_joined_sizes(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.size()[:1] + [-1]).transpose(0, 1)


pack.case("aten::size", lambda x: x.view(x.size(0), -1), (2, 3, 4), input_names=["x"],
          dynamic_axes={"x": [0]})
pack.case("aten::size", lambda x: x.view(x.size()[::-1]), (2, 3), name="whole",
          input_names=["x"], dynamic_axes=DYN)
pack.case("aten::numel", lambda x: x.view(x.numel() // 4, 4), (2, 3, 4), input_names=["x"],
          dynamic_axes={"x": [0, 1]})
pack.case("aten::numel", torch.nn.EmbeddingBag(10, 3), lambda: torch.randint(0, 10, (2, 4)),
          name="embedding_bag_2d", min_opset=11)
pack.case("aten::view", lambda x: x.view(4, -1), (2, 3, 4))
pack.case("aten::reshape", lambda x: x.reshape(-1, 2), (2, 3, 4))
_NO_VIEW_DTYPE = "the trace fails on x.view(dtype) (TorchScript's alias analysis asserts)"
pack.case("aten::view", lambda x: x.view(torch.float32) * 2, (2, 3), name="own_dtype",
          not_traceable=_NO_VIEW_DTYPE)
pack.case("aten::view", lambda x: x.view(torch.int32) + 1, (2, 3), name="dtype", min_opset=26,
          not_traceable=_NO_VIEW_DTYPE)
pack.case("aten::view_as", lambda x, y: x.view_as(y), (2, 6), (3, 4))
pack.case("aten::reshape_as", lambda x, y: x.reshape_as(y), (2, 6), (4, 3),
          input_names=["x", "y"], dynamic_axes={"y": [0, 1]})
pack.case("aten::flatten", lambda x: torch.flatten(x, 1), (2, 3, 4, 5), name="tail")
pack.case("aten::flatten", lambda x: torch.flatten(x, 1, 2), (2, 3, 4, 5), name="middle")
pack.case("aten::flatten", lambda x: torch.flatten(x), (2, 3), name="all")
# An empty dim: a Reshape's 0 copies the input's dim unless allowzero (opset 14).
pack.case("aten::view", lambda x: x.view(2, 0, 3), (1, 2, 0, 3), name="empty", min_opset=8)
pack.case("aten::reshape", lambda x: x.reshape(0, 4).int(), (2, 0, 2), name="empty",
          min_opset=8)
pack.case("aten::flatten", lambda x: torch.flatten(x, 0, 1), (1, 2, 0, 3), name="empty",
          input_names=["x"], dynamic_axes={"x": [1]}, min_opset=8)
pack.case("aten::flatten", lambda x: torch.flatten(x, 1), (2, 0, 3), name="empty_tail",
          min_opset=8)
pack.case("aten::unflatten", lambda x: x.unflatten(-1, (2, -1)), (2, 3, 4),
          input_names=["x"], dynamic_axes={"x": [0, 1]}, min_opset=9)
pack.case("aten::cat", lambda x, y: torch.cat([x, y], 1), (2, 3), (2, 4))
pack.case("aten::cat", lambda x, y: torch.cat([x, y.int()], -1), (2, 3), (2, 4), name="neg")
# A legacy empty 1-D tensor is dropped, but its dtype still takes part in the promotion.
pack.case("aten::cat", lambda x: torch.cat([x, torch.empty(0)]),
          torch.tensor([[1, 2], [3, 4]]), name="one_left_promoted")
pack.case("aten::cat", lambda x, y: torch.cat([x, y.half(), torch.empty(0)]),
          torch.tensor([1, 2]), (3,), name="empty_promotes", atol=1e-3)
pack.case("aten::cat", lambda x: torch.cat([x, torch.tensor([])]), (3,), name="empty_float")
pack.case("aten::stack", lambda x, y: torch.stack([x, y], -1), (2, 3), (2, 3))
pack.case("aten::hstack", lambda x, y: torch.hstack([x, y]), (2, 3), (2, 1))
pack.case("aten::hstack", lambda x, y: torch.hstack([x, y]), (2,), (3,), name="1d")
pack.case("aten::vstack", lambda x, y: torch.vstack([x, y]), (3,), (2, 3))
# One piece at the traced size: eager's first piece at any size of the dynamic axis.
pack.case("aten::split", lambda x: x.split(4, 1)[0] * 2, (3, 2), name="one_piece",
          input_names=["x"], dynamic_axes={"x": [1]})
# A split size computed from a dynamic axis (torch.export may write a chunk so too).
pack.case("aten::split", lambda x: x.split((x.shape[0] + 2) // 3)[-1] * 2, (4, 3),
          name="run_time_step",
          input_names=["x"], dynamic_axes={"x": [0]}, min_opset=10,
          not_traceable="a split size computed at run time comes from torch.export")
pack.case("aten::split", lambda x: x.split(2, -1), (2, 5), input_names=["x"],
          dynamic_axes={"x": [0]})
pack.case("aten::split", lambda x: torch.cat(torch.ops.aten.split(x, [1, 3], 1)[::-1], 1),
          (2, 4), name="sizes")
pack.case("aten::split", lambda x: torch.stack(x.split(1)), (3, 2), name="as_list",
          min_opset=11)
pack.case("aten::split_with_sizes", lambda x: x.split_with_sizes([2, 1], 0), (3, 2))
pack.case("aten::split_with_sizes",  # nn.MultiheadAttention's w.split([E, E * 2])
          lambda x, y: [t * 2 for t in x.split_with_sizes([y.size(1), y.size(1) * 2])],
          (6, 2), (1, 2), name="run_time_sizes", min_opset=10, input_names=["x", "y"],
          dynamic_axes={"x": [0], "y": [1]})
pack.case("aten::unsafe_split", lambda x: torch.ops.aten.unsafe_split(x, 2), (3, 2))
pack.case("aten::unsafe_split_with_sizes",
          lambda x: torch.ops.aten.unsafe_split_with_sizes(x, [1, 1], 1), (3, 2))
pack.case("aten::chunk", lambda x: x.chunk(2, -1), (3, 4), input_names=["x"],
          dynamic_axes={"x": [0, 1]})
pack.case("aten::chunk", lambda x: x.chunk(3, 0), (5, 2), name="uneven")


def _chunk_list(x: torch.Tensor) -> torch.Tensor:
    pieces = x.chunk(2, -1)  # scripted over a dynamic axis: as many pieces as the size gives
    return torch.cat([pieces[0] * 2, pieces[-1]], -1) + len(pieces)


pack.case("aten::chunk", _chunk_list, (3, 5), name="scripted_dynamic", script=True,
          input_names=["x"], dynamic_axes={"x": [0, 1]}, min_opset=11)
pack.case("aten::chunk", lambda x: x.chunk(2, 0)[-1] + 1, lambda: torch.zeros(0, 3), name="empty")


def _chunk_count(x: torch.Tensor, chunks: int) -> torch.Tensor:
    pieces = x.chunk(chunks, 0)  # scripted, the int argument is an input: pieces at run time
    return pieces[0] * 2 + pieces[-1][:1]


pack.case("aten::chunk", _chunk_count, (7, 3), 3, name="run_time_count", script=True,
          min_opset=11)
pack.case("aten::unsafe_chunk", lambda x: torch.ops.aten.unsafe_chunk(x, 2), (4, 2))
pack.case("aten::tensor_split", lambda x: x.tensor_split(3, 1), (2, 7))
pack.case("aten::tensor_split", lambda x: x.tensor_split([1, -1], 0), (4, 2), name="indices")
pack.case("aten::unbind", lambda x: [t * 2 for t in x.unbind(1)], (2, 3, 4))
pack.case("aten::unbind", _unbind_dynamic, (3, 2), name="dynamic", script=True, min_opset=11,
          input_names=["x"], dynamic_axes=DYN)
# ModernBERT's fused QKV: viewed by sizes read at run time (the axis's size known only to the
# trace), then unbound along the static axis of 3.
pack.case("aten::unbind", lambda x: [t * 2 for t in x.view(*x.shape[:-1], 3, -1).unbind(-2)],
          (2, 4, 6), name="after_a_view_by_run_time_sizes", input_names=["x"],
          dynamic_axes={"x": [0, 1]})
pack.case("aten::split", _split_computed_sizes, (2, 4), name="computed_sizes", script=True,
          min_opset=11, input_names=["x"], dynamic_axes=DYN)
pack.case("aten::reshape", _reshape_to_joined_sizes, (2, 3, 4), name="joined_sizes",
          script=True, input_names=["x"], dynamic_axes=DYN)
pack.case("aten::contiguous", lambda x: x.contiguous() * 2, (2, 3))
pack.case("aten::detach", lambda x: x.detach() * 2, (2, 3))
pack.case("aten::clone", lambda x: x.clone() * 2, (2, 3))
pack.case("aten::permute", lambda x: x.permute(2, 0, -2), (2, 3, 4))
pack.case("aten::transpose", lambda x: x.transpose(-1, 0), (2, 3, 4))
pack.case("aten::t", lambda x: x.t(), (2, 3))
pack.case("aten::t", lambda x: x.t() + 1, (3,), name="1d")
pack.case("aten::numpy_T", lambda x: x.T, (2, 3, 4))
pack.case("aten::mT", lambda x: x.mT, (2, 3, 4))
pack.case("aten::mH", lambda x: x.mH, (2, 3, 4))
pack.case("aten::movedim", lambda x: torch.movedim(x, (0, 1), (2, 0)), (2, 3, 4))
pack.case("aten::squeeze", lambda x: x.squeeze(), (2, 1, 3, 1))
pack.case("aten::squeeze", lambda x: x.squeeze(-1) + x.squeeze(0).unsqueeze(0).squeeze(-1),
          (2, 3, 1), name="dim")
pack.case("aten::squeeze", lambda x: x.squeeze((1, 3)), (2, 1, 3, 1), name="dims")


def _squeeze_middle(x: torch.Tensor) -> torch.Tensor:
    return x.squeeze(-2) + 1


# Scripted, the dynamic axes' sizes are unknown: the dim goes only if it is 1 at run time.
pack.case("aten::squeeze", _squeeze_middle, (2, 1, 4), name="dynamic_size", script=True,
          input_names=["x"], dynamic_axes={"x": [0, 1, 2]}, min_opset=11)
pack.case("aten::squeeze", _squeeze_middle, (2, 3, 4), name="dynamic_size_not_one",
          script=True, input_names=["x"], dynamic_axes={"x": [0, 1, 2]}, min_opset=11)
def _squeeze_at(x: torch.Tensor, d: int) -> torch.Tensor:
    return x.squeeze(d)


pack.case("aten::squeeze", _squeeze_at, (2, 1, 4), 1, name="dim_at_run_time",
          input_names=["x", "d"], min_opset=11)
pack.case("aten::squeeze", _squeeze_at, (2, 1, 4), -3, name="dim_at_run_time_not_one",
          input_names=["x", "d"], min_opset=11)
# A size computed from tensor values (no dynamic axes): which dims are 1 is decided at run
# time (tests/test_shape_indexing_dynamic.py runs these at a second size).
pack.case("aten::squeeze", lambda d: torch.zeros(d[0], 2).squeeze(0), lambda: torch.tensor([1]),
          name="size_from_values", min_opset=11)
pack.case("aten::squeeze", lambda d: torch.zeros(d[0], 2).squeeze(0), lambda: torch.tensor([3]),
          name="size_from_values_not_one", min_opset=11)
pack.case("aten::unsqueeze", lambda x: x.unsqueeze(-1).unsqueeze(0), (2, 3))
pack.case("aten::unsqueeze", lambda x, d: x.unsqueeze(d), (2, 3), -1, name="dim_at_run_time",
          input_names=["x", "d"], min_opset=13)
pack.case("aten::expand", lambda x, s: x.expand(s) * 2, (3,), lambda: torch.tensor(-1),
          name="size_tensor", min_opset=9, input_names=["x", "s"])
pack.case("aten::expand", lambda x: x.expand(2, -1, 4), (3, 1), name="neg1",
          input_names=["x"], dynamic_axes={"x": [0]})
pack.case("aten::expand", lambda x, y: x.expand(y.size(0), -1), (1, 3), (4, 2), name="dynamic",
          input_names=["x", "y"], dynamic_axes={"y": [0]})
pack.case("aten::expand_as", lambda x, y: x.expand_as(y), (3, 1), (2, 3, 4))
pack.case("aten::broadcast_tensors", torch.broadcast_tensors, (3, 1), (4,), (1, 1, 1),
          min_opset=8)
pack.case("aten::broadcast_tensors", lambda x, y: [t * 2 for t in torch.broadcast_tensors(x, y)],
          (3, 4), (3, 4), name="same_shape")
pack.case("aten::broadcast_tensors", lambda x, y: torch.broadcast_tensors(x, y), (3, 1),
          (2, 1, 4), name="dynamic", input_names=["x", "y"], dynamic_axes={"x": [0], "y": [0, 2]},
          min_opset=8)
pack.case("aten::repeat", lambda x: x.repeat(2, 1, 3), (2, 3))
pack.case("aten::tile", lambda x: x.tile((2,)), (2, 3))
pack.case("aten::repeat_interleave", lambda x: x.repeat_interleave(2, dim=1), (2, 3),
          name="int", input_names=["x"], dynamic_axes=DYN)
pack.case("aten::repeat_interleave", lambda x: x.repeat_interleave(3), (2, 3), name="flat")


def _repeat_interleave_counts(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return x.repeat_interleave(r, dim=1)


# Scripted, the counts' length is unknown: one count broadcasts to every element at run time.
pack.case("aten::repeat_interleave", _repeat_interleave_counts, (2, 3),
          lambda: torch.tensor([2]), name="one_count_of_dynamic_length", script=True,
          min_opset=11, input_names=["x", "r"], dynamic_axes={"r": [0]})
pack.case("aten::repeat_interleave",
          lambda x, r: x.repeat_interleave(r, dim=0), (3, 2),
          lambda: torch.tensor([1, 0, 2]), name="tensor", min_opset=11)
pack.case("aten::repeat_interleave", lambda r: torch.repeat_interleave(r) * 1,
          lambda: torch.tensor([2, 1, 3]), name="counts", min_opset=11)
pack.case("aten::flip", lambda x: x.flip(0, -1), (2, 3, 4), input_names=["x"], dynamic_axes=DYN)
pack.case("aten::roll", lambda x: x.roll((1, -2), (0, 2)), (3, 4, 5))
pack.case("aten::roll", lambda x: x.roll(7), (2, 3), name="flat")
pack.case("aten::to", lambda x: x.to(torch.int32) + x.to(x.dtype).to("cpu").to(torch.int64),
          (2, 3))
pack.case("aten::to", lambda x, y: x.to(y) + x.to("cpu", torch.float64) + x.long().double(),
          (2, 3), lambda: torch.zeros(2, 3, dtype=torch.float64), name="overloads")
pack.case("aten::_to_copy", lambda x: torch.ops.aten._to_copy(x, dtype=torch.float16), (2, 3))
pack.case("aten::type_as", lambda x, y: x.type_as(y), (2, 3),
          lambda: torch.zeros(1, dtype=torch.int32))
pack.case("aten::triu", lambda x: x.triu(1), (2, 3, 4), input_names=["x"], dynamic_axes=DYN)
pack.case("aten::tril", lambda x: x.tril(-1), (3, 5))
pack.case("aten::triu", lambda x: x.triu(), (4, 3), name="k0")
pack.case("aten::tril", lambda x: x.tril(0), lambda: torch.ones(3, 3, dtype=torch.bool),
          name="bool")
pack.case("aten::diagonal", lambda x: x.diagonal(), (3, 4))
pack.case("aten::diagonal", lambda x: torch.diagonal(x, -1, 2, 0), (4, 2, 3), name="offset",
          input_names=["x"], dynamic_axes={"x": [0, 2]})

pack.case("aten::flip", lambda x: x.flip(0), scalar, name="0d")
pack.case("aten::movedim", lambda x: torch.movedim(x, 0, -1), scalar, name="0d")
pack.case("aten::alias", lambda x: torch.ops.aten.alias(x) + 1, (2, 3))
pack.case("aten::lift", lambda x: torch.ops.aten.lift(x) * 2, (2, 3))
pack.case("aten::conj_physical", lambda x: torch.conj_physical(x) + 1, (2, 3))
pack.case("aten::resolve_conj", lambda x: x.resolve_conj() + 1, (2, 3))
pack.case("aten::resolve_conj", lambda x: torch.view_as_real(x.resolve_conj()),
          lambda: torch.randn(2, 3, dtype=torch.complex64), name="complex")
pack.case("aten::resolve_neg", lambda x: x.resolve_neg() + 1, (2, 3))
pack.case("aten::_shape_as_tensor", lambda x: torch._shape_as_tensor(x) + 1, (2, 3, 4),
          input_names=["x"], dynamic_axes=DYN)
pack.case("aten::_reshape_from_tensor",
          lambda x, y: torch._reshape_from_tensor(x, torch._shape_as_tensor(y)), (2, 6), (3, 4),
          input_names=["x", "y"], dynamic_axes={"x": [0, 1], "y": [0, 1]})
pack.case("aten::broadcast_to", lambda x: x.broadcast_to(2, 3, 4), (3, 1))
pack.case("aten::broadcast_to", lambda x, y: x.broadcast_to(y.shape), (3, 1), (2, 3, 4),
          name="dynamic", input_names=["x", "y"], dynamic_axes={"y": [0, 2]})
for _rank in (1, 2, 3):
    pack.case(f"aten::atleast_{_rank}d",
              lambda x, y, z, r=_rank: [getattr(torch, f"atleast_{r}d")(t) + 1 for t in (x, y, z)],
              lambda: torch.tensor(1.5), (3,), (2, 3))
    pack.case(f"aten::atleast_{_rank}d",
              lambda x, y, r=_rank: getattr(torch, f"atleast_{r}d")((x, y)), (4,), (2, 2),
              name="sequence")
pack.case("aten::meshgrid", lambda x, y, z: torch.meshgrid(x, y, z, indexing="ij"), (2,), (3,),
          (4,), input_names=["x", "y", "z"], dynamic_axes={"x": [0], "y": [0]})
pack.case("aten::meshgrid", lambda x, y, z: torch.meshgrid(x, y, z, indexing="xy"), (2,), (3,),
          (4,), name="xy")
pack.case("aten::as_strided", lambda x: x.as_strided((3, 2), (1, 3), 1) * 2, (4, 3))
pack.case("aten::as_strided", lambda x: torch.as_strided(x, (2, 2, 2), (4, 1, 2)), (2, 4),
          name="overlapping")
pack.case("aten::roll", lambda x: x.roll(2, 0) + x.roll(1), lambda: torch.zeros(0, 3),
          name="empty")
# Complex tensors travel as real pairs: a negative dim counts before the pairs' axis.
pack.case("aten::unsqueeze",
          lambda x: torch.view_as_real(torch.view_as_complex(x).unsqueeze(-1).unsqueeze(1)),
          (2, 3, 2), name="complex")
pack.case("aten::to", lambda x: torch.view_as_real(
    torch.view_as_complex(x).to("cpu").to(torch.complex128)), (3, 4, 2), name="complex")
pack.case("aten::size", lambda x: torch.view_as_complex(x).size(-1) + torch.view_as_complex(
    x).shape[0] * torch.ones(torch.view_as_complex(x).shape), (3, 4, 2), name="complex",
    input_names=["x"], dynamic_axes={"x": [0, 1]}, min_opset=9)
pack.case(["aten::clone", "aten::contiguous", "aten::detach"], lambda x: torch.view_as_real(
    torch.view_as_complex(x).clone().contiguous().detach()) * 2, (3, 4, 2), name="complex")
pack.case("aten::tensor_split", lambda x, i: torch.tensor_split(x, i, 1), (2, 7, 3),
          lambda: torch.tensor([1, 5, -1]), name="run_time_indices", min_opset=10,
          input_names=["x", "i"], dynamic_axes={"x": [0, 1]})
pack.case("aten::tensor_split", lambda x, n: torch.tensor_split(x, n), (7, 2),
          lambda: torch.tensor(3), name="run_time_count")
