"""Quantized models (``torch.ao.quantization``, eager mode) as QDQ ONNX.

A quantized tensor is exported as the float output of a DequantizeLinear fed by a
QuantizeLinear with the tensor's scale and zero point; that output Value carries
``meta["qparams"]`` (a :class:`QParams`). Float ONNX ops run between the pairs and ONNX
Runtime fuses the patterns into integer kernels. Quantized weights are integer
initializers dequantized at run time (per channel, with ``axis``, from opset 13);
biases stay float. Every quantized op requantizes its output with the output scale and
zero point its TorchScript node names, as PyTorch's kernels do, so the results agree
within one quantization step.

Float aten ops applied to quantized tensors (relu, max_pool2d, flatten, avg pools,
interpolation, clamp, sigmoid...) are converted by their ordinary symbolics; the
``requantize`` pass then rounds the outputs that PyTorch's quantized kernels round back
onto the input's grid, and gives sigmoid, tanh and hardsigmoid their fixed qparams.

Dynamic quantization (``quantize_dynamic``): ``linear_dynamic`` quantizes its input at
run time with the qparams PyTorch would choose. The dynamically quantized LSTM and GRU
quantize every step's hidden state, which one ONNX LSTM/GRU cannot express: they are
exported as float LSTM/GRU with dequantized weights, within the activation quantization
error of PyTorch's result.

The test cases live in :mod:`oxport.opsets.cases.quantized`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.context import GraphContext
from oxport.errors import SymbolicValueError
from oxport.frontends.base import FrontEnd
from oxport.frontends.quantized_io import quantized_outputs
from oxport.hookspecs import hookimpl
from oxport.ir import Graph, Node, Type, Value
from oxport.opsets import quantized_io
from oxport.types import JitScalarType


class _QuantizedPack(OpPack):
    """The quantized op pack, which also registers the ``requantize`` graph pass and splits
    quantized inputs and outputs at the graph's edges (:mod:`oxport.opsets.quantized_io`)."""

    @hookimpl
    def oxport_register_passes(self, registry: Any) -> None:
        registry.register_pass("quantized.requantize", requantize)

    @hookimpl
    def oxport_graph_boundary(self, graph: Graph, front: FrontEnd, input_names: list[str],
                              opset: int) -> None:
        quantized_io.split_inputs(graph, front.example_inputs, input_names, opset)
        quantized_io.split_outputs(graph, quantized_outputs(front.graph), output_grid)


pack = _QuantizedPack("oxport.quantized", cases="oxport.opsets.cases.quantized")


@dataclasses.dataclass(frozen=True)
class QParams:
    """Per-tensor quantization parameters of a quantized tensor."""

    scale: float
    zero_point: int
    #: torch.quint8 or torch.qint8.
    dtype: torch.dtype


#: The integer type ONNX stores each quantized dtype in (QuantizeLinear has no int32).
_STORAGE = {torch.quint8: torch.uint8, torch.qint8: torch.int8}


# -- helpers ---------------------------------------------------------------------------
def quantize(g: GraphContext, x: Value, qp: QParams) -> Value:
    """``x`` quantized with ``qp`` and dequantized: a quantized tensor in QDQ form."""
    storage = _STORAGE.get(qp.dtype)
    if storage is None:
        sh._unimplemented(g.original_node.kind() if g.original_node is not None else "quantize",
                          f"{qp.dtype} tensors: ONNX QuantizeLinear makes int8 and uint8 only")
    scale = g.constant(torch.tensor(qp.scale, dtype=torch.float32))
    zero_point = g.constant(torch.tensor(qp.zero_point, dtype=storage))
    shape = x.type().shape if x.type().kind() == "TensorType" else None
    q = g.op("QuantizeLinear", x, scale, zero_point)
    q.setType(Type.tensor(storage, shape))
    y = g.op("DequantizeLinear", q, scale, zero_point)
    y.setType(Type.tensor(torch.float32, shape))
    y.meta = {"qparams": qp}
    return y


#: ONNX ops whose output lies on their first input's quantization grid.
_SAME_GRID = {"Relu", "MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
              "Identity", "Slice", "Gather", "Expand", "Tile", "Split", "DepthToSpace",
              "SpaceToDepth", "ReduceMax", "ReduceMin"}


def qparams_of(value: Value | None) -> QParams | None:
    """The qparams of a quantized value: its own, or those of the value a chain of
    grid-preserving ops (reshapes, relu, max pooling...) took it from; None if unknown."""
    while value is not None:
        if value.meta and "qparams" in value.meta:
            return value.meta["qparams"]
        node = value.producer
        if node is None or not node.input_values or node.origin == "aten::dequantize" \
                or not (node.op_type in _SAME_GRID or _nearest_resize(node)):
            return None
        value = node.input_values[0]
    return None


