"""Helpers the built-in packs share. This module defines no symbolic, so a pack that needs
one of these does not import (and validate) another pack's symbolics with it: the nn pack's
import used to pull in the shape, sequence and signal packs' modules, and the activations
pack's the elementwise one's, on every first export that met a convolution or a ReLU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from oxport import symbolic_helper as sh
from oxport.ir import Value
from oxport.passes.infer import infer_value, needs_inference


def scalar(g, value: Any, dtype: torch.dtype | None) -> Value:
    """A 0-d constant of ``dtype`` (float32 when unknown)."""
    return g.constant(torch.tensor(value, dtype=dtype or torch.float32))


def is_int(dtype: torch.dtype | None) -> bool:
    """An integer dtype (bool excluded)."""
    return dtype is not None and not dtype.is_floating_point and dtype != torch.bool


def promote(g, op: str, *operands: Any) -> tuple[list[Value], torch.dtype | None]:
    """``operands`` cast to the dtype the ``op`` node computes in, and that dtype."""
    dtype = sh.traced_dtype(g, op) or sh.result_dtype(*operands)
    values = sh.promote(g, *operands) if dtype is None else [
        sh.cast_to(g, v, dtype) if isinstance(v, Value) else scalar(g, v, dtype)
        for v in operands]
    return values, dtype


def float_input(g, op: str, x: Value) -> Value:
    """``x`` in the floating dtype of the ``op`` node's output (ints become float32)."""
    dtype = sh.traced_dtype(g, op)
    if dtype is None or not dtype.is_floating_point:
        dtype = x.type().dtype()
        if dtype is None or dtype.is_floating_point:
            return x
        dtype = torch.float32
    return sh.cast_to(g, x, dtype)


def _scalar_const(value: Value) -> bool:
    """A constant Python number or 0-d tensor."""
    const = value.const if value.is_const else None
    return isinstance(const, (int, float)) or (isinstance(const, torch.Tensor) and const.dim() == 0)


def clamp_values(g, op: str, self: Value, low: Any, high: Any) -> Value:
    """``self`` limited to ``[low, high]``; either bound may be None, a number or a tensor."""
    bounds = [None if sh._is_none(b) else b for b in (low, high)]
    given = [b for b in bounds if b is not None]
    if not given:
        return self
    values, dtype = promote(g, op, self, *given)
    rest = iter(values[1:])
    x, (lo, hi) = values[0], [next(rest) if b is not None else None for b in bounds]
    present = [b for b in (lo, hi) if b is not None]
    integer = is_int(dtype)
    if all(_scalar_const(b) for b in present):
        if not integer and g.opset < 11:
            attrs = {"min_f": float(lo.const) if lo is not None else None,
                     "max_f": float(hi.const) if hi is not None else None}
            return g.op("Clip", x, **attrs)
        if (not integer and g.opset >= 11) or (integer and g.opset >= 12):
            return g.op("Clip", x, lo, hi)
    if g.opset < 8:
        sh._onnx_opset_unsupported_detailed(
            op, g.opset, 8, "tensor or integer bounds need Max/Min with broadcasting")

    def limit(v: Value, lo: Value | None, hi: Value | None) -> Value:
        if lo is not None:
            v = g.op("Max", v, lo)
        return v if hi is None else g.op("Min", v, hi)

    if integer and g.opset < 12:
        doubles = [sh.cast_to(g, v, torch.float64) if v is not None else None
                   for v in (x, lo, hi)]
        return sh.cast_to(g, limit(*doubles), dtype)
    return limit(x, lo, hi)


def scalar_as_vector(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Serve a 0-d first input (torch takes dim 0 or -1 on a scalar; ONNX ops with an axis
    want rank >= 1): run ``fn`` on it reshaped to ``[1]``, then squeeze back to 0-d each
    output the trace recorded as 0-d (scripted code records no rank: torch's result on a
    scalar is one, ``keepdim`` or not)."""
    @functools.wraps(fn)
    def symbolic(g, self: Value, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(self, Value) or self.type().dim() != 0:
            return fn(g, self, *args, **kwargs)
        vector = sh._unsqueeze_helper(g, self, [0]).setType(self.type().with_sizes([1]))
        out = fn(g, vector, *args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        node = g.original_node
        scalars = [node is None or i >= node.outputsSize() or node.outputsAt(i).type().kind()
                   != "TensorType" or node.outputsAt(i).type().dim() in (0, None)
                   for i in range(len(outs))]
        fixed = tuple(_squeezed_to_scalar(g, v) if scalar else v
                      for v, scalar in zip(outs, scalars))
        return fixed if isinstance(out, tuple) else fixed[0]
    return symbolic


def _squeezed_to_scalar(g, value: Value) -> Value:
    """``value`` (from a ``[1]`` input: rank 1 or already 0) as a 0-d tensor."""
    if needs_inference(value):
        infer_value(value, g.opset)
    if value.type().dim() == 0:
        return value
    return sh._squeeze_helper(g, value, [0]).setType(value.type().with_sizes([]))
