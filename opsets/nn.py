"""Neural-network layers: linear, convolution, dropout, softmax, embedding, losses."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value

pack = OpPack("oxport.nn")


@pack.symbolic("aten::linear", since=7)
def linear(g, input: Value, weight: Value, bias: Value | None) -> Value:
    """Gemm for 2-D inputs; MatMul (+ Add) otherwise."""
    if input.type().dim() == 2 and not sh._is_none(bias):
        return g.op("Gemm", input, weight, bias, transB_i=1)
    out = g.op("MatMul", input, g.op("Transpose", weight, perm_i=[1, 0]))
    return out if sh._is_none(bias) else g.op("Add", out, bias)


@pack.symbolic("aten::matmul", since=7)
def matmul(g, self: Value, other: Value) -> Value:
    return g.op("MatMul", self, other)


@pack.symbolic("aten::addmm", since=7)
@sh.parse_args("v", "v", "v", "f", "f")
def addmm(g, self: Value, mat1: Value, mat2: Value, beta: float = 1.0,
          alpha: float = 1.0) -> Value:
    """``beta * self + alpha * mat1 @ mat2`` as one Gemm."""
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
    """Conv, or ConvTranspose when ``transposed``."""
    if transposed:
        return _conv_transpose(g, input, weight, bias, stride, padding, output_padding, groups,
                               dilation)
    return _conv(g, input, weight, bias, stride, padding, dilation, groups)


@pack.symbolic("aten::_convolution_mode", since=7)
@sh.parse_args("v", "v", "v", "is", "s", "is", "i")
def _convolution_mode(g, input, weight, bias, stride, padding, dilation, groups):
    """Conv with padding='same' or 'valid'."""
    return _conv(g, input, weight, bias, stride, padding, dilation, groups)


def _conv_nd(name: str):
    @sh.parse_args("v", "v", "v", "is", "none", "is", "i")
    def conv(g, input, weight, bias, stride, padding, dilation, groups):
        named = padding.const if padding.is_const and isinstance(padding.const, str) else None
        return _conv(g, input, weight, bias, stride,
                     named or sh._get_const(padding, "is", "padding"), dilation, groups)
    conv.__name__ = name
    conv.__doc__ = f"``aten::{name}`` (scripted code) as Conv."
    return conv


def _conv_transpose_nd(name: str):
    @sh.parse_args("v", "v", "v", "is", "is", "is", "i", "is")
    def conv_transpose(g, input, weight, bias, stride, padding, output_padding, groups,
                       dilation):
        return _conv_transpose(g, input, weight, bias, stride, padding, output_padding, groups,
                               dilation)
    conv_transpose.__name__ = name
    conv_transpose.__doc__ = f"``aten::{name}`` (scripted code) as ConvTranspose."
    return conv_transpose


for _rank in (1, 2, 3):
    pack.symbolic(f"aten::conv{_rank}d", since=7)(_conv_nd(f"conv{_rank}d"))
    pack.symbolic(f"aten::conv_transpose{_rank}d", since=7)(
        _conv_transpose_nd(f"conv_transpose{_rank}d"))


@pack.symbolic("aten::dropout", since=7)
@sh.parse_args("v", "f", "b")
def dropout(g, input, p, train):
    """Identity in eval mode; a Dropout node with its ratio when training."""
    if not train or p == 0:
        return input
    if g.opset < 12:
        sh._onnx_opset_unsupported("dropout in training mode", g.opset, 12)
    out, _mask = g.op("Dropout", input, g.constant(torch.tensor(p, dtype=torch.float32)),
                      g.constant(torch.tensor(True)), outputs=2)
    return out


pack.alias(dropout, "aten::dropout_", since=7)


@pack.symbolic("aten::feature_dropout", since=7)
@sh.parse_args("v", "f", "b")
def feature_dropout(g, input, p, train):
    """Identity in eval mode (dropout variants whose training mode ONNX cannot express)."""
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
            input = sh._cast_to(g, input, _dtype_of(dtype))
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
    return symbolic


def _dtype_of(dtype_value: Value) -> torch.dtype:
    from oxport.types import JitScalarType
    return JitScalarType(sh._maybe_get_const(dtype_value, "i")).dtype()


pack.symbolic("aten::softmax", since=7)(_softmax_family("Softmax", "softmax"))
pack.symbolic("aten::log_softmax", since=7)(_softmax_family("LogSoftmax", "log_softmax"))


# -- embedding --------------------------------------------------------------------------
@pack.symbolic("aten::embedding", since=7)
def embedding(g, weight: Value, indices: Value, *_: Value) -> Value:
    """Gather rows (padding_idx, scale_grad_by_freq and sparse only affect gradients)."""
    return g.op("Gather", weight, indices, axis_i=0)


@pack.symbolic("aten::embedding_renorm_", since=11)
@sh.parse_args("v", "v", "f", "f")
def embedding_renorm_(g, self, indices, max_norm, norm_type):
    """The rows ``indices`` name whose p-norm exceeds ``max_norm`` scaled to
    ``max_norm / (norm + 1e-7)``; returns the whole new weight, which the walker writes
    through to what ``self`` views (F.embedding passes ``weight.detach()``)."""
    dtype = self.type().dtype() or torch.float32
    if sh._get_tensor_rank(self) != 2:
        sh._unimplemented("aten::embedding_renorm_", "a weight that is not 2-D")
    norms = sh._run_symbolic(g, "aten::linalg_vector_norm", self, norm_type, [1], True, None,
                             type_=Type.tensor(dtype, [None, 1]))
    flat = sh._reshape_helper(g, indices, [-1])
    rows = sh._slice_helper(g, g.op("Shape", self), [0], [0], [1])
    hit = g.op("ScatterElements",
               g.op("ConstantOfShape", rows, value_t=torch.tensor([0], dtype=torch.int64)), flat,
               g.op("ConstantOfShape", g.op("Shape", flat),
                    value_t=torch.tensor([1], dtype=torch.int64)), axis_i=0)
    limit = g.constant(torch.tensor(max_norm, dtype=dtype))
    too_long = g.op("And", sh._unsqueeze_helper(g, sh._cast_to(
        g, hit.setType(Type.tensor(torch.int64, [None])), torch.bool), [1]),
        g.op("Greater", norms, limit))
    scale = g.op("Div", limit, g.op("Add", norms, g.constant(torch.tensor(1e-7, dtype=dtype))))
    return g.op("Where", too_long, g.op("Mul", self, scale), self)


_BAG_SUM, _BAG_MEAN, _BAG_MAX = 0, 1, 2


@pack.symbolic("aten::embedding_bag", since=11)
@sh.parse_args("v", "v", "v", "b", "i", "b", "v", "b", "none")
def embedding_bag(g, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                  per_sample_weights, include_last_offset, padding_idx=None):
    """Sum, mean or max over bags, with a one-hot (bags x positions) membership matrix."""
    if sh._get_tensor_rank(indices) != 1:
        sh._unimplemented("aten::embedding_bag", "indices that are not 1-D")
    dtype = weight.type().dtype() or torch.float32
    rows = g.op("Gather", weight, indices, axis_i=0)
    if not sh._is_none(per_sample_weights):
        rows = g.op("Mul", rows, sh._unsqueeze_helper(g, per_sample_weights, [1]))
    starts = offsets
    if include_last_offset:
        starts = sh._slice_helper(g, offsets, [0], [0], [-1])
    zero, one = g.constant(torch.tensor(0)), g.constant(torch.tensor(1))
    positions = g.op("Range", zero, g.op("Size", indices), one)
    started = g.op("Not", g.op("Less", sh._unsqueeze_helper(g, positions, [1]),
                               sh._unsqueeze_helper(g, starts, [0])))
    bag_of = g.op("Sub", sh._reducesum_helper(
        g, sh._cast_to(g, started.setType(Type.tensor(torch.bool)), torch.int64), [1],
        keepdims_i=0), one)
    bags = g.op("Range", zero, g.op("Size", starts), one)
    member = g.op("Equal", sh._unsqueeze_helper(g, bags, [1]), sh._unsqueeze_helper(g, bag_of, [0]))
    pad = sh._maybe_get_const(padding_idx, "i") if padding_idx is not None else None
    if isinstance(pad, int) and pad >= 0:
        member = g.op("And", member, g.op("Not", g.op("Equal", sh._unsqueeze_helper(
            g, indices, [0]), g.constant(torch.tensor(pad, dtype=torch.int64)))))
    weights = sh._cast_to(g, member.setType(Type.tensor(torch.bool)), dtype)
    counts = sh._reducesum_helper(g, weights, [1])
    if mode == _BAG_MAX:
        filled = g.op("Where", sh._unsqueeze_helper(g, member, [2]),
                      sh._unsqueeze_helper(g, rows, [0]),
                      g.constant(torch.tensor(float("-inf"), dtype=dtype)))
        largest = sh._reduce_helper(g, "ReduceMax", filled, [1], keepdims_i=0)
        empty = g.op("Equal", counts, g.constant(torch.tensor(0, dtype=dtype)))
        return g.op("Where", empty, g.constant(torch.tensor(0, dtype=dtype)), largest)
    total = g.op("MatMul", weights, rows)
    if mode == _BAG_MEAN:
        return g.op("Div", total, g.op("Max", counts, g.constant(torch.tensor(1, dtype=dtype))))
    return total


# -- other layers ---------------------------------------------------------------------
@pack.symbolic("aten::bilinear", since=7)
def bilinear(g, input1: Value, input2: Value, weight: Value, bias: Value | None) -> Value:
    """``x1 W x2 + b``: x1 @ W[(in1), (out*in2)], then a batched product with x2."""
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
    """``g * v / ||v||``, the norm over every dim but ``dim`` (all dims for dim=-1)."""
    rank = sh._get_tensor_rank(v)
    if rank is None:
        sh._unimplemented("aten::_weight_norm", "a weight of unknown rank")
    axes = [a for a in range(rank) if dim == -1 or a != dim % rank]
    norm = sh._reduce_helper(g, "ReduceL2", v, axes)
    return g.op("Mul", g.op("Div", v, norm), g_)


# -- losses --------------------------------------------------------------------------
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@pack.symbolic("aten::nll_loss", since=12)
@sh.parse_args("v", "v", "v", "i", "i")
def nll_loss(g, self, target, weight, reduction, ignore_index):
    """NegativeLogLikelihoodLoss (any number of spatial dims)."""
    args = [self, target] if sh._is_none(weight) else [self, target, weight]
    return g.op("NegativeLogLikelihoodLoss", *args, reduction_s=_REDUCTIONS[reduction],
                ignore_index_i=ignore_index)


pack.alias(nll_loss, "aten::nll_loss_nd", "aten::nll_loss2d", since=12)


@pack.symbolic("aten::cross_entropy_loss", since=12)
@sh.parse_args("v", "v", "v", "i", "i", "f")
def cross_entropy_loss(g, self, target, weight, reduction, ignore_index, label_smoothing=0.0):
    """SoftmaxCrossEntropyLoss for class-index targets (with ``label_smoothing``, mixed with
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
        counted = g.op("Where", ignored, zero, sh._cast_to(
            g, counted.setType(Type.tensor(torch.bool if weights is None else dtype)), dtype))
        smooth = g.op("Div", smooth, sh._reducesum_helper(g, counted, None, keepdims_i=0))
    mixed = g.op("Mul", loss, g.constant(torch.tensor(1 - label_smoothing, dtype=dtype)))
    return g.op("Add", mixed, g.op("Mul", smooth, g.constant(torch.tensor(
        label_smoothing / classes, dtype=dtype))))


def _cross_entropy_probabilities(g, self: Value, target: Value, weights: Value | None,
                                 reduction: int, label_smoothing: float, classes: int) -> Value:
    dtype = self.type().dtype() or torch.float32
    log_prob = sh._run_symbolic(g, "aten::log_softmax", self, 1, None, type_=self.type())
    if label_smoothing:
        kept = g.op("Mul", target, g.constant(torch.tensor(1 - label_smoothing, dtype=dtype)))
        target = g.op("Add", kept, g.constant(torch.tensor(label_smoothing / classes,
                                                           dtype=dtype)))
    product = g.op("Mul", log_prob, target)
    if weights is not None:
        product = g.op("Mul", product, weights)
    loss = g.op("Neg", sh._reducesum_helper(g, product, [1], keepdims_i=0))
    if reduction:  # the mean is over every position but the classes
        loss = sh._reduce_helper(g, "ReduceMean" if reduction == 1 else "ReduceSum", loss, None,
                                 keepdims_i=0)
    return loss


class _Conv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


pack.case("aten::linear", torch.nn.Linear(4, 5), (3, 4), name="2d")
pack.case("aten::linear", torch.nn.Linear(4, 5, bias=False), (2, 3, 4), name="3d_nobias")
pack.case("aten::matmul", torch.matmul, (2, 3, 4), (4, 5))
pack.case("aten::addmm", lambda a, b, c: torch.addmm(a, b, c, beta=0.5, alpha=2), (5,), (3, 4),
          (4, 5))
pack.case("aten::_convolution", _Conv(), (1, 3, 8, 8), name="conv2d")
pack.case("aten::_convolution", torch.nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 5, 5),
          name="transposed")