def _nearest_resize(node: Node) -> bool:
    return node.op_type in ("Resize", "Upsample") and \
        node.attrs.get("mode", ("s", "nearest"))[1] == "nearest"


def _const(g: GraphContext, value: Any, desc: str, what: str) -> Any:
    got = sh._maybe_get_const(value, desc)
    if isinstance(got, Value):
        sh._unimplemented(g.original_node.kind(), f"the {what} must be a constant")
    return got


def _output_qparams(g: GraphContext, scale: Value, zero_point: Value) -> QParams:
    """The output qparams a quantized op's node names (dtype from its traced type)."""
    dtype = g.original_node.output().type().dtype() if g.original_node is not None else None
    return QParams(float(_const(g, scale, "f", "output scale")),
                   int(_const(g, zero_point, "i", "output zero point")),
                   dtype if dtype in (*_STORAGE, torch.qint32) else torch.quint8)


def _object(g: GraphContext, value: Value) -> Any:
    """The TorchScript object (packed weights) a constant input holds."""
    if not (value.is_const and isinstance(value.const, torch.ScriptObject)):
        sh._unimplemented(g.original_node.kind(), "the packed weights must be a module "
                                                  "attribute (a constant of the trace)")
    return value.const


def weight(g: GraphContext, tensor: torch.Tensor, op: str, *, transpose: bool = False) -> Value:
    """A quantized weight: its integers as a constant, dequantized at run time.

    ``transpose`` stores a 2-D weight transposed (for MatMul)."""
    data = tensor.int_repr()
    scheme = tensor.qscheme()
    axis = None
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        scale = torch.tensor(tensor.q_scale(), dtype=torch.float32)
        zero_point = torch.tensor(tensor.q_zero_point(), dtype=data.dtype)
    elif scheme in (torch.per_channel_affine, torch.per_channel_symmetric):
        if g.opset < 13:
            sh._onnx_opset_unsupported(f"{op} with per-channel quantized weights", g.opset, 13)
        scale = tensor.q_per_channel_scales().to(torch.float32)
        zero_point = tensor.q_per_channel_zero_points().to(data.dtype)
        axis = tensor.q_per_channel_axis()
    else:
        sh._unimplemented(op, f"weights quantized with {scheme}")
    if transpose:
        data = data.t().contiguous()
        axis = None if axis is None else 1 - axis
    result = g.op("DequantizeLinear", g.constant(data), g.constant(scale),
                  g.constant(zero_point), axis_i=axis)
    result.setType(Type.tensor(torch.float32, tuple(data.shape)))
    return result


def bias_value(g: GraphContext, bias: torch.Tensor, x: Value, w: torch.Tensor) -> Value:
    """A float bias. Below opset 11 it is stored as int32 with the scale input scale x
    weight scale, as ONNX Runtime quantizes it anyway: its own rewrite uses Round, which
    opset 10 lacks, and then fails to load the model."""
    b = bias.detach().to(torch.float32)
    qp = qparams_of(x)
    if g.opset >= 11 or qp is None or w.qscheme() != torch.per_tensor_affine:
        return g.constant(b)
    scale = torch.tensor(qp.scale, dtype=torch.float32) * torch.tensor(w.q_scale(),
                                                                      dtype=torch.float32)
    result = g.op("DequantizeLinear", g.constant(torch.round(b / scale).to(torch.int32)),
                  g.constant(scale), g.constant(torch.tensor(0, dtype=torch.int32)))
    result.setType(Type.tensor(torch.float32, tuple(b.shape)))
    return result


def linear_float(g: GraphContext, x: Value, w: torch.Tensor, bias: torch.Tensor | None,
                 op: str) -> Value:
    """``x @ dequantize(w).T + bias`` with the weight stored quantized."""
    y = g.op("MatMul", x, weight(g, w, op, transpose=True))
    if bias is not None:
        y = g.op("Add", y, bias_value(g, bias, x, w))
    return y


# -- quantize / dequantize -------------------------------------------------------------
@pack.symbolic("aten::quantize_per_tensor", since=10)
def quantize_per_tensor(g, input: Value, scale: Value, zero_point: Value,
                        dtype: Value) -> Value:
    """quantize_per_tensor(Tensor self, float scale, int zero_point, ScalarType dtype) -> Tensor
    quantize_per_tensor.tensor_qparams(Tensor self, Tensor scale, Tensor zero_point, ScalarType dtype) -> Tensor
    quantize_per_tensor.tensors(Tensor[] tensors, Tensor scales, Tensor zero_points, ScalarType dtype) -> Tensor[]

    QuantizeLinear + DequantizeLinear (the tensor_qparams overload too, with constants)."""
    qp = QParams(float(_const(g, scale, "f", "scale")),
                 int(_const(g, zero_point, "i", "zero point")),
                 JitScalarType(int(_const(g, dtype, "i", "dtype"))).dtype())
    return quantize(g, input, qp)


