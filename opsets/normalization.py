"""Normalization layers: batch, instance, layer, group and RMS norm.

Where a newer opset has one operator for what older opsets decompose
(LayerNormalization at 17, GroupNormalization at 21, RMSNormalization at 23),
the newer variant uses it. Decompositions of half-precision inputs compute in
float32, as PyTorch's kernels and the single ONNX operators (``stash_type``) do.
"""

from __future__ import annotations

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value

pack = OpPack("oxport.normalization", cases="oxport.opsets.cases.normalization")

_HALF = (torch.float16, torch.bfloat16)


def _dtype(value: Value) -> torch.dtype:
    return value.type().dtype() or torch.float32


def _filled(g, value: Value | None, shape: list[int], fill: float, dtype: torch.dtype,
            op: str) -> Value:
    """``value``, or a constant of ``shape`` filled with ``fill`` when it is None."""
    if not sh._is_none(value):
        return value
    if any(not isinstance(d, int) for d in shape):
        sh._unimplemented(op, "a missing weight or bias on an input whose normalized dims "
                              "are not static")
    return g.constant(torch.full(shape, fill, dtype=dtype))


def _channels(input: Value, op: str) -> int:
    channels = sh._get_tensor_dim_size(input, 1)
    if channels is None:
        sh._unimplemented(op, "the channel dimension (dim 1) must be static")
    return channels


def _rank(input: Value, op: str) -> int:
    rank = sh._get_tensor_rank(input)
    if rank is None:
        sh._unimplemented(op, "an input of unknown rank")
    return rank


def _upcast(g, input: Value) -> Value:
    """Half-precision inputs as float32 for a decomposition."""
    if _dtype(input) in _HALF:
        return sh.cast_to(g, input, torch.float32)
    return input


def _scalar(g, value: float, dtype: torch.dtype) -> Value:
    return g.constant(torch.tensor(value, dtype=dtype))


def _per_channel(g, param: Value, rank: int) -> Value:
    """A (C,) parameter shaped (C, 1, ..., 1) to broadcast over an (N, C, ...) input."""
    return sh._unsqueeze_helper(g, param, list(range(1, rank - 1))) if rank > 2 else param


# -- batch norm -------------------------------------------------------------------
@pack.symbolic("aten::batch_norm", since=7)
@sh.parse_args("v", "v", "v", "v", "v", "b", "f", "f", "none")
def batch_norm(g, input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled=None):
    """batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor

    BatchNormalization with running stats; decomposed with batch statistics.

    Batch statistics (training mode, or no running stats) are not exported as
    BatchNormalization(training_mode=1): ONNX Runtime 1.31 merges equal
    initializers, and when the scale equals the running variance (a fresh
    BatchNorm: ones) the in-place running-stat outputs corrupt the result.
    """
    if training:
        rank = _rank(input, "aten::batch_norm")
        axes = [0, *range(2, rank)]
        out, _, _ = _normalize(g, input, axes, eps)
        out = sh.cast_to(g, out, _dtype(input))
        if not sh._is_none(weight):
            out = g.op("Mul", out, _per_channel(g, weight, rank))
        if not sh._is_none(bias):
            out = g.op("Add", out, _per_channel(g, bias, rank))
        return out
    channels = _channels(input, "aten::batch_norm")
    dtype = _dtype(input)
    weight = _filled(g, weight, [channels], 1.0, dtype, "aten::batch_norm")
    bias = _filled(g, bias, [channels], 0.0, dtype, "aten::batch_norm")
    return g.op("BatchNormalization", input, weight, bias, running_mean, running_var,
                epsilon_f=eps, momentum_f=None if momentum is None else 1 - momentum)


