"""The ``quantized_decomposed`` ops PT2E quantization leaves in a graph (``torch.export``
of a model converted by ``convert_pt2e``, or calls of ``torch.ops.quantized_decomposed``).

A quantize is ``clamp(round(x / scale) + zero_point, quant_min, quant_max)`` stored in
``dtype``: ONNX QuantizeLinear (round half to even, saturating to the storage type) then,
where the range is narrower than the storage type, a Clip. A dequantize is
``(x - zero_point) * scale`` in float32 (or ``out_dtype``): DequantizeLinear. The per
channel forms take 1-D scales and zero points along ``axis`` (opset 13).

The test cases live in :mod:`oxport.opsets.cases.quantized_decomposed`.
"""

from __future__ import annotations

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.context import GraphContext
from oxport.ir import Value
from oxport.types import JitScalarType

pack = OpPack("oxport.quantized_decomposed", cases="oxport.opsets.cases.quantized_decomposed")

#: The first opset of each storage type QuantizeLinear makes.
_STORAGE_SINCE = {torch.uint8: 10, torch.int8: 10, torch.uint16: 21, torch.int16: 21}
#: The first opset whose QuantizeLinear takes ``axis`` (per channel) and whose Clip takes
#: integers.
_PER_AXIS = 13


def _storage(g: GraphContext, op: str, dtype: Value) -> torch.dtype:
    """The integer type ``dtype`` names, if QuantizeLinear makes it at this opset."""
    storage = JitScalarType(int(sh._get_const(dtype, "i", "dtype"))).dtype()
    since = _STORAGE_SINCE.get(storage)
    if since is None:
        sh._unimplemented(op, f"dtype={storage}: ONNX QuantizeLinear stores uint8 and int8 "
                              "(int16 and uint16 from opset 21); quantize into one of those")
    if g.opset < since:
        sh._onnx_opset_unsupported_detailed(op, g.opset, since, f"QuantizeLinear into {storage}")
    return storage


def _range(op: str, quant_min: Value, quant_max: Value, storage: torch.dtype
           ) -> tuple[int, int]:
    """``(quant_min, quant_max)``, checked to lie within ``storage``."""
    low = int(sh._get_const(quant_min, "i", "quant_min"))
    high = int(sh._get_const(quant_max, "i", "quant_max"))
    info = torch.iinfo(storage)
    if not info.min <= low <= high <= info.max:
        sh._unimplemented(op, f"(quant_min, quant_max) = ({low}, {high}) outside {storage}'s "
                              f"range ({info.min}, {info.max})")
    return low, high


def _parameters(g: GraphContext, scale: Value, zero_point: Value | None, storage: torch.dtype,
                per_axis: bool) -> tuple[Value, Value | None]:
    """Scale (float32) and zero point (``storage``; None where the op has none, which
    ONNX reads as 0): scalars per tensor, 1-D per axis."""
    shape = [-1] if per_axis else []
    scale = sh._reshape_helper(g, sh.cast_to(g, g.as_value(scale), torch.float32), shape)
    if zero_point is None or sh._is_none(zero_point):
        return scale, None
    zero_point = sh.cast_to(g, g.as_value(zero_point), storage)
    return scale, sh._reshape_helper(g, zero_point, shape)


def _axis(g: GraphContext, op: str, x: Value, axis: Value) -> int:
    if g.opset < _PER_AXIS:
        sh._onnx_opset_unsupported_detailed(op, g.opset, _PER_AXIS, "per-axis QuantizeLinear")
    axis = int(sh._get_const(axis, "i", "axis"))
    rank = sh._get_tensor_rank(x)
    return axis % rank if rank is not None else axis