@pack.symbolic("aten::dequantize", since=10)
def dequantize(g, input: Value) -> Value:
    """dequantize.self(Tensor self) -> Tensor
    dequantize.tensors(Tensor[] tensors) -> Tensor[]
    dequantize.tensor(Tensor qtensor) -> Tensor
    dequantize.list(Tensor[] qtensors) -> Tensor[]

    The float value already is the dequantized tensor; an Identity marks the end of the
    quantized region (the requantize pass does not look through it)."""
    if sh._is_packed_list(input):
        sh._unimplemented("aten::dequantize", "lists of tensors")
    result = g.op("Identity", input)
    result.setType(Type.tensor(torch.float32, input.type().shape))
    return result


# -- fake quantization (quantization-aware training) ---------------------------------------
#: The integer type QuantizeLinear rounds each (quant_min, quant_max) range into; (0, 127),
#: the range of PyTorch's default activation fake-quantization (``reduce_range``), rounds
#: into uint8 and is clipped to 127.
_RANGE_STORAGE = {(0, 255): torch.uint8, (-128, 127): torch.int8, (0, 127): torch.uint8}
#: The first opset whose Clip takes integers (torch.onnx: "requires opset 13 Clip").
_INTEGER_CLIP = 13


def _storage_of_range(g, op: str, quant_min: int, quant_max: int) -> torch.dtype:
    """The storage type of a fake-quantization range QuantizeLinear (and for (0, 127) an
    integer Clip) can express."""
    storage = _RANGE_STORAGE.get((quant_min, quant_max))
    if storage is None:
        raise SymbolicValueError(
            f"{op} with (quant_min, quant_max) = ({quant_min}, {quant_max}): ONNX QuantizeLinear "
            "rounds into (0, 255) or (-128, 127) only (and (0, 127) with a Clip); use one of "
            "those ranges in the observer.")
    if _clipped(storage, quant_max) and g.opset < _INTEGER_CLIP:
        sh._onnx_opset_unsupported_detailed(
            op, g.opset, _INTEGER_CLIP, "the range (0, 127) needs a Clip of integers")
    return storage


def _clipped(storage: torch.dtype, quant_max: int) -> bool:
    """Whether a range ends below its storage type's maximum (and needs a Clip)."""
    return quant_max < torch.iinfo(storage).max


def _fake_quantize(g, op: str, x: Value, scale: Value, zero_point: Value, quant_min: Value,
                   quant_max: Value, axis: int | None = None) -> Value:
    low, high = sh._get_const(quant_min, "i", "quant_min"), sh._get_const(quant_max, "i",
                                                                          "quant_max")
    storage = _storage_of_range(g, op, low, high)
    scale = sh.cast_to(g, g.as_value(scale), torch.float32)
    zero_point = sh.cast_to(g, g.as_value(zero_point), storage)
    if axis is None:  # per tensor: scalar parameters
        scale, zero_point = (sh._reshape_helper(g, v, []) for v in (scale, zero_point))
    q = g.op("QuantizeLinear", x, scale, zero_point, axis_i=axis)
    if _clipped(storage, high):
        q = g.op("Clip", q, None, g.constant(torch.tensor(high, dtype=storage)))
    return g.op("DequantizeLinear", q, scale, zero_point, axis_i=axis)


@pack.symbolic("aten::fake_quantize_per_tensor_affine", since=10)
def fake_quantize_per_tensor_affine(g, input: Value, scale: Value, zero_point: Value,
                                    quant_min: Value, quant_max: Value) -> Value:
    """fake_quantize_per_tensor_affine(Tensor self, float scale, int zero_point, int quant_min, int quant_max) -> Tensor
    fake_quantize_per_tensor_affine.tensor_qparams(Tensor self, Tensor scale, Tensor zero_point, int quant_min, int quant_max) -> Tensor

    QuantizeLinear + DequantizeLinear with the range's integer type (scale and zero point
    numbers, or one-element tensors)."""
    return _fake_quantize(g, "aten::fake_quantize_per_tensor_affine", input, scale, zero_point,
                          quant_min, quant_max)


