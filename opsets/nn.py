"""Neural-network layers: linear, convolution, dropout, softmax, embedding, losses."""

from __future__ import annotations

from typing import Any

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value
from oxport.opsets.common import scalar_as_vector
from oxport.opsets.signal import from_parts, is_complex, parts

pack = OpPack("oxport.nn", cases="oxport.opsets.cases.nn")


@pack.symbolic("aten::linear", since=7)
def linear(g, input: Value, weight: Value, bias: Value | None) -> Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor

    Gemm for 2-D inputs; MatMul (+ Add) otherwise."""
    if input.type().dim() == 2 and not sh._is_none(bias):
        return g.op("Gemm", input, weight, bias, transB_i=1)
    out = g.op("MatMul", input, g.op("Transpose", weight, perm_i=[1, 0]))
    return out if sh._is_none(bias) else g.op("Add", out, bias)


@pack.symbolic("aten::matmul", since=7)
def matmul(g, self: Value, other: Value) -> Value:
    """matmul(Tensor self, Tensor other) -> Tensor"""
    return g.op("MatMul", self, other)


@pack.symbolic("aten::addmm", since=7)
@sh.parse_args("v", "v", "v", "f", "f")
def addmm(g, self: Value, mat1: Value, mat2: Value, beta: float = 1.0,
          alpha: float = 1.0) -> Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor
    addmm.dtype(Tensor self, Tensor mat1, Tensor mat2, ScalarType out_dtype, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    ``beta * self + alpha * mat1 @ mat2`` as one Gemm."""
    return g.op("Gemm", mat1, mat2, self, beta_f=beta, alpha_f=alpha)