def _conv1d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv1d(x, w, padding=1)


def _conv2d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, b, groups=2)


def _conv3d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv3d(x, w, stride=[2, 2, 2])


# Tracing records aten::_convolution; scripted code calls conv1d/2d/3d directly.
pack.case("aten::conv1d", _conv1d, (1, 2, 7), (4, 2, 3), script=True)
pack.case("aten::conv2d", _conv2d, (1, 4, 6, 6), (4, 2, 3, 3), (4,), script=True)
pack.case("aten::conv3d", _conv3d, (1, 2, 5, 5, 5), (3, 2, 3, 3, 3), script=True)
pack.case("aten::dropout", torch.nn.Dropout(0.3), (3, 4))
pack.case("aten::dropout_", torch.nn.Dropout(0.3, inplace=True), (3, 4))
pack.case("aten::feature_dropout", torch.nn.Dropout2d(0.3), (1, 3, 4, 4))
pack.case("aten::feature_dropout_", torch.nn.Dropout1d(0.3, inplace=True), (2, 3, 4))
pack.case("aten::alpha_dropout", torch.nn.AlphaDropout(0.3), (2, 3))
pack.case("aten::alpha_dropout_", lambda x: torch.alpha_dropout_(x, 0.3, False), (2, 3))
pack.case("aten::feature_alpha_dropout", torch.nn.FeatureAlphaDropout(0.3), (1, 2, 3, 3))
pack.case("aten::feature_alpha_dropout_",
          lambda x: torch.feature_alpha_dropout_(x, 0.3, False), (1, 2, 3, 3))