@pack.symbolic("aten::fake_quantize_per_channel_affine", since=13)
def fake_quantize_per_channel_affine(g, input: Value, scale: Value, zero_point: Value,
                                     axis: Value, quant_min: Value, quant_max: Value) -> Value:
    """fake_quantize_per_channel_affine(Tensor self, Tensor scale, Tensor zero_point, int axis, int quant_min, int quant_max) -> Tensor

    QuantizeLinear + DequantizeLinear along ``axis`` (per-axis parameters: opset 13)."""
    return _fake_quantize(g, "aten::fake_quantize_per_channel_affine", input, scale,
                          zero_point, quant_min, quant_max, sh._get_const(axis, "i", "axis"))


# -- linear and convolution -------------------------------------------------------------
def _linear(relu: bool):
    def symbolic(g, x: Value, packed: Value, scale: Value, zero_point: Value) -> Value:
        op = g.original_node.kind()
        w, bias = torch.ops.quantized.linear_unpack(_object(g, packed))
        y = linear_float(g, x, w, bias, op)
        if relu:
            y = g.op("Relu", y)
        return quantize(g, y, _output_qparams(g, scale, zero_point))
    symbolic.__doc__ = (f"linear{'_relu' if relu else ''}(Tensor X, "
                        "__torch__.torch.classes.quantized.LinearPackedParamsBase W_prepack, "
                        "float Y_scale_i, int Y_zero_point_i) -> Tensor Y\n\n"
                        f"MatMul with the dequantized weight, float bias{', Relu' if relu else ''}"
                        ", requantized.")
    return symbolic


pack.symbolic("quantized::linear", since=10)(_linear(False))
pack.symbolic("quantized::linear_relu", since=10)(_linear(True))


def _conv_attrs(packed: Any, dims: int, transposed: bool) -> dict[str, Any]:
    """Stride, padding, dilation, groups (and output padding) of packed conv weights."""
    family = "conv_transpose" if transposed else "conv"
    prefix = f"{family}{3 if dims == 3 else 2}d"  # 1-d convs pack as 2-d

    def get(name: str) -> Any:
        return getattr(torch.ops.quantized, f"{prefix}_{name}")(packed)

    attrs = {"strides_i": list(get("stride"))[-dims:],
             "pads_i": list(get("padding"))[-dims:] * 2,
             "dilations_i": list(get("dilation"))[-dims:],
             "group_i": int(get("groups"))}
    if transposed:
        attrs["output_padding_i"] = list(get("output_padding"))[-dims:]
    return attrs


def _conv(dims: int, transposed: bool = False, relu: bool = False):
    def symbolic(g, x: Value, packed: Value, scale: Value, zero_point: Value) -> Value:
        op = g.original_node.kind()
        obj = _object(g, packed)
        family = "conv_transpose" if transposed else "conv"
        w, bias = getattr(torch.ops.quantized, f"{family}{dims}d_unpack")(obj)
        inputs = [x, weight(g, w, op)]
        if bias is not None:
            inputs.append(bias_value(g, bias, x, w))
        y = g.op("ConvTranspose" if transposed else "Conv", *inputs,
                 kernel_shape_i=list(w.shape[2:]), **_conv_attrs(obj, dims, transposed))
        if relu:
            y = g.op("Relu", y)
        return quantize(g, y, _output_qparams(g, scale, zero_point))
    kind = "ConvTranspose" if transposed else "Conv"
    name = f"{'conv_transpose' if transposed else 'conv'}{dims}d{'_relu' if relu else ''}"
    overload = ".new" if dims > 1 and not transposed else ""
    symbolic.__doc__ = (f"{name}{overload}(Tensor qx, __torch__.torch.classes.quantized."
                        f"Conv{3 if dims == 3 else 2}dPackedParamsBase packed_weight, "
                        "float output_scale, int output_zero_point) -> Tensor\n\n"
                        f"{kind} with the dequantized weight{', Relu' if relu else ''}, "
                        "requantized.")
    return symbolic


for _dims in (1, 2, 3):
    pack.symbolic(f"quantized::conv{_dims}d", since=10)(_conv(_dims))
    pack.symbolic(f"quantized::conv{_dims}d_relu", since=10)(_conv(_dims, relu=True))
    pack.symbolic(f"quantized::conv_transpose{_dims}d", since=10)(_conv(_dims, transposed=True))


# -- arithmetic and concatenation -------------------------------------------------------
def _binary(onnx_op: str, relu: bool = False):
    def symbolic(g, a: Value, b: Value, scale: Value, zero_point: Value) -> Value:
        y = g.op(onnx_op, a, b)
        if relu:
            y = g.op("Relu", y)
        return quantize(g, y, _output_qparams(g, scale, zero_point))
    name = onnx_op.lower() + ("_relu" if relu else "")
    symbolic.__doc__ = (f"{name}(Tensor qa, Tensor qb, float scale, int zero_point) -> Tensor qc\n"
                        + ("" if onnx_op == "MatMul" else "and its Scalar overloads\n")
                        + f"\n{onnx_op}{' + Relu' if relu else ''} of the dequantized inputs, "
                        "requantized.")
    return symbolic