def _conv(g, input: Value, weight: Value, bias: Value | None, stride: list[int],
          padding: list[int] | str, dilation: list[int], groups: int) -> Value:
    """Conv; ``padding`` may be PyTorch's 'same' or 'valid'."""
    kernel = weight.type().sizes()[2:]
    stride, dilation = _per_dim(stride, kernel), _per_dim(dilation, kernel)
    if padding == "valid":
        pads = [0] * (2 * len(kernel))
    elif padding == "same":
        # PyTorch puts the odd element of an uneven total padding at the end.
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        pads = [t // 2 for t in totals] + [t - t // 2 for t in totals]
    else:
        padding = _per_dim(padding, kernel)
        pads = padding + padding
    args = [input, weight] if sh._is_none(bias) else [input, weight, bias]
    return g.op("Conv", *args, kernel_shape_i=kernel, strides_i=stride, pads_i=pads,
                dilations_i=dilation, group_i=groups)


def _per_dim(values: list[int], kernel: list[int]) -> list[int]:
    return values * len(kernel) if len(values) == 1 else values


def _conv_transpose(g, input: Value, weight: Value, bias: Value | None, stride: list[int],
                    padding: list[int], output_padding: list[int], groups: int,
                    dilation: list[int]) -> Value:
    kernel = weight.type().sizes()[2:]
    padding = _per_dim(padding, kernel)
    args = [input, weight] if sh._is_none(bias) else [input, weight, bias]
    return g.op("ConvTranspose", *args, kernel_shape_i=kernel, strides_i=_per_dim(stride, kernel),
                pads_i=padding + padding, dilations_i=_per_dim(dilation, kernel), group_i=groups,
                output_padding_i=_per_dim(output_padding, kernel))


@pack.symbolic("aten::_convolution", since=7)
@sh.parse_args("v", "v", "v", "is", "is", "is", "i", "is", "i", "none", "none", "none", "none")
def _convolution(g, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups, *_):
    """_convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool benchmark, bool deterministic, bool cudnn_enabled, bool allow_tf32) -> Tensor
    _convolution.deprecated(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, int[] output_padding, SymInt groups, bool benchmark, bool deterministic, bool cudnn_enabled) -> Tensor

    Conv, or ConvTranspose when ``transposed``."""
    return _conv_or_transpose(g, input, weight, bias, stride, padding, dilation, transposed,
                              output_padding, groups)


def _conv_or_transpose(g, input, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups):
    if transposed:
        return _conv_transpose(g, input, weight, bias, stride, padding, output_padding, groups,
                               dilation)
    return _conv(g, input, weight, bias, stride, padding, dilation, groups)


@pack.symbolic("aten::convolution", since=7)
@sh.parse_args("v", "v", "v", "is", "is", "is", "i", "is", "i")
def convolution(g, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor

    ``aten::convolution`` (scripted code, torch.export): ``_convolution`` without its
    backend flags."""
    return _conv_or_transpose(g, input, weight, bias, stride, padding, dilation, transposed,
                              output_padding, groups)


@pack.symbolic("aten::conv_tbc", since=7)
@sh.parse_args("v", "v", "v", "i")
def conv_tbc(g, input, weight, bias, pad):
    """conv_tbc(Tensor self, Tensor weight, Tensor bias, int pad=0) -> Tensor

    Time-batch-channel Conv1d: input (T, B, C) and weight (k, C, out) transposed around a
    Conv."""
    kernel = weight.type().sizes()[0]
    conv = g.op("Conv", g.op("Transpose", input, perm_i=[1, 2, 0]),
                g.op("Transpose", weight, perm_i=[2, 1, 0]), bias, kernel_shape_i=[kernel],
                pads_i=[pad, pad])
    return g.op("Transpose", conv, perm_i=[2, 0, 1])


@pack.symbolic("aten::_convolution_mode", since=7)
@sh.parse_args("v", "v", "v", "is", "s", "is", "i")
def _convolution_mode(g, input, weight, bias, stride, padding, dilation, groups):
    """_convolution_mode(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, str padding, SymInt[] dilation, SymInt groups) -> Tensor

    Conv with padding='same' or 'valid'."""
    return _conv(g, input, weight, bias, stride, padding, dilation, groups)


def _complex_conv(g, input: Value, weight: Value, bias: Value | None, *options: Any) -> Value:
    """A convolution with a complex input, weight or bias (as pairs): the real convolutions
    of the parts, ``(a + bi) * (c + di) = (ac - bd) + (ad + bc)i``, the bias's parts added
    to theirs."""
    a, b = parts(g, input, is_complex(g, 0))
    c, d = parts(g, weight, is_complex(g, 1))
    bias = None if sh._is_none(bias) else bias
    bias_real, bias_imag = parts(g, bias, is_complex(g, 2)) if bias is not None else (None, None)

    def term(x: Value | None, w: Value | None) -> Value | None:
        return None if x is None or w is None else _conv(g, x, w, None, *options)

    def combined(first: Value | None, second: Value | None, subtract: bool,
                 offset: Value | None) -> Value:
        total = first if second is None else second if first is None else \
            g.op("Sub" if subtract else "Add", first, second)
        if total is None:  # a real input and weight: only a complex bias's part
            total = g.op("Mul", _conv(g, a, c, None, *options),
                         g.constant(torch.tensor(0, dtype=a.type().dtype())))
        if offset is not None:
            rank = sh._get_tensor_rank(total) or len(options[0]) + 2
            total = g.op("Add", total, sh._unsqueeze_helper(g, offset, list(range(1, rank - 1))))
        return total

    real = combined(term(a, c), term(b, d), True, bias_real)
    imag = combined(term(a, d), term(b, c), False, bias_imag)
    return from_parts(g, real, imag)


def _conv_nd(name: str):
    @sh.parse_args("v", "v", "v", "is", "none", "is", "i")
    def conv(g, input, weight, bias, stride, padding, dilation, groups):
        named = padding.const if padding.is_const and isinstance(padding.const, str) else None
        pads = named or sh._get_const(padding, "is", "padding")
        if any(is_complex(g, i) for i in range(3)):
            return _complex_conv(g, input, weight, bias, stride, pads, dilation, groups)
        return _conv(g, input, weight, bias, stride, pads, dilation, groups)
    conv.__name__ = name
    n = int(name[-2])
    conv.__doc__ = (f"{name}(Tensor input, Tensor weight, Tensor? bias=None, "
                    f"SymInt[{n}] stride={[1] * n}, SymInt[{n}] padding={[0] * n}, "
                    f"SymInt[{n}] dilation={[1] * n}, SymInt groups=1) -> Tensor\n"
                    f"{name}.padding(..., str padding=\"valid\", ...) -> Tensor\n\n"
                    "Conv (scripted code calls it; traces record ``_convolution``); complex "
                    "tensors as real convolutions of their parts.")
    return conv


def _conv_transpose_nd(name: str):
    @sh.parse_args("v", "v", "v", "is", "is", "is", "i", "is")
    def conv_transpose(g, input, weight, bias, stride, padding, output_padding, groups,
                       dilation):
        return _conv_transpose(g, input, weight, bias, stride, padding, output_padding, groups,
                               dilation)
    conv_transpose.__name__ = name
    n = int(name[-2])
    conv_transpose.__doc__ = (
        f"{name}{'.input' if n > 1 else ''}(Tensor input, Tensor weight, Tensor? bias=None, "
        f"SymInt[{n}] stride={[1] * n}, SymInt[{n}] padding={[0] * n}, "
        f"SymInt[{n}] output_padding={[0] * n}, SymInt groups=1, "
        f"SymInt[{n}] dilation={[1] * n}) -> Tensor\n\n"
        "ConvTranspose (scripted code calls it; traces record ``_convolution``).")
    return conv_transpose


for _rank in (1, 2, 3):
    pack.symbolic(f"aten::conv{_rank}d", since=7, accepts_complex=True)(
        _conv_nd(f"conv{_rank}d"))
    pack.symbolic(f"aten::conv_transpose{_rank}d", since=7)(
        _conv_transpose_nd(f"conv_transpose{_rank}d"))


@pack.symbolic("aten::dropout", since=7)
@sh.parse_args("v", "f", "b")
def dropout(g, input, p, train):
    """dropout(Tensor input, float p, bool train) -> Tensor
    dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)

    Identity in eval mode; a Dropout node with its ratio when training."""
    if not train or p == 0:
        return input
    if g.opset < 12:
        sh._onnx_opset_unsupported("dropout in training mode", g.opset, 12)
    out, _mask = g.op("Dropout", input, g.constant(torch.tensor(p, dtype=torch.float32)),
                      g.constant(torch.tensor(True)), outputs=2)
    return out


pack.alias(dropout, "aten::dropout_", since=7)


@pack.symbolic("aten::native_dropout", since=7)
def native_dropout(g, input: Value, p: Value, train: Value) -> tuple[Value, Value]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)

    ``(output, keep mask)``: the input and an all-True mask in eval mode, a Dropout node
    with its mask when training (``train=None`` trains, as in ATen)."""
    ratio = sh._get_const(p, "f", "p")
    training = sh._is_none(train) or sh._get_const(train, "b", "train")
    if training and ratio:
        if g.opset < 12:
            sh._onnx_opset_unsupported("native_dropout in training mode", g.opset, 12)
        return g.op("Dropout", input, g.constant(torch.tensor(ratio, dtype=torch.float32)),
                    g.constant(torch.tensor(True)), outputs=2)
    keep = g.op("ConstantOfShape", g.op("Shape", input), value_t=torch.tensor([True]))
    return input, keep


@pack.symbolic("aten::feature_dropout", since=7)
@sh.parse_args("v", "f", "b")
def feature_dropout(g, input, p, train):
    """feature_dropout(Tensor input, float p, bool train) -> Tensor
    alpha_dropout(Tensor input, float p, bool train) -> Tensor
    feature_alpha_dropout(Tensor input, float p, bool train) -> Tensor
    alpha_dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)
    feature_alpha_dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)
    feature_dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)

    Identity in eval mode (dropout variants whose training mode ONNX cannot express)."""
    if train and p:
        kind = g.original_node.kind() if g.original_node is not None else "dropout"
        sh._unimplemented(kind, "training mode: ONNX Dropout drops elements, not whole "
                                "channels, and has no alpha dropout")
    return input


pack.alias(feature_dropout, "aten::feature_dropout_", "aten::alpha_dropout",
           "aten::alpha_dropout_", "aten::feature_alpha_dropout",
           "aten::feature_alpha_dropout_", since=7)


def _softmax_family(op_type: str, name: str):
    @sh.parse_args("v", "i", "none")
    def symbolic(g, input, dim, dtype=None):
        if not sh._is_none(dtype):
            input = sh.cast_to(g, input, _dtype_of(dtype))
        rank = input.type().dim()
        if g.opset >= 13 or (rank is not None and dim in (-1, rank - 1)):
            return g.op(op_type, input, axis_i=dim)
        if rank is None:
            sh._unimplemented(f"aten::{name}", "a non-last dim on an input of unknown rank")
        perm = list(range(rank))
        perm[dim], perm[-1] = perm[-1], perm[dim]
        moved = g.op("Transpose", input, perm_i=perm)
        return g.op("Transpose", g.op(op_type, moved, axis_i=-1), perm_i=perm)
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor\n\n"
                        f"{op_type} over ``dim`` (before opset 13, which takes one axis, a "
                        "dim that is not the last is transposed last and back).")
    return symbolic