pack.case("aten::softmax", lambda x: torch.softmax(x, -1), (2, 3, 4), name="last")
pack.case("aten::softmax", lambda x: torch.softmax(x, 1), (2, 3, 4), name="middle")
pack.case("aten::log_softmax", lambda x: torch.log_softmax(x, 0), (2, 3, 4))


def _conv_same(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, padding="same", dilation=2)


def _conv_transpose1d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1)


def _conv_transpose2d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose2d(x, w, b, stride=[2, 1], groups=2)


def _conv_transpose3d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv_transpose3d(x, w, dilation=2)


pack.case("aten::conv2d", _conv_same, (1, 2, 6, 7), (3, 2, 2, 3), script=True, name="same")
pack.case("aten::conv_transpose1d", _conv_transpose1d, (1, 2, 5), (2, 3, 3), script=True)
pack.case("aten::conv_transpose2d", _conv_transpose2d, (1, 4, 3, 3), (4, 1, 2, 2), (2,),
          script=True)
pack.case("aten::conv_transpose3d", _conv_transpose3d, (1, 2, 3, 3, 3), (2, 1, 2, 2, 2),
          script=True)
pack.case("aten::_convolution_mode", torch.nn.Conv2d(2, 3, 4, padding="same"), (1, 2, 6, 5),
          name="same_even_kernel")