pack.symbolic("quantized::add", since=10)(_binary("Add"))
pack.symbolic("quantized::add_relu", since=10)(_binary("Add", relu=True))
pack.symbolic("quantized::mul", since=10)(_binary("Mul"))
pack.symbolic("quantized::mul_relu", since=10)(_binary("Mul", relu=True))
pack.symbolic("quantized::matmul", since=10)(_binary("MatMul"))


def _cat(relu: bool):
    def symbolic(g, tensors: Value, dim: Value, scale: Value, zero_point: Value) -> Value:
        items = sh._unpack_list(tensors)
        y = g.op("Concat", *items, axis_i=int(_const(g, dim, "i", "dim")))
        if relu:
            y = g.op("Relu", y)
        if sh._is_none(scale):  # PyTorch then keeps the first input's qparams
            qp = qparams_of(items[0])
            return quantize(g, y, qp) if qp is not None else y
        return quantize(g, y, _output_qparams(g, scale, zero_point))
    symbolic.__doc__ = (f"cat{'_relu' if relu else ''}(Tensor[] qx, int dim, float? scale, "
                        "int? zero_point) -> Tensor\n\n"
                        f"Concat{' + Relu' if relu else ''}, requantized to the output qparams.")
    return symbolic


pack.symbolic("quantized::cat", since=10)(_cat(False))
pack.symbolic("quantized::cat_relu", since=10)(_cat(True))


# -- activations and normalization: the float op, requantized ----------------------------
@pack.symbolic("quantized::relu6", since=10)
def relu6(g, x: Value, inplace: Value = None) -> Value:
    """relu6(Tensor qx, bool inplace=False) -> Tensor

    Clip to [0, 6], kept on the input's grid (6 rounds to a grid point)."""
    y = g.run_symbolic("aten::relu6", x)
    qp = qparams_of(x)
    return quantize(g, y, qp) if qp is not None else y