def _dtype_of(dtype_value: Value) -> torch.dtype:
    from oxport.types import JitScalarType
    return JitScalarType(sh._maybe_get_const(dtype_value, "i")).dtype()


pack.symbolic("aten::softmax", since=7)(scalar_as_vector(_softmax_family("Softmax", "softmax")))
pack.symbolic("aten::log_softmax", since=7)(
    scalar_as_vector(_softmax_family("LogSoftmax", "log_softmax")))
_log_softmax_of = scalar_as_vector(_softmax_family("LogSoftmax", "_log_softmax"))


@pack.symbolic("aten::_log_softmax", since=7)
def _log_softmax(g, input: Value, dim: Value, half_to_float: Value) -> Value:
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor

    ``log_softmax`` as ATen calls it (``half_to_float`` is a CUDA-only path)."""
    if sh._get_const(half_to_float, "b", "half_to_float"):
        sh._unimplemented("aten::_log_softmax", "half_to_float=True (CUDA only in PyTorch)")
    return _log_softmax_of(g, input, dim)


# -- embedding --------------------------------------------------------------------------
@pack.symbolic("aten::embedding", since=7)
def embedding(g, weight: Value, indices: Value, *_: Value) -> Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor

    Gather rows (padding_idx, scale_grad_by_freq and sparse only affect gradients)."""
    return g.op("Gather", weight, indices, axis_i=0)


