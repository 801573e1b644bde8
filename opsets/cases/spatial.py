"""Test cases of the ``oxport.spatial`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from oxport.opsets.spatial import pack

nn = torch.nn


def _x(*shape: int):
    return lambda: torch.randn(*shape)


def _ints(*shape: int):
    return lambda: torch.randint(-5, 5, shape)


pack.case("aten::pad", lambda x: F.pad(x, (1, 2)), (2, 3, 4), name="constant")
pack.case("aten::pad", lambda x: F.pad(x, (1, 0, -1, 2), value=1.5), (1, 2, 4, 5),
          name="constant_value_negative")
pack.case("aten::pad", lambda x: F.pad(x, (1, 2), value=7), _ints(2, 5), name="int",
          min_opset=11)
pack.case("aten::pad", nn.ReflectionPad2d((1, 2, 0, 1)), (1, 2, 4, 5), name="reflect")
pack.case("aten::pad", nn.ReplicationPad3d(1), (1, 2, 2, 3, 2), name="replicate")
pack.case("aten::pad", nn.CircularPad2d((1, 2, 2, 0)), (1, 2, 3, 4), name="circular")
pack.case("aten::pad", lambda x, y: F.pad(x, (0, y.size(-1) - x.size(-1))), (2, 3), (2, 5),
          name="dynamic", min_opset=11, input_names=["x", "y"],
          dynamic_axes={"x": {0: "n", 1: "a"}, "y": {0: "n", 1: "b"}})
pack.case("aten::constant_pad_nd", lambda x: torch.constant_pad_nd(x, [1, 1, 2, 0], -1.0),
          (1, 3, 4))
pack.case("aten::reflection_pad1d", lambda x: torch.ops.aten.reflection_pad1d(x, [2, 1]),
          (1, 2, 5))
pack.case("aten::reflection_pad2d", lambda x: torch.ops.aten.reflection_pad2d(x, [1, 1, 2, 0]),
          (1, 2, 4, 4))
pack.case("aten::reflection_pad3d", lambda x: torch.ops.aten.reflection_pad3d(x, [1] * 6),
          (1, 1, 3, 3, 3))
pack.case("aten::replication_pad1d", lambda x: torch.ops.aten.replication_pad1d(x, [0, 3]),
          (2, 2, 3))
pack.case("aten::replication_pad2d",
          lambda x: torch.ops.aten.replication_pad2d(x, [2, 1, 0, 1]), (1, 2, 3, 3))
pack.case("aten::replication_pad3d", lambda x: torch.ops.aten.replication_pad3d(x, [1] * 6),
          (1, 1, 2, 3, 2))

_NEAREST = "aten::upsample_nearest{}d"
pack.case(_NEAREST.format(1), lambda x: F.interpolate(x, scale_factor=2), (1, 2, 5))
pack.case(_NEAREST.format(2), lambda x: F.interpolate(x, scale_factor=(1.5, 2.5)),
          (1, 2, 4, 5), name="scales")
pack.case(_NEAREST.format(2), lambda x: F.interpolate(x, size=(7, 12)), (1, 2, 4, 5),
          name="size")
pack.case(_NEAREST.format(2), lambda x: F.interpolate(x, size=(3, 2)), (1, 2, 6, 4),
          name="downsample", min_opset=10)
pack.case(_NEAREST.format(2), lambda x: F.interpolate(x, size=(3, 2)), (1, 2, 6, 5),
          name="downsample_fractional", min_opset=11)
pack.case(_NEAREST.format(2), nn.Upsample(scale_factor=2), (1, 2, 3, 3), name="dynamic",
          min_opset=9, input_names=["x"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})
pack.case(_NEAREST.format(2), lambda x, y: F.interpolate(x, size=y.shape[-2:]), (1, 2, 3, 3),
          (1, 1, 5, 7), name="dynamic_size", min_opset=9, input_names=["x", "y"],
          dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}, "y": {2: "h2", 3: "w2"}})
pack.case(_NEAREST.format(3), lambda x: F.interpolate(x, scale_factor=(1, 2, 3)),
          (1, 1, 2, 3, 2))
pack.case("aten::_upsample_nearest_exact1d",
          lambda x: F.interpolate(x, size=7, mode="nearest-exact"), (1, 2, 5))
pack.case("aten::_upsample_nearest_exact2d",
          lambda x: F.interpolate(x, scale_factor=0.5, mode="nearest-exact"), (1, 2, 7, 6))
pack.case("aten::_upsample_nearest_exact3d",
          lambda x: F.interpolate(x, scale_factor=2, mode="nearest-exact"), (1, 1, 2, 3, 2))
pack.case("aten::upsample_linear1d",
          lambda x: F.interpolate(x, size=9, mode="linear", align_corners=True), (1, 2, 5),
          name="align_corners")
pack.case("aten::upsample_linear1d", lambda x: F.interpolate(x, scale_factor=0.5, mode="linear"),
          (1, 2, 9), name="downsample")
pack.case("aten::upsample_bilinear2d",
          lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), (1, 2, 3, 4))
pack.case("aten::upsample_bilinear2d",
          lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True),
          (1, 2, 3, 4), name="align_corners_size")
pack.case("aten::upsample_bilinear2d",
          lambda x: F.interpolate(x, scale_factor=(1.5, 0.5), mode="bilinear"), (1, 2, 4, 6),
          name="fractional")
pack.case("aten::upsample_bilinear2d",
          lambda x, y: F.interpolate(x, size=y.shape[2:], mode="bilinear"), (1, 2, 3, 4),
          (1, 1, 6, 5), name="dynamic_size", input_names=["x", "y"], min_opset=11,
          dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}, "y": {2: "h2", 3: "w2"}})
pack.case("aten::upsample_trilinear3d",
          lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), (1, 1, 2, 3, 2))
pack.case("aten::upsample_trilinear3d",
          lambda x: F.interpolate(x, size=(3, 4, 5), mode="trilinear", align_corners=True),
          (1, 1, 2, 3, 2), name="align_corners")
pack.case("aten::upsample_bicubic2d",
          lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), (1, 2, 4, 5))
pack.case("aten::upsample_bicubic2d",
          lambda x: F.interpolate(x, size=(6, 3), mode="bicubic", align_corners=True),
          (1, 2, 4, 5), name="align_corners")
pack.case("aten::_upsample_bilinear2d_aa",
          lambda x: F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True),
          (1, 2, 8, 9), rtol=1e-3, atol=1e-4)
pack.case("aten::_upsample_bicubic2d_aa",
          lambda x: F.interpolate(x, size=(3, 4), mode="bicubic", antialias=True),
          (1, 2, 8, 9), rtol=1e-3, atol=1e-4)
pack.case("aten::pixel_shuffle", nn.PixelShuffle(2), (1, 8, 3, 4))
pack.case("aten::pixel_shuffle", nn.PixelShuffle(3), (2, 3, 9, 2, 2), name="5d")
pack.case("aten::pixel_shuffle", nn.PixelShuffle(2), (1, 8, 3, 4), name="dynamic",
          input_names=["x"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})
pack.case("aten::pixel_unshuffle", nn.PixelUnshuffle(2), (1, 2, 4, 6))
pack.case("aten::channel_shuffle", nn.ChannelShuffle(3), (2, 6, 3, 4), input_names=["x"],
          dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})
pack.case("aten::native_channel_shuffle", lambda x: torch.native_channel_shuffle(x, 2),
          (1, 4, 5))
pack.case("aten::pixel_unshuffle", nn.PixelUnshuffle(3), (3, 6, 6), name="3d")
pack.case("aten::im2col", nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
          (2, 3, 5, 6))
pack.case("aten::im2col", nn.Unfold(2), (3, 4, 4), name="unbatched")
pack.case("aten::unfold", lambda x: x.unfold(1, 3, 2), (2, 8, 3))
pack.case("aten::unfold", lambda x: x.unfold(-1, 4, 4), (2, 3, 8), name="last_dim")
pack.case("aten::unfold", lambda x: x.unfold(1, 2, 1), (1, 5, 2), name="dynamic", min_opset=11,
          input_names=["x"], dynamic_axes={"x": {1: "len"}})
pack.case("aten::col2im", nn.Fold((4, 5), (2, 3), padding=(1, 0), stride=(1, 2)), (2, 12, 10))
pack.case("aten::col2im", nn.Fold((6, 8), 2, dilation=(1, 2), stride=(2, 2)), (8, 9),
          name="unbatched_uneven_dilated")


def _interpolate_nearest(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.__interpolate(x, None, [2.0, 3.0], "nearest", None, None, False)


def _interpolate_size(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.__interpolate(x, 7, None, "nearest", None, None, False)


def _interpolate_bilinear(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.__interpolate(x, [5, 7], None, "bilinear", True, None, False)


def _interpolate_bicubic(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.__interpolate(x, None, [0.5, 0.5], "bicubic", False, None, False)


def _interpolate_trilinear(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.__interpolate(x, None, [2.0, 1.5, 2.0], "trilinear", False, None,
                                        False)


pack.case("aten::__interpolate", _interpolate_nearest, (1, 2, 3, 4), script=True, min_opset=9)


def _nearest_by_scale(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, mode="nearest", scale_factor=2.0)


@functools.cache
def _scripted_nearest_by_scale() -> torch.jit.ScriptFunction:
    """F.interpolate scripted: it builds its scale list in a loop, a run-time tensor here."""
    return torch.jit.script(_nearest_by_scale)


class _TracedCallsScriptedInterpolate(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _scripted_nearest_by_scale()(x)


pack.case("aten::upsample_nearest3d", _TracedCallsScriptedInterpolate, (1, 2, 4, 4, 6),
          name="run_time_scales", min_opset=9)
pack.case("aten::__interpolate", _interpolate_size, (1, 2, 5), name="size", script=True)
pack.case("aten::__interpolate", _interpolate_bilinear, (1, 2, 3, 4), name="bilinear",
          script=True)
pack.case("aten::__interpolate", _interpolate_trilinear, (1, 2, 3, 4, 2), name="trilinear",
          script=True)
pack.case("aten::__interpolate", _interpolate_bicubic, (1, 2, 8, 8), name="bicubic",
          script=True, min_opset=11, atol=1e-4)
pack.case("aten::affine_grid_generator",
          lambda t: F.affine_grid(t, [2, 3, 4, 5], align_corners=False), (2, 2, 3))
pack.case("aten::affine_grid_generator",
          lambda t: F.affine_grid(t, [1, 1, 2, 3, 4], align_corners=True), (1, 3, 4), name="3d")


def _grid(*shape: int):
    """Sampling coordinates a little beyond [-1, 1], to exercise the padding modes."""
    return lambda: torch.rand(*shape) * 2.4 - 1.2


for _mode in ("bilinear", "nearest", "bicubic"):
    for _padding in ("zeros", "border", "reflection"):
        for _align in (False, True):
            pack.case("aten::grid_sampler",
                      lambda x, grid, m=_mode, p=_padding, a=_align: F.grid_sample(
                          x, grid, mode=m, padding_mode=p, align_corners=a),
                      (2, 3, 5, 6), _grid(2, 4, 7, 2), name=f"{_mode}_{_padding}_{_align}",
                      atol=1e-4)
pack.case("aten::grid_sampler",
          lambda x, grid: F.grid_sample(x, grid, mode="bilinear", align_corners=False),
          (1, 2, 3, 4, 5), _grid(1, 2, 3, 4, 3), name="volumetric", min_opset=20, atol=1e-4)
pack.case("aten::affine_grid_generator",
          lambda theta: F.affine_grid(theta, [1, 1, 3, 1, 4], align_corners=True), (1, 3, 4),
          name="volumetric_align_corners")
pack.case("aten::affine_grid_generator",
          lambda x, theta: F.affine_grid(theta, x.shape, align_corners=False), (2, 3, 4, 5),
          (2, 2, 3), name="run_time_size", input_names=["x", "theta"],
          dynamic_axes={"x": {2: "h", 3: "w"}}, min_opset=20)
pack.case("aten::pad", lambda x: F.pad(x, (2, 1), mode="circular"), (2, 3, 4),
          name="circular_1d", min_opset=11)
pack.case("aten::pad", lambda x: F.pad(x, (-1, -2), mode="circular"), (2, 3, 6),
          name="circular_negative")
pack.case("aten::pad", lambda x: F.pad(x, (-1, 2, 2, -1), mode="circular"), (1, 2, 5, 6),
          name="circular_crop_then_wrap")