def _quantize(g: GraphContext, op: str, x: Value, scale: Value, zero_point: Value,
              quant_min: Value, quant_max: Value, dtype: Value, axis: int | None) -> Value:
    storage = _storage(g, op, dtype)
    low, high = _range(op, quant_min, quant_max, storage)
    scale, zero_point = _parameters(g, scale, zero_point, storage, axis is not None)
    if x.type().dtype() != torch.float32:  # PyTorch quantizes half types as float32
        x = sh.cast_to(g, x, torch.float32)
    q = g.op("QuantizeLinear", x, scale, zero_point, axis_i=axis)
    info = torch.iinfo(storage)
    if (low, high) != (info.min, info.max):
        if g.opset < _PER_AXIS:
            sh._onnx_opset_unsupported_detailed(op, g.opset, _PER_AXIS,
                                                "a range narrower than its dtype needs a Clip "
                                                "of integers")
        q = g.op("Clip", q, g.constant(torch.tensor(low, dtype=storage)),
                 g.constant(torch.tensor(high, dtype=storage)))
    return q


def _dequantize(g: GraphContext, op: str, x: Value, scale: Value, zero_point: Value | None,
                dtype: Value, out_dtype: Value | None, axis: int | None) -> Value:
    storage = _storage(g, op, dtype)
    if x.type().dtype() not in (None, storage):
        sh._unimplemented(op, f"a {x.type().dtype()} input declared as {storage} (dtype=)")
    scale, zero_point = _parameters(g, scale, zero_point, storage, axis is not None)
    y = g.op("DequantizeLinear", x, scale, zero_point, axis_i=axis)
    target = None if out_dtype is None or sh._is_none(out_dtype) else \
        JitScalarType(int(sh._get_const(out_dtype, "i", "out_dtype"))).dtype()
    return sh.cast_to(g, y, target) if target not in (None, torch.float32) else y


@pack.symbolic("quantized_decomposed::quantize_per_tensor", since=10)
def quantize_per_tensor(g, input: Value, scale: Value, zero_point: Value, quant_min: Value,
                        quant_max: Value, dtype: Value) -> Value:
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor
    quantize_per_tensor.tensor(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor
    quantize_per_tensor.tensor2(Tensor input, Tensor scale, Tensor zero_point, Tensor quant_min, Tensor quant_max, ScalarType dtype) -> Tensor

    QuantizeLinear (and a Clip to a narrower range)."""
    return _quantize(g, "quantized_decomposed::quantize_per_tensor", input, scale, zero_point,
                     quant_min, quant_max, dtype, None)


@pack.symbolic("quantized_decomposed::dequantize_per_tensor", since=10)
def dequantize_per_tensor(g, input: Value, scale: Value, zero_point: Value, quant_min: Value,
                          quant_max: Value, dtype: Value, out_dtype: Value | None = None
                          ) -> Value:
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor
    dequantize_per_tensor.tensor(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor
    dequantize_per_tensor.tensor2(Tensor input, Tensor scale, Tensor zero_point, Tensor quant_min, Tensor quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor

    DequantizeLinear (and a Cast to ``out_dtype``)."""
    op = "quantized_decomposed::dequantize_per_tensor"
    _range(op, quant_min, quant_max, _storage(g, op, dtype))
    return _dequantize(g, op, input, scale, zero_point, dtype, out_dtype, None)


@pack.symbolic("quantized_decomposed::quantize_per_channel", since=13)
def quantize_per_channel(g, input: Value, scales: Value, zero_points: Value, axis: Value,
                         quant_min: Value, quant_max: Value, dtype: Value) -> Value:
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype) -> Tensor

    QuantizeLinear along ``axis`` (and a Clip to a narrower range)."""
    op = "quantized_decomposed::quantize_per_channel"
    return _quantize(g, op, input, scales, zero_points, quant_min, quant_max, dtype,
                     _axis(g, op, input, axis))


@pack.symbolic("quantized_decomposed::dequantize_per_channel", since=13)
def dequantize_per_channel(g, input: Value, scales: Value, zero_points: Value | None,
                           axis: Value, quant_min: Value, quant_max: Value, dtype: Value,
                           out_dtype: Value | None = None) -> Value:
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor

    DequantizeLinear along ``axis`` (and a Cast to ``out_dtype``)."""
    op = "quantized_decomposed::dequantize_per_channel"
    _range(op, quant_min, quant_max, _storage(g, op, dtype))
    return _dequantize(g, op, input, scales, zero_points, dtype, out_dtype,
                       _axis(g, op, input, axis))
