"""Neural-network layers: linear, convolution, dropout, softmax, embedding, losses."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Value

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
          padding: list[int], dilation: list[int], groups: int) -> Value:
    kernel = weight.type().sizes()[2:]
    args = [input, weight] if sh._is_none(bias) else [input, weight, bias]
    return g.op("Conv", *args, kernel_shape_i=kernel, strides_i=stride, pads_i=padding + padding,
                dilations_i=dilation, group_i=groups)


@pack.symbolic("aten::_convolution", since=7)
@sh.parse_args("v", "v", "v", "is", "is", "is", "i", "is", "i", "none", "none", "none", "none")
def _convolution(g, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups, *_):
    if transposed:
        kernel = weight.type().sizes()[2:]
        args = [input, weight] if sh._is_none(bias) else [input, weight, bias]
        return g.op("ConvTranspose", *args, kernel_shape_i=kernel, strides_i=stride,
                    pads_i=padding + padding, dilations_i=dilation, group_i=groups,
                    output_padding_i=output_padding)
    return _conv(g, input, weight, bias, stride, padding, dilation, groups)


def _conv_nd(name: str):
    @sh.parse_args("v", "v", "v", "is", "is", "is", "i")
    def conv(g, input, weight, bias, stride, padding, dilation, groups):
        return _conv(g, input, weight, bias, stride, padding, dilation, groups)
    conv.__name__ = name
    return conv


for _rank in (1, 2, 3):
    pack.symbolic(f"aten::conv{_rank}d", since=7)(_conv_nd(f"conv{_rank}d"))


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


pack.alias(dropout, "aten::dropout_", "aten::feature_dropout", since=7)


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
pack.case("aten::softmax", lambda x: torch.softmax(x, -1), (2, 3, 4), name="last")
pack.case("aten::softmax", lambda x: torch.softmax(x, 1), (2, 3, 4), name="middle")
pack.case("aten::log_softmax", lambda x: torch.log_softmax(x, 0), (2, 3, 4))