@pack.symbolic("aten::_native_batch_norm_legit_no_training", since=7)
def native_batch_norm_legit_no_training(g, input, weight, bias, running_mean, running_var,
                                        momentum, eps):
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)

    Batch norm with running stats as torch.export's ATen IR writes it; the saved mean
    and inverse std outputs are empty there, and unused."""
    return batch_norm(g, input, weight, bias, running_mean, running_var, False, momentum, eps)


# -- instance norm ----------------------------------------------------------------
@pack.symbolic("aten::instance_norm", since=7)
@sh.parse_args("v", "v", "v", "v", "v", "b", "f", "f", "none")
def instance_norm(g, input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled=None):
    """instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor

    InstanceNormalization; BatchNormalization when running stats are used (eval, tracked)."""
    channels = _channels(input, "aten::instance_norm")
    dtype = _dtype(input)
    weight = _filled(g, weight, [channels], 1.0, dtype, "aten::instance_norm")
    bias = _filled(g, bias, [channels], 0.0, dtype, "aten::instance_norm")
    if use_input_stats:
        return g.op("InstanceNormalization", input, weight, bias, epsilon_f=eps)
    return g.op("BatchNormalization", input, weight, bias, running_mean, running_var,
                epsilon_f=eps)


# -- layer norm -------------------------------------------------------------------
def _normalize(g, input: Value, axes: list[int], eps: float,
                    center: bool = True) -> tuple[Value, Value, Value]:
    """(normalized, mean, 1/std) over ``axes``, computed in float32 for half inputs.

    ``center=False`` divides by the root mean square instead (RMS norm); the mean
    returned is then the input itself and unused.
    """
    x = _upcast(g, input)
    dtype = _dtype(x)
    mean = x
    if center:
        mean = sh.reduce_helper(g, "ReduceMean", x, axes)
        x = g.op("Sub", x, mean)
    var = sh.reduce_helper(g, "ReduceMean", g.op("Mul", x, x), axes)
    inv_std = g.op("Reciprocal", g.op("Sqrt", g.op("Add", var, _scalar(g, eps, dtype))))
    out = g.op("Mul", x, inv_std).setType(Type.tensor(dtype, input.type().shape))
    return out, mean, inv_std


def _affine(g, out: Value, weight: Value | None, bias: Value | None,
            dtype: torch.dtype) -> Value:
    """Back to the input's ``dtype``, then times ``weight`` plus ``bias`` (either may be None)."""
    out = sh.cast_to(g, out, dtype)
    if not sh._is_none(weight):
        out = g.op("Mul", out, weight)
    if not sh._is_none(bias):
        out = g.op("Add", out, bias)
    return out


def _norm_axes(g, input: Value, count: int, op: str) -> list[int]:
    """The last ``count`` axes; non-negative below opset 11 (where ONNX needs that)."""
    if g.opset >= 11:
        return list(range(-count, 0))
    rank = _rank(input, op)
    return list(range(rank - count, rank))


def _layer_norm_parts(g, input, normalized_shape, weight, bias, eps, op):
    axes = _norm_axes(g, input, len(normalized_shape), op)
    out, mean, inv_std = _normalize(g, input, axes, eps)
    return _affine(g, out, weight, bias, _dtype(input)), mean, inv_std


@pack.symbolic("aten::layer_norm", since=7)
@sh.parse_args("v", "is", "v", "v", "f", "none")
def layer_norm(g, input, normalized_shape, weight, bias, eps, cudnn_enable=None):
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1.0000000000000001e-05, bool cudnn_enable=True) -> Tensor

    ReduceMean-based decomposition (opsets 7-16)."""
    return _layer_norm_parts(g, input, normalized_shape, weight, bias, eps,
                             "aten::layer_norm")[0]


def _layer_normalization(g, input, normalized_shape, weight, bias, eps, outputs):
    weight = _filled(g, weight, normalized_shape, 1.0, _dtype(input), "aten::layer_norm")
    args = [input, weight] if sh._is_none(bias) else [input, weight, bias]
    return g.op("LayerNormalization", *args, axis_i=-len(normalized_shape), epsilon_f=eps,
                outputs=outputs)


@pack.symbolic("aten::layer_norm", since=17)
@sh.parse_args("v", "is", "v", "v", "f", "none")
def layer_norm_17(g, input, normalized_shape, weight, bias, eps, cudnn_enable=None):
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1.0000000000000001e-05, bool cudnn_enable=True) -> Tensor

    One LayerNormalization."""
    return _layer_normalization(g, input, normalized_shape, weight, bias, eps, 1)


