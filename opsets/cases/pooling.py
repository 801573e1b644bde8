"""Test cases of the ``oxport.pooling`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.pooling import pack

nn = torch.nn
_DYNAMIC = dict(input_names=["x"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})

pack.case("aten::max_pool1d", nn.MaxPool1d(3, 2), (1, 2, 9))
pack.case("aten::max_pool1d", nn.MaxPool1d(3, 2, padding=1, dilation=2, ceil_mode=True),
          (1, 2, 10), name="dilation_ceil", min_opset=10)
pack.case("aten::max_pool2d", nn.MaxPool2d(3, 2), (1, 2, 9, 9))
pack.case("aten::max_pool2d", nn.MaxPool2d(3, 2, padding=1, ceil_mode=True), (1, 2, 8, 8),
          name="ceil")
pack.case("aten::max_pool2d", nn.MaxPool2d(3, 2, ceil_mode=True), (2, 3, 8, 9),
          name="ceil_unpadded")
pack.case("aten::max_pool2d", nn.MaxPool2d(2, 2, padding=1, ceil_mode=True), (1, 2, 5, 6),
          name="ceil_last_window_in_padding")
pack.case("aten::max_pool2d", nn.MaxPool2d((2, 3), (1, 2), dilation=(2, 1)), (1, 1, 7, 8),
          name="dilation", min_opset=10)
pack.case("aten::max_pool2d", nn.MaxPool2d(2, ceil_mode=True), (2, 3, 8, 8),
          name="ceil_noop")
pack.case("aten::max_pool2d", nn.MaxPool2d(3, 2, padding=1), (1, 2, 9, 9), name="dynamic",
          **_DYNAMIC)
pack.case("aten::max_pool3d", nn.MaxPool3d(2, padding=1), (1, 2, 4, 5, 3))
# ceil_mode adds a window on the first axis while PyTorch drops the last one on the third
# (it would start in the padding): ONNX's ceil_mode would count it there.
pack.case("aten::max_pool3d", nn.MaxPool3d(3, padding=1, ceil_mode=True), (1, 2, 3, 6, 5),
          name="ceil_mixed_axes")
pack.case("aten::max_pool3d_with_indices", nn.MaxPool3d(3, padding=1, ceil_mode=True,
                                                      return_indices=True), (1, 2, 3, 6, 5),
          name="ceil_mixed_axes")
pack.case("aten::avg_pool3d", nn.AvgPool3d(3, padding=1, ceil_mode=True), (1, 2, 3, 6, 5),
          name="ceil_mixed_axes")
# The same with a dilated window whose ceil-mode end pads reach the kernel's size (ONNX
# Runtime refuses them): the input is padded explicitly, indices mapped back to it.
for _rank, _pool, _shape in (
        (2, dict(kernel_size=2, stride=2, padding=1, dilation=(2, 1)), (1, 2, 6, 5)),
        (3, dict(kernel_size=(3, 2, 3), padding=1, dilation=(1, 2, 1)), (1, 2, 3, 6, 5))):
    _module = getattr(nn, f"MaxPool{_rank}d")
    pack.case(f"aten::max_pool{_rank}d", _module(**_pool, ceil_mode=True), _shape,
              name="dilated_ceil_mixed_axes", min_opset=10)
    pack.case(f"aten::max_pool{_rank}d_with_indices",
              _module(**_pool, ceil_mode=True, return_indices=True), _shape,
              name="dilated_ceil_mixed_axes", min_opset=10)
pack.case("aten::max_pool1d_with_indices", nn.MaxPool1d(2, return_indices=True), (2, 3, 7))
pack.case("aten::max_pool2d_with_indices", nn.MaxPool2d(3, 2, padding=1, return_indices=True),
          (2, 3, 7, 6))
pack.case("aten::max_pool2d_with_indices", nn.MaxPool2d(3, 2, ceil_mode=True,
                                                      return_indices=True),
          (1, 2, 8, 8), name="ceil")
pack.case("aten::max_pool3d_with_indices", nn.MaxPool3d(2, return_indices=True), (1, 2, 4, 4, 4))
pack.case("aten::avg_pool1d", nn.AvgPool1d(3, 2, padding=1), (1, 2, 9))
pack.case("aten::avg_pool1d", nn.AvgPool1d(2, 2, padding=1, ceil_mode=True), (1, 2, 5),
          name="ceil_last_window_in_padding")
pack.case("aten::avg_pool2d", nn.AvgPool2d(2), (1, 2, 8, 8))
pack.case("aten::avg_pool2d", nn.AvgPool2d(3, 2, padding=1, count_include_pad=False),
          (1, 2, 7, 7), name="pad")
pack.case("aten::avg_pool2d", nn.AvgPool2d(3, 2, padding=1, ceil_mode=True), (1, 2, 8, 8),
          name="ceil")
pack.case("aten::avg_pool2d", nn.AvgPool2d(3, 2, padding=1, ceil_mode=True), (1, 2, 6, 7),
          name="ceil_partial_window")
pack.case("aten::avg_pool2d", nn.AvgPool2d(3, 2, ceil_mode=True), (2, 3, 8, 9),
          name="ceil_unpadded")
pack.case("aten::avg_pool2d", nn.AvgPool2d(3, 2, padding=1, ceil_mode=True,
                                           count_include_pad=False), (1, 2, 6, 7),
          name="ceil_partial_window_pad_not_counted")
pack.case("aten::avg_pool2d", nn.AvgPool2d(2, 2, padding=1, ceil_mode=True,
                                           count_include_pad=False), (1, 2, 5, 5),
          name="ceil_last_window_in_padding")
pack.case("aten::avg_pool2d", nn.AvgPool2d(3, 1, padding=1, divisor_override=4), (1, 2, 5, 5),
          name="divisor_override")
pack.case("aten::avg_pool2d", nn.AvgPool2d(3, 2, padding=1), (1, 2, 9, 9), name="dynamic",
          **_DYNAMIC)
pack.case("aten::avg_pool3d", nn.AvgPool3d(2, padding=1, count_include_pad=False),
          (1, 2, 4, 3, 5))
pack.case("aten::adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(1), (2, 3, 7), name="global")
pack.case("aten::adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(4), (2, 3, 5), name="uniform")
pack.case("aten::adaptive_avg_pool2d", nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5), name="global")
pack.case("aten::adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((2, 3)), (1, 2, 6, 6),
          name="even")
pack.case("aten::adaptive_avg_pool2d", nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5),
          name="global_dynamic", **_DYNAMIC)
pack.case("aten::adaptive_avg_pool3d", nn.AdaptiveAvgPool3d((1, 2, 2)), (1, 2, 3, 4, 6))
pack.case("aten::adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((7, 7)), (1, 2, 1, 1),
          name="grow_single", min_opset=8)  # VGG's 7x7 pool after a 32x32 image
pack.case("aten::adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((3, 2)), (2, 2, 1, 4),
          name="grow_single_row", min_opset=8)
pack.case("aten::adaptive_max_pool1d", nn.AdaptiveMaxPool1d(3), (2, 3, 6))
pack.case("aten::adaptive_max_pool2d", nn.AdaptiveMaxPool2d(1), (2, 3, 5, 4), name="global")
pack.case("aten::adaptive_max_pool2d", nn.AdaptiveMaxPool2d((2, 2)), (1, 2, 6, 4), name="even")
pack.case("aten::adaptive_max_pool2d", nn.AdaptiveMaxPool2d(2, return_indices=True),
          (1, 2, 6, 4), name="indices", min_opset=8)
pack.case("aten::adaptive_max_pool2d", nn.AdaptiveMaxPool2d(1, return_indices=True),
          (1, 2, 3, 5), name="global_indices", min_opset=8)
pack.case("aten::adaptive_max_pool3d", nn.AdaptiveMaxPool3d(1), (1, 2, 3, 4, 5))
pack.case("aten::adaptive_max_pool2d", nn.AdaptiveMaxPool2d((2, 4)), (1, 2, 1, 1),
          name="grow_single", min_opset=8)


def _pool_unpool(dims: int, kernel: int, stride: int, size: list[int]):
    """Max pool then unpool; F.max_unpool*d traces only with an output_size of ints (in
    torch 2.13 its size check fails on traced sizes)."""
    pool = getattr(torch.nn.functional, f"max_pool{dims}d")
    unpool = getattr(torch.nn.functional, f"max_unpool{dims}d")
    return lambda x: unpool(*pool(x, kernel, stride, return_indices=True), kernel, stride,
                            output_size=size)


pack.case("aten::max_unpool2d", _pool_unpool(2, 2, 2, [6, 7]), (2, 3, 6, 7))
pack.case("aten::max_unpool2d", _pool_unpool(1, 3, 2, [8]), (2, 3, 8), name="1d_overlapping")
pack.case("aten::max_unpool2d", _pool_unpool(2, 2, 2, [4, 6]), (3, 4, 6), name="unbatched")
# Unbatched (C, *spatial) inputs pool with a batch axis of 1.
pack.case("aten::max_pool2d", nn.MaxPool2d(3, 2, ceil_mode=True), (2, 7, 7), name="unbatched")
pack.case("aten::max_pool1d", nn.MaxPool1d(2), (3, 6), name="unbatched")
pack.case("aten::max_pool2d_with_indices", nn.MaxPool2d(2, return_indices=True), (2, 4, 6),
          name="unbatched")
pack.case("aten::avg_pool1d", nn.AvgPool1d(3, 2, padding=1), (3, 7), name="unbatched")
pack.case("aten::avg_pool3d", nn.AvgPool3d(2), (2, 4, 4, 4), name="unbatched")
pack.case("aten::adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((1, 2)), (3, 4, 4),
          name="unbatched")
pack.case("aten::adaptive_max_pool1d", nn.AdaptiveMaxPool1d(1, return_indices=True), (3, 5),
          name="unbatched_indices", min_opset=8)
pack.case("aten::max_unpool3d", _pool_unpool(3, 2, 2, [4, 4, 5]), (1, 2, 4, 4, 5))
pack.case("aten::adaptive_avg_pool3d", nn.AdaptiveAvgPool3d((None, 2, None)), (1, 2, 3, 4, 6),
          name="none_keeps_size")
pack.case("aten::adaptive_max_pool3d", nn.AdaptiveMaxPool3d((2, None, 1)), (1, 2, 4, 3, 5),
          name="none_keeps_size")