def _renormed(g, self: Value, max_norm: float, norm_type: float, hit: Value) -> Value:
    """``self`` with the rows ``hit`` (a (rows, 1) bool mask) marks whose p-norm exceeds
    ``max_norm`` scaled to ``max_norm / (norm + 1e-7)``."""
    dtype = self.type().dtype() or torch.float32
    norms = g.run_symbolic("aten::linalg_vector_norm", self, norm_type, [1], True, None,
                           type_=Type.tensor(dtype, [None, 1]))
    limit = g.constant(torch.tensor(max_norm, dtype=dtype))
    too_long = g.op("And", hit, g.op("Greater", norms, limit))
    scale = g.op("Div", limit, g.op("Add", norms, g.constant(torch.tensor(1e-7, dtype=dtype))))
    return g.op("Where", too_long, g.op("Mul", self, scale), self)


def _flat_indices(g, self: Value, indices: Value) -> Value:
    """``indices`` as one int64 vector (for a 2-D weight ``self``)."""
    if sh._get_tensor_rank(self) != 2:
        sh._unimplemented("aten::embedding_renorm_", "a weight that is not 2-D")
    return sh._reshape_helper(g, sh.cast_to(g, indices, torch.int64), [-1])


@pack.symbolic("aten::embedding_renorm_", since=9)
@sh.parse_args("v", "v", "f", "f")
def embedding_renorm_(g, self, indices, max_norm, norm_type):
    """embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm, float norm_type) -> Tensor(a!)

    The rows ``indices`` name whose p-norm exceeds ``max_norm`` scaled to
    ``max_norm / (norm + 1e-7)``; returns the whole new weight, which the walker writes
    through to what ``self`` views (F.embedding passes ``weight.detach()``). The rows named
    are found by comparing every index with every row number (a static row count)."""
    flat = _flat_indices(g, self, indices)
    rows = sh._get_tensor_dim_size(self, 0)
    if rows is None:
        sh._onnx_opset_unsupported_detailed("aten::embedding_renorm_", g.opset, 11,
                                            "a weight whose row count is not static")
    g.uses_traced_size(self, 0, "aten::embedding_renorm_'s row numbers")
    matches = g.op("Equal", sh._unsqueeze_helper(g, flat, [0]),
                   g.constant(torch.arange(rows).unsqueeze(1)))
    named = g.op("ReduceMax", sh.cast_to(g, matches, torch.float32), axes_i=[1], keepdims_i=1)
    return _renormed(g, self, max_norm, norm_type, sh.cast_to(g, named, torch.bool))