pack.case("aten::_convolution_mode", torch.nn.Conv1d(2, 3, 3, padding="valid"), (1, 2, 6),
          name="valid")


def _indices(high: int, *shape: int):
    return lambda: torch.randint(0, high, shape)


pack.case("aten::embedding", torch.nn.Embedding(10, 4), _indices(10, 2, 3))
pack.case("aten::embedding", torch.nn.Embedding(10, 4, padding_idx=0), _indices(10, 5),
          name="padding_idx")
# The weight is an input: eager renormalizes a module's weight in place before the export.
pack.case("aten::embedding_renorm_", lambda x, w: F.embedding(x, w, max_norm=1.0),
          _indices(10, 2, 5), (10, 4))
pack.case("aten::embedding_renorm_",  # the renormalized weight reused, as by a tied layer
          lambda x, w: F.embedding(x, w, max_norm=2.0, norm_type=1.0) @ w.t(),
          lambda: torch.tensor([[1, 3, 3, 9]]), (10, 4), name="reused_l1")
pack.case("aten::embedding_bag", torch.nn.EmbeddingBag(10, 3, mode="mean"), _indices(10, 6),
          lambda: torch.tensor([0, 4]), name="mean")
pack.case("aten::embedding_bag", torch.nn.EmbeddingBag(10, 3, mode="sum"),
          _indices(10, 7), lambda: torch.tensor([0, 2, 2, 5]), lambda: torch.rand(7),
          name="sum_weights_empty_bag")
