"""Test cases of the ``oxport.quantized_decomposed`` pack: PT2E's quantize and dequantize
ops, called as ``torch.ops.quantized_decomposed.*`` (the ops register on import of
``torch.ao.quantization.fx._decomposed``)."""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # registers the ops

from oxport.opsets.quantized_decomposed import pack

_Q = torch.ops.quantized_decomposed
_SCALES = torch.tensor([0.05, 0.1, 0.2])
#: The input spans several times the quantized range, so quant_min/quant_max clamp.
_WIDE = (lambda: torch.randn(2, 3, 4) * 20,)


def _per_tensor(dtype: torch.dtype, low: int, high: int):
    def model(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = _Q.quantize_per_tensor(x, 0.1, 3, low, high, dtype)
        return q, _Q.dequantize_per_tensor(q, 0.1, 3, low, high, dtype)
    return model


def _per_tensor_tensors(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale, zero_point = torch.tensor(0.1), torch.tensor(-4)
    q = _Q.quantize_per_tensor.tensor(x, scale, zero_point, -128, 127, torch.int8)
    return q, _Q.dequantize_per_tensor.tensor(q, scale, zero_point, -128, 127, torch.int8,
                                              out_dtype=torch.float16)


def _per_tensor_range_tensors(x: torch.Tensor) -> torch.Tensor:
    scale, zero_point = torch.tensor(0.1), torch.tensor(5)
    low, high = torch.tensor(0), torch.tensor(100)
    q = _Q.quantize_per_tensor.tensor2(x, scale, zero_point, low, high, torch.uint8)
    return _Q.dequantize_per_tensor.tensor2(q, scale, zero_point, low, high, torch.uint8)


def _per_channel(dtype: torch.dtype, low: int, high: int, axis: int):
    zero_points = torch.tensor([0, 10, 20] if dtype == torch.uint8 else [0, 1, -1])

    def model(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = _Q.quantize_per_channel(x, _SCALES, zero_points, axis, low, high, dtype)
        return q, _Q.dequantize_per_channel(q, _SCALES, zero_points, axis, low, high, dtype)
    return model


def _per_channel_no_zero_points(x: torch.Tensor) -> torch.Tensor:
    q = _Q.quantize_per_channel(x, _SCALES, torch.zeros(3, dtype=torch.int64), 1, -128, 127,
                                torch.int8)
    return _Q.dequantize_per_channel(q, _SCALES, None, 1, -128, 127, torch.int8)


_BOTH_TENSOR = ["quantized_decomposed::quantize_per_tensor",
                "quantized_decomposed::dequantize_per_tensor"]
_BOTH_CHANNEL = ["quantized_decomposed::quantize_per_channel",
                 "quantized_decomposed::dequantize_per_channel"]
pack.case(_BOTH_TENSOR, _per_tensor(torch.uint8, 0, 255), *_WIDE, name="uint8")
pack.case(_BOTH_TENSOR, _per_tensor(torch.int8, -128, 127), *_WIDE, name="int8")
pack.case(_BOTH_TENSOR, _per_tensor(torch.int8, -20, 50), *_WIDE, name="clamped",
          min_opset=13)
pack.case(_BOTH_TENSOR, _per_tensor_tensors, *_WIDE, name="tensor_qparams", atol=1e-3)
pack.case(_BOTH_TENSOR, _per_tensor_range_tensors, *_WIDE, name="tensor_range",
          min_opset=13)
pack.case(_BOTH_CHANNEL, _per_channel(torch.int8, -128, 127, 1), *_WIDE, name="int8_axis1")
pack.case(_BOTH_CHANNEL, _per_channel(torch.uint8, 0, 255, -2), *_WIDE, name="uint8_axis-2")
pack.case(_BOTH_CHANNEL, _per_channel(torch.int8, -10, 10, 1), *_WIDE, name="clamped")
pack.case(_BOTH_CHANNEL, _per_channel(torch.uint8, 0, 255, 2),
          lambda: torch.randn(2, 4, 3) * 20, name="last_axis")
pack.case("quantized_decomposed::dequantize_per_channel", _per_channel_no_zero_points, *_WIDE,
          name="no_zero_points")