@pack.symbolic("aten::embedding_renorm_", since=11)
@sh.parse_args("v", "v", "f", "f")
def embedding_renorm_11(g, self, indices, max_norm, norm_type):
    """embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm, float norm_type) -> Tensor(a!)

    As from opset 9, the rows named marked by scattering ones (ScatterElements): linear
    in the rows and indices, where comparing every pair is their product."""
    flat = _flat_indices(g, self, indices)
    rows = sh._slice_helper(g, g.op("Shape", self), [0], [0], [1])
    hit = g.op("ScatterElements",
               g.op("ConstantOfShape", rows, value_t=torch.tensor([0], dtype=torch.int64)), flat,
               g.op("ConstantOfShape", g.op("Shape", flat),
                    value_t=torch.tensor([1], dtype=torch.int64)), axis_i=0)
    return _renormed(g, self, max_norm, norm_type, sh._unsqueeze_helper(g, sh.cast_to(
        g, hit.setType(Type.tensor(torch.int64, [None])), torch.bool), [1]))


_BAG_SUM, _BAG_MEAN, _BAG_MAX = 0, 1, 2


def _positions(g, x: Value) -> Value:
    """``arange(len(x))`` for a 1-D ``x``: a constant when its length is static (before
    opset 11 it must be), else a Range."""
    length = x.type().varyingSizes()
    if length is not None and length[0] is not None:
        return g.constant(torch.arange(length[0]))
    if g.opset < 11:
        sh._onnx_opset_unsupported_detailed(g.original_node.kind(), g.opset, 11,
                                            "indices or offsets of a length known at run time")
    return g.op("Range", g.constant(torch.tensor(0)), g.op("Size", x), g.constant(torch.tensor(1)))


@pack.symbolic("aten::embedding_bag", since=9)
@sh.parse_args("v", "v", "v", "b", "i", "b", "v", "b", "none")
def embedding_bag(g, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                  per_sample_weights, include_last_offset, padding_idx=None):
    """embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False) -> (Tensor, Tensor, Tensor, Tensor)
    embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights, bool include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor, Tensor)

    Sum, mean or max over bags, with a one-hot (bags x positions) membership matrix
    (static lengths before opset 11); indices past ``include_last_offset``'s last offset
    are in no bag."""
    if sh._get_tensor_rank(indices) != 1:
        sh._unimplemented("aten::embedding_bag", "indices that are not 1-D")
    dtype = weight.type().dtype() or torch.float32
    rows = g.op("Gather", weight, indices, axis_i=0)
    if not sh._is_none(per_sample_weights):
        rows = g.op("Mul", rows, sh._unsqueeze_helper(g, per_sample_weights, [1]))
    one = g.constant(torch.tensor(1))
    positions = _positions(g, indices)
    # With include_last_offset the last offset ends the last bag: the positions from it on
    # fall in a bag past the last, which no bag matches.
    started = g.op("Not", g.op("Less", sh._unsqueeze_helper(g, positions, [1]),
                               sh._unsqueeze_helper(g, offsets, [0])))
    bag_of = g.op("Sub", sh._reducesum_helper(
        g, sh.cast_to(g, started.setType(Type.tensor(torch.bool)), torch.int64), [1],
        keepdims_i=0), one)
    bags = _positions(g, offsets)
    if include_last_offset:
        bags = sh._slice_helper(g, bags, [0], [0], [-1])
    member = g.op("Equal", sh._unsqueeze_helper(g, bags, [1]), sh._unsqueeze_helper(g, bag_of, [0]))
    pad = sh._maybe_get_const(padding_idx, "i") if padding_idx is not None else None
    if isinstance(pad, int) and pad >= 0:
        member = g.op("And", member, g.op("Not", g.op("Equal", sh._unsqueeze_helper(
            g, indices, [0]), g.constant(torch.tensor(pad, dtype=torch.int64)))))
    weights = sh.cast_to(g, member.setType(Type.tensor(torch.bool)), dtype)
    counts = sh._reducesum_helper(g, weights, [1])
    if mode == _BAG_MAX:
        filled = g.op("Where", sh._unsqueeze_helper(g, member, [2]),
                      sh._unsqueeze_helper(g, rows, [0]),
                      g.constant(torch.tensor(float("-inf"), dtype=dtype)))
        largest = sh.reduce_helper(g, "ReduceMax", filled, [1], keepdims_i=0)
        empty = g.op("Not", g.op("Greater", counts, g.constant(torch.tensor(0, dtype=dtype))))
        return g.op("Where", empty, g.constant(torch.tensor(0, dtype=dtype)), largest)
    total = g.op("MatMul", weights, rows)
    if mode == _BAG_MEAN:
        return g.op("Div", total, g.op("Max", counts, g.constant(torch.tensor(1, dtype=dtype))))
    return total