pack.case("aten::embedding_bag", torch.nn.EmbeddingBag(10, 3, mode="max", padding_idx=1),
          lambda: torch.tensor([1, 4, 1, 3, 5, 1]), lambda: torch.tensor([0, 2, 3, 6]),
          name="max_padding_idx")
pack.case("aten::embedding_bag",
          torch.nn.EmbeddingBag(10, 3, mode="mean", include_last_offset=True, padding_idx=2),
          lambda: torch.tensor([2, 4, 2, 3, 5]), lambda: torch.tensor([0, 1, 3, 5]),
          name="mean_last_offset_padding_idx")
pack.case("aten::bilinear", torch.nn.Bilinear(3, 4, 5), (2, 3), (2, 4))
pack.case("aten::bilinear", torch.nn.Bilinear(3, 2, 4, bias=False), (2, 3, 3), (2, 3, 2),
          name="3d_no_bias")
pack.case("aten::_weight_norm", torch.nn.utils.parametrizations.weight_norm(
    torch.nn.Linear(3, 4)), (2, 3))
pack.case("aten::_weight_norm", torch.nn.utils.parametrizations.weight_norm(
    torch.nn.Conv1d(2, 3, 2), dim=None), (1, 2, 5), name="whole_tensor")
pack.case("aten::_weight_norm", torch.nn.utils.parametrizations.weight_norm(
    torch.nn.Conv2d(2, 3, 2), dim=1), (1, 2, 4, 4), name="dim1")


def _log_probs(*shape: int):
    return lambda: torch.log_softmax(torch.randn(*shape), 1)


pack.case("aten::nll_loss_nd", lambda x, t: F.nll_loss(x, t), _log_probs(4, 5), _indices(5, 4))
pack.case("aten::nll_loss_nd",
          lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=1, reduction="sum"),
          _log_probs(4, 5), _indices(5, 4), lambda: torch.rand(5), name="weight_ignore_sum")
pack.case("aten::nll_loss_nd", lambda x, t: F.nll_loss(x, t, reduction="none"),
          _log_probs(2, 3, 4, 2), _indices(3, 2, 4, 2), name="spatial_none")
pack.case("aten::nll_loss", lambda x, t: torch.ops.aten.nll_loss(x, t), _log_probs(3, 4),
          _indices(4, 3))
pack.case("aten::nll_loss2d", lambda x, t: torch.ops.aten.nll_loss2d(x, t, None, 2),
          _log_probs(2, 3, 2, 2), _indices(3, 2, 2, 2))
pack.case("aten::cross_entropy_loss", lambda x, t: F.cross_entropy(x, t), (4, 5),
          _indices(5, 4))
pack.case("aten::cross_entropy_loss",
          lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=0, reduction="none"),
          (2, 4, 3), _indices(4, 2, 3), lambda: torch.rand(4), name="spatial_weight_none")
for _reduction in ("mean", "sum", "none"):
    pack.case("aten::cross_entropy_loss",
              lambda x, t, w, r=_reduction: F.cross_entropy(x, t, weight=w, ignore_index=1,
                                                            label_smoothing=0.2, reduction=r),
              (4, 5, 3), _indices(5, 4, 3), lambda: torch.rand(5) + 0.1,
              name=f"smoothing_weight_ignore_{_reduction}")
    pack.case("aten::cross_entropy_loss",
              lambda x, t, r=_reduction: F.cross_entropy(x, t, label_smoothing=0.1, reduction=r),
              (4, 5), lambda: torch.rand(4, 5).softmax(1), name=f"probabilities_{_reduction}")
pack.case("aten::cross_entropy_loss", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.3),
          (4, 5), _indices(5, 4), name="smoothing")
pack.case("aten::cross_entropy_loss", lambda x, t, w: F.cross_entropy(x, t, weight=w),
          (2, 5, 3, 2), lambda: torch.rand(2, 5, 3, 2).softmax(1), lambda: torch.rand(5),
          name="probabilities_spatial_weight")