@pack.symbolic("aten::native_layer_norm", since=7)
@sh.parse_args("v", "is", "v", "v", "f")
def native_layer_norm(g, input, normalized_shape, weight, bias, eps):
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)

    (output, mean, 1/std), decomposed."""
    out, mean, inv_std = _layer_norm_parts(g, input, normalized_shape, weight, bias, eps,
                                           "aten::native_layer_norm")
    return out, mean, inv_std


@pack.symbolic("aten::native_layer_norm", since=17)
@sh.parse_args("v", "is", "v", "v", "f")
def native_layer_norm_17(g, input, normalized_shape, weight, bias, eps):
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)

    LayerNormalization with its Mean and InvStdDev outputs."""
    return _layer_normalization(g, input, normalized_shape, weight, bias, eps, 3)


# -- group norm -------------------------------------------------------------------
@pack.symbolic("aten::group_norm", since=7)
@sh.parse_args("v", "i", "v", "v", "f", "none")
def group_norm(g, input, num_groups, weight, bias, eps, cudnn_enabled=None):
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1.0000000000000001e-05, bool cudnn_enabled=True) -> Tensor

    InstanceNormalization over (N, groups, -1), reshaped back, then the affine."""
    rank = _rank(input, "aten::group_norm")
    dtype = _dtype(input)
    grouped = sh._reshape_helper(g, input, [0, num_groups, -1])
    normalized = g.op("InstanceNormalization", grouped,
                      g.constant(torch.ones(num_groups, dtype=dtype)),
                      g.constant(torch.zeros(num_groups, dtype=dtype)), epsilon_f=eps)
    out = g.op("Reshape", normalized, g.op("Shape", input))
    if not sh._is_none(weight):
        out = g.op("Mul", out, _per_channel(g, weight, rank))
    if not sh._is_none(bias):
        out = g.op("Add", out, _per_channel(g, bias, rank))
    return out


@pack.symbolic("aten::group_norm", since=21)
@sh.parse_args("v", "i", "v", "v", "f", "none")
def group_norm_21(g, input, num_groups, weight, bias, eps, cudnn_enabled=None):
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1.0000000000000001e-05, bool cudnn_enabled=True) -> Tensor

    One GroupNormalization (per-channel scale and bias since opset 21)."""
    channels = _channels(input, "aten::group_norm")
    dtype = _dtype(input)
    weight = _filled(g, weight, [channels], 1.0, dtype, "aten::group_norm")
    bias = _filled(g, bias, [channels], 0.0, dtype, "aten::group_norm")
    return g.op("GroupNormalization", input, weight, bias, num_groups_i=num_groups,
                epsilon_f=eps)


# -- RMS norm ---------------------------------------------------------------------
def _rms_eps(input: Value, eps: float | None) -> float:
    return eps if eps is not None else torch.finfo(_dtype(input)).eps


@pack.symbolic("aten::rms_norm", since=7)
@sh.parse_args("v", "is", "v", "f")
def rms_norm(g, input, normalized_shape, weight, eps=None):
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor

    ``x / sqrt(mean(x^2) + eps) * weight``, decomposed (opsets 7-22)."""
    axes = _norm_axes(g, input, len(normalized_shape), "aten::rms_norm")
    out, _, _ = _normalize(g, input, axes, _rms_eps(input, eps), center=False)
    return _affine(g, out, weight, None, _dtype(input))


@pack.symbolic("aten::rms_norm", since=23)
@sh.parse_args("v", "is", "v", "f")
def rms_norm_23(g, input, normalized_shape, weight, eps=None):
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor

    One RMSNormalization."""
    weight = _filled(g, weight, normalized_shape, 1.0, _dtype(input), "aten::rms_norm")
    return g.op("RMSNormalization", input, weight, axis_i=-len(normalized_shape),
                epsilon_f=_rms_eps(input, eps))