# -- other layers ---------------------------------------------------------------------
@pack.symbolic("aten::bilinear", since=7)
def bilinear(g, input1: Value, input2: Value, weight: Value, bias: Value | None) -> Value:
    """bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor

    ``x1 W x2 + b``: x1 @ W[(in1), (out*in2)], then a batched product with x2."""
    out_features, in1, in2 = weight.type().sizes()
    rank = sh._get_tensor_rank(input1)
    if rank is None:
        sh._unimplemented("aten::bilinear", "inputs of unknown rank")
    flat_weight = sh._reshape_helper(g, g.op("Transpose", weight, perm_i=[1, 0, 2]),
                                     [in1, out_features * in2])
    left = sh._reshape_helper(g, g.op("MatMul", input1, flat_weight),
                              [0] * (rank - 1) + [out_features, in2])
    out = sh._squeeze_helper(g, g.op("MatMul", left, sh._unsqueeze_helper(g, input2, [rank])),
                             [rank])
    return out if sh._is_none(bias) else g.op("Add", out, bias)


@pack.symbolic("aten::_weight_norm", since=7)
@sh.parse_args("v", "v", "i")
def _weight_norm(g, v, g_, dim):
    """_weight_norm(Tensor v, Tensor g, int dim=0) -> Tensor

    ``g * v / ||v||``, the norm over every dim but ``dim`` (all dims for dim=-1)."""
    rank = sh._get_tensor_rank(v)
    if rank is None:
        sh._unimplemented("aten::_weight_norm", "a weight of unknown rank")
    axes = [a for a in range(rank) if dim == -1 or a != dim % rank]
    norm = sh.reduce_helper(g, "ReduceL2", v, axes)
    return g.op("Mul", g.op("Div", v, norm), g_)


# -- losses --------------------------------------------------------------------------
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@pack.symbolic("aten::nll_loss", since=12)
@sh.parse_args("v", "v", "v", "i", "i")
def nll_loss(g, self, target, weight, reduction, ignore_index):
    """nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, SymInt ignore_index=-100) -> Tensor
    nll_loss2d(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, SymInt ignore_index=-100) -> Tensor
    nll_loss_nd(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, SymInt ignore_index=-100) -> Tensor

    NegativeLogLikelihoodLoss (any number of spatial dims)."""
    args = [self, target] if sh._is_none(weight) else [self, target, weight]
    return g.op("NegativeLogLikelihoodLoss", *args, reduction_s=_REDUCTIONS[reduction],
                ignore_index_i=ignore_index)


pack.alias(nll_loss, "aten::nll_loss_nd", "aten::nll_loss2d", since=12)