@pack.symbolic("quantized::hardswish", since=10)
def hardswish(g, x: Value, scale: Value, zero_point: Value) -> Value:
    """hardswish(Tensor input, float output_scale, int output_zero_point) -> Tensor

    aten::hardswish, requantized."""
    return quantize(g, g.run_symbolic("aten::hardswish", x), _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::sigmoid", since=10)
def sigmoid(g, x: Value, scale: Value, zero_point: Value) -> Value:
    """sigmoid(Tensor qx, float output_scale, int output_zero_point) -> Tensor

    aten::sigmoid, requantized."""
    return quantize(g, g.run_symbolic("aten::sigmoid", x), _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::leaky_relu", since=10)
def leaky_relu(g, x: Value, negative_slope: Value, inplace: Value, scale: Value,
               zero_point: Value) -> Value:
    """leaky_relu(Tensor qx, Scalar negative_slope, bool inplace, float output_scale, int output_zero_point) -> Tensor

    aten::leaky_relu, requantized."""
    y = g.run_symbolic("aten::leaky_relu", x, negative_slope)
    return quantize(g, y, _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::elu", since=10)
def elu(g, x: Value, scale: Value, zero_point: Value, alpha: Value, elu_scale: Value,
        input_scale: Value) -> Value:
    """elu(Tensor self, float output_scale, int output_zero_point, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor

    aten::elu, requantized."""
    y = g.run_symbolic("aten::elu", x, alpha, elu_scale, input_scale)
    return quantize(g, y, _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::celu", since=10)
def celu(g, x: Value, scale: Value, zero_point: Value, alpha: Value) -> Value:
    """celu(Tensor self, float output_scale, int output_zero_point, Scalar alpha=1) -> Tensor

    aten::celu, requantized."""
    return quantize(g, g.run_symbolic("aten::celu", x, alpha),
                    _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::softmax", since=10)
def softmax(g, x: Value, dim: Value, scale: Value, zero_point: Value) -> Value:
    """softmax(Tensor qx, int dim, float output_scale, int output_zero_point) -> Tensor

    aten::softmax, requantized."""
    y = g.run_symbolic("aten::softmax", x, dim, None)
    return quantize(g, y, _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::prelu", since=10)
def prelu(g, x: Value, slope: Value, scale: Value, zero_point: Value) -> Value:
    """prelu(Tensor qx, Tensor weight, float output_scale, int output_zero_point) -> Tensor

    aten::prelu with the (dequantized) slope, requantized."""
    if slope.is_const and isinstance(slope.const, torch.Tensor) and slope.const.is_quantized:
        slope = g.constant(slope.const.dequantize())
    return quantize(g, g.run_symbolic("aten::prelu", x, slope),
                    _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::layer_norm", since=10)
def layer_norm(g, x: Value, normalized_shape: Value, weight_: Value, bias: Value, eps: Value,
               scale: Value, zero_point: Value) -> Value:
    """layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps, float output_scale, int output_zero_point) -> Tensor

    aten::layer_norm with the float affine, requantized."""
    y = g.run_symbolic("aten::layer_norm", x, normalized_shape, weight_, bias, eps, False)
    return quantize(g, y, _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::group_norm", since=10)
def group_norm(g, x: Value, num_groups: Value, weight_: Value, bias: Value, eps: Value,
               scale: Value, zero_point: Value) -> Value:
    """group_norm(Tensor input, int num_groups, Tensor? weight, Tensor? bias, float eps, float output_scale, int output_zero_point) -> Tensor

    aten::group_norm with the float affine, requantized."""
    y = g.run_symbolic("aten::group_norm", x, num_groups, weight_, bias, eps, False)
    return quantize(g, y, _output_qparams(g, scale, zero_point))


@pack.symbolic("quantized::instance_norm", since=10)
def instance_norm(g, x: Value, weight_: Value, bias: Value, eps: Value, scale: Value,
                  zero_point: Value) -> Value:
    """instance_norm(Tensor input, Tensor? weight, Tensor? bias, float eps, float output_scale, int output_zero_point) -> Tensor

    aten::instance_norm (input statistics) with the float affine, requantized."""
    y = g.run_symbolic("aten::instance_norm", x, weight_, bias, None, None, True, 0.0, eps, False)
    return quantize(g, y, _output_qparams(g, scale, zero_point))


def _batch_norm(name: str):
    relu = name.endswith("_relu")

    def symbolic(g, x: Value, weight_: Value, bias: Value, mean: Value, var: Value,
                 eps: Value, scale: Value, zero_point: Value) -> Value:
        y = g.run_symbolic("aten::batch_norm", x, weight_, bias, mean, var, False, 0.0, eps, False)
        if relu:
            y = g.op("Relu", y)
        return quantize(g, y, _output_qparams(g, scale, zero_point))
    symbolic.__doc__ = (f"{name}(Tensor qx, Tensor? weight, Tensor? bias, Tensor mean, "
                        "Tensor var, float eps, float output_scale, int output_zero_point) "
                        "-> Tensor\n\n"
                        f"aten::batch_norm with the running statistics"
                        f"{', Relu' if relu else ''}, requantized.")
    return symbolic


for _name in ("batch_norm", "batch_norm1d", "batch_norm2d", "batch_norm3d"):
    pack.symbolic(f"quantized::{_name}", since=10)(_batch_norm(_name))
    pack.symbolic(f"quantized::{_name}_relu", since=10)(_batch_norm(f"{_name}_relu"))


# -- dynamic quantization ---------------------------------------------------------------
def _dynamic_input(g: GraphContext, x: Value, reduce_range: bool) -> Value:
    """``x`` quantized to quint8 with qparams chosen from its range at run time, as
    PyTorch's dynamic ops do (range widened to include 0; 7 bits with ``reduce_range``)."""
    qmax = 127.0 if reduce_range else 255.0
    zero = g.constant(torch.tensor(0.0))
    low = g.op("Min", g.op("ReduceMin", x, keepdims_i=0), zero)
    high = g.op("Max", g.op("ReduceMax", x, keepdims_i=0), zero)
    scale = g.op("Div", g.op("Sub", high, low), g.constant(torch.tensor(qmax)))
    scale = g.op("Where", g.op("Equal", scale, zero), g.constant(torch.tensor(0.1)), scale)
    zero_point = g.op("Cast", g.op("Round", g.op("Div", g.op("Neg", low), scale)),
                      to_i=JitScalarType.from_dtype(torch.uint8).onnx_type())
    q = g.op("QuantizeLinear", x, scale, zero_point)
    return g.op("DequantizeLinear", q, scale, zero_point)


def _linear_dynamic(relu: bool, fp16: bool):
    def symbolic(g, x: Value, packed: Value, reduce_range: Value = None) -> Value:
        op = g.original_node.kind()
        obj = _object(g, packed)
        if fp16:  # fp16 weights, float activations
            w, bias = torch.ops.quantized.linear_unpack_fp16(obj)
            y = g.op("MatMul", x, g.constant(w.detach().to(torch.float32).t().contiguous()))
            if bias is not None:
                y = g.op("Add", y, g.constant(bias.detach().to(torch.float32)))
        else:
            w, bias = torch.ops.quantized.linear_unpack(obj)
            reduce = bool(_const(g, reduce_range, "b", "reduce_range")) \
                if not sh._is_none(reduce_range) else False
            y = linear_float(g, _dynamic_input(g, x, reduce), w, bias, op)
        return g.op("Relu", y) if relu else y
    kind = "fp16 weights" if fp16 else "the input quantized at run time"
    name = f"linear{'_relu' if relu else ''}_dynamic{'_fp16' if fp16 else ''}"
    symbolic.__doc__ = (f"{name}(Tensor X, "
                        "__torch__.torch.classes.quantized.LinearPackedParamsBase W_prepack"
                        f"{'' if fp16 else ', bool reduce_range=False'}) -> Tensor Y\n\n"
                        f"MatMul with {kind}{', Relu' if relu else ''}; float output.")
    return symbolic


pack.symbolic("quantized::linear_dynamic", since=11)(_linear_dynamic(False, False))
pack.symbolic("quantized::linear_relu_dynamic", since=11)(_linear_dynamic(True, False))
pack.symbolic("quantized::linear_dynamic_fp16", since=7)(_linear_dynamic(False, True))
pack.symbolic("quantized::linear_relu_dynamic_fp16", since=7)(_linear_dynamic(True, True))


def _cell_weights(g: GraphContext, cell: Value) -> list[torch.Tensor]:
    """(w_ih, w_hh, b_ih, b_hh) of a dynamically quantized RNN cell, as float tensors."""
    op = g.original_node.kind()
    state = _object(g, cell).__getstate__()[0]
    kind, tensors, packed = state[0], state[1], state[4]
    if kind == "quantized_dynamic":
        (w_ih, b_ih), (w_hh, b_hh) = (torch.ops.quantized.linear_unpack(p) for p in packed)
        weights = [w_ih.dequantize(), w_hh.dequantize(), *tensors]
    elif kind == "quantized_fp16":
        (w_ih, b_ih), (w_hh, b_hh) = (torch.ops.quantized.linear_unpack_fp16(p) for p in packed)
        weights = [w_ih, w_hh, b_ih, b_hh]
    else:
        sh._unimplemented(op, f"{kind!r} cell parameters (only dynamic int8 and fp16)")
    return [w.detach().to(torch.float32) for w in weights]


def _float_list(g: GraphContext, tensors: list[torch.Tensor]) -> Value:
    """A constant list of float tensors, as prim::ListConstruct would give it."""
    items = [g.constant(t) for t in tensors]

    def materialize(graph: Graph) -> Value:
        raise SymbolicValueError("a list of RNN weights is not an ONNX value")

    result = g.graph.deferred(Type("ListType", elem=Type.tensor(torch.float32)), materialize)
    result.producer = Node("prim", "ListConstruct", items, [result])
    return result


def _quantized_rnn(float_op: str):
    def symbolic(g, input: Value, hx: Value, params: Value, has_biases: Value,
                 num_layers: Value, dropout: Value, train: Value, bidirectional: Value,
                 batch_first: Value, dtype: Value = None, use_dynamic: Value = None) -> Value:
        if sh._is_packed_list(has_biases):  # the .data overload: packed sequences
            sh._unimplemented(g.original_node.kind(), "packed sequences")
        weights = [w for cell in sh._unpack_list(params) for w in _cell_weights(g, cell)]
        return g.run_symbolic(float_op, input, hx, _float_list(g, weights), has_biases, num_layers,
                    dropout, train, bidirectional, batch_first)
    name = f"quantized_{float_op.split('::')[1]}"
    hx, options, out = (
        ("Tensor[] hx", ", *, ScalarType? dtype=None, bool use_dynamic=False",
         "(Tensor, Tensor, Tensor)") if name == "quantized_lstm"
        else ("Tensor hx", "", "(Tensor, Tensor)"))
    symbolic.__doc__ = (f"{name}.input(Tensor input, {hx}, "
                        "__torch__.torch.classes.rnn.CellParamsBase[] params, bool has_biases, "
                        "int num_layers, float dropout, bool train, bool bidirectional, "
                        f"bool batch_first{options}) -> {out}\n\n"
                        f"{float_op} with the dequantized weights (float activations: within "
                        "PyTorch's activation quantization error).")
    return symbolic


pack.symbolic("aten::quantized_lstm", since=7)(_quantized_rnn("aten::lstm"))
pack.symbolic("aten::quantized_gru", since=7)(_quantized_rnn("aten::gru"))


# -- the requantize pass ----------------------------------------------------------------
#: Float ops on a quantized tensor whose PyTorch kernel rounds back onto the input's grid.
_ROUNDED = {"AveragePool", "GlobalAveragePool", "ReduceMean", "Resize", "Upsample", "Clip",
            "LeakyRelu", "Gelu", "Concat", "Pad"}
#: Ops with fixed output qparams: {op: {dtype: (scale, zero point)}}.
_FIXED = {"Sigmoid": {torch.quint8: (1 / 256, 0), torch.qint8: (1 / 256, -128)},
          "HardSigmoid": {torch.quint8: (1 / 256, 0), torch.qint8: (1 / 256, -128)},
          "Tanh": {torch.quint8: (2 / 256, 128), torch.qint8: (2 / 256, 0)}}
#: aten ops this pack converts itself.
_OWN = {"aten::quantize_per_tensor", "aten::dequantize", "aten::quantized_lstm",
        "aten::quantized_gru"}


def _rounding(node: Node) -> QParams | None:
    """The qparams PyTorch gives this float node's output when its input is quantized."""
    if not node.origin.startswith("aten::") or node.origin in _OWN or not node.input_values \
            or len(node.output_values) != 1:
        return None
    op = node.op_type
    if op in _FIXED:
        qp = qparams_of(node.input_values[0])
        fixed = _FIXED[op].get(qp.dtype) if qp is not None else None
        return QParams(fixed[0], fixed[1], qp.dtype) if fixed else None
    if op in _ROUNDED and not _nearest_resize(node):
        return qparams_of(node.input_values[0])
    return None


#: The quantized dtype each integer storage type stands for.
_QUANTIZED = {storage: dtype for dtype, storage in _STORAGE.items()}


def output_grid(graph: Graph, value: Value) -> tuple[Value, Value] | None:
    """The scale and zero point PyTorch gives ``value``, a float op's result on a quantized
    tensor: those of the DequantizeLinear it comes from through ops that keep or round
    onto their input's grid, or an op's fixed qparams; None when there is none."""
    node = value.producer
    if node is None or not node.input_values or node.input_values[0] is None \
            or node.origin == "aten::dequantize":
        return None
    if node.op_type == "DequantizeLinear":
        parts = node.input_values
        return (parts[1], parts[2]) if len(parts) == 3 and parts[2] is not None else None
    if node.op_type in _FIXED:
        return _fixed_grid(graph, node.op_type, output_grid(graph, node.input_values[0]))
    if node.op_type in _SAME_GRID or node.op_type in _ROUNDED or _nearest_resize(node):
        return output_grid(graph, node.input_values[0])
    return None


def _fixed_grid(graph: Graph, op: str, grid: tuple[Value, Value] | None
                ) -> tuple[Value, Value] | None:
    """Constant scale and zero point of an op with fixed output qparams (``_FIXED``)."""
    storage = grid[1].type().dtype() if grid is not None else None
    fixed = _FIXED[op].get(_QUANTIZED.get(storage))
    if fixed is None:
        return None
    return (_graph_constant(graph, torch.tensor(fixed[0], dtype=torch.float32)),
            _graph_constant(graph, torch.tensor(fixed[1], dtype=storage)))


def _graph_constant(graph: Graph, tensor: torch.Tensor) -> Value:
    result = graph.add_node("", "Constant", [], attrs={"value": ("t", tensor)}).output_values[0]
    result.setType(Type.of(tensor))
    return result


def requantize(graph: Graph, conversion: Any) -> None:
    """Quantize and dequantize the outputs of float ops on quantized tensors that
    PyTorch's quantized kernels round (see ``_ROUNDED`` and ``_FIXED``)."""
    g = GraphContext(graph, conversion)
    nodes, graph.nodes = graph.nodes, []
    replace: dict[int, Value] = {}
    for node in nodes:
        if replace:
            node.input_values = [replace.get(id(v), v) if v is not None else None
                            for v in node.input_values]
        graph.nodes.append(node)
        qp = _rounding(node)
        if qp is not None:
            output = node.output_values[0]
            g.source, g.scope = node.source, node.scope
            replace[id(output)] = quantize(g, output, qp)
    if replace:
        graph.outputs = [replace.get(id(v), v) for v in graph.outputs]
        for node in nodes:
            for kind, sub in node.attrs.values():
                for subgraph in (sub if kind == "gs" else [sub] if kind == "g" else []):
                    for inner in subgraph.walk():
                        inner.input_values = [replace.get(id(v), v) if v is not None else None
                                         for v in inner.input_values]