@pack.symbolic("aten::cross_entropy_loss", since=12)
@sh.parse_args("v", "v", "v", "i", "i", "f")
def cross_entropy_loss(g, self, target, weight, reduction, ignore_index, label_smoothing=0.0):
    """cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, SymInt ignore_index=-100, float label_smoothing=0.) -> Tensor

    SoftmaxCrossEntropyLoss for class-index targets (with ``label_smoothing``, mixed with
    the mean of ``-log p`` over the classes); ``-sum(t * log_softmax(x))`` for
    class-probability targets."""
    rank, classes = sh._get_tensor_rank(self), sh._get_tensor_dim_size(self, 1)
    probabilities = target.type().dtype() is not None and target.type().dtype().is_floating_point
    if (probabilities or label_smoothing) and (rank is None or rank < 2 or classes is None):
        sh._unimplemented("aten::cross_entropy_loss",
                          "smoothing or probability targets without a static (N, C, ...) input")
    weights = None  # (1, C, 1, ...) for the smoothing and probability terms
    if (probabilities or label_smoothing) and not sh._is_none(weight):
        weights = sh._reshape_helper(g, weight, [1, classes] + [1] * (rank - 2))
    if probabilities:
        return _cross_entropy_probabilities(g, self, target, weights, reduction,
                                            label_smoothing, classes)
    args = [self, target] if sh._is_none(weight) else [self, target, weight]
    if not label_smoothing:
        return g.op("SoftmaxCrossEntropyLoss", *args, reduction_s=_REDUCTIONS[reduction],
                    ignore_index_i=ignore_index)
    loss, log_prob = g.op("SoftmaxCrossEntropyLoss", *args, reduction_s=_REDUCTIONS[reduction],
                          ignore_index_i=ignore_index, outputs=2)
    dtype = self.type().dtype() or torch.float32
    smooth = g.op("Neg", sh._reducesum_helper(
        g, log_prob if weights is None else g.op("Mul", log_prob, weights), [1], keepdims_i=0))
    ignored = g.op("Equal", target, g.constant(torch.tensor(ignore_index, dtype=torch.int64)))
    zero = g.constant(torch.tensor(0, dtype=dtype))
    smooth = g.op("Where", ignored, zero, smooth)
    if reduction:
        smooth = sh._reducesum_helper(g, smooth, None, keepdims_i=0)
    if reduction == 1:  # PyTorch divides by the weight of the counted targets, as nll_loss
        counted = g.op("Not", ignored) if weights is None else g.op("Gather", weight, g.op(
            "Where", ignored, g.constant(torch.tensor(0, dtype=torch.int64)), target), axis_i=0)
        counted = g.op("Where", ignored, zero, sh.cast_to(
            g, counted.setType(Type.tensor(torch.bool if weights is None else dtype)), dtype))
        smooth = g.op("Div", smooth, sh._reducesum_helper(g, counted, None, keepdims_i=0))
    mixed = g.op("Mul", loss, g.constant(torch.tensor(1 - label_smoothing, dtype=dtype)))
    return g.op("Add", mixed, g.op("Mul", smooth, g.constant(torch.tensor(
        label_smoothing / classes, dtype=dtype))))


def _cross_entropy_probabilities(g, self: Value, target: Value, weights: Value | None,
                                 reduction: int, label_smoothing: float, classes: int) -> Value:
    dtype = self.type().dtype() or torch.float32
    log_prob = g.run_symbolic("aten::log_softmax", self, 1, None, type_=self.type())
    if label_smoothing:
        kept = g.op("Mul", target, g.constant(torch.tensor(1 - label_smoothing, dtype=dtype)))
        target = g.op("Add", kept, g.constant(torch.tensor(label_smoothing / classes,
                                                           dtype=dtype)))
    product = g.op("Mul", log_prob, target)
    if weights is not None:
        product = g.op("Mul", product, weights)
    loss = g.op("Neg", sh._reducesum_helper(g, product, [1], keepdims_i=0))
    if reduction:  # the mean is over every position but the classes
        loss = sh.reduce_helper(g, "ReduceMean" if reduction == 1 else "ReduceSum", loss, None,
                                keepdims_i=0)
    return loss
