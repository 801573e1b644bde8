"""oxport.passes.dtype_legalization: nodes whose dtype the opset or ONNX Runtime lacks are computed wider.

The op cases (``int8``, ``uint8``, ``int16``, ``float64`` names) show the exports run; these
tests keep ``RUNTIME_GAPS`` honest against the installed ONNX Runtime and check the pass
leaves supported nodes alone.
"""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper

import oxport
from oxport.passes import dtype_legalization as kernels
from oxport.testing import as_module
from oxport.types import onnx_dtype

# The input shapes of each probed op (default: one [2, 3] input).
_SHAPES = {"Conv": [[1, 2, 4, 4], [3, 2, 1, 1]], "ConvTranspose": [[1, 2, 4, 4], [2, 3, 1, 1]],
           "AveragePool": [[1, 2, 4, 4]], "InstanceNormalization": [[1, 2, 4, 4], [2], [2]],
           "Gemm": [[2, 3], [3, 2]], "Einsum": [[2, 3], [3, 2]], "Where": [[2, 3], [2, 3]],
           "Max": [[2, 3], [2, 3]], "Min": [[2, 3], [2, 3]], "Mean": [[2, 3], [2, 3]],
           "PRelu": [[2, 3], [3]], "Pow": [[2, 3], [2, 3]], "Clip": [[2, 3], [], []]}
# The opset each op is probed at: 13 unless the op (or the gap) is newer.
_OPSETS = {"Gelu": 20, "Mish": 20, "Trilu": 17, "Relu": 17}
_ATTRS = {"AveragePool": {"kernel_shape": [2, 2]}, "Einsum": {"equation": "ij,jk->ik"}}


def _probe_model(op: str, param: str, dtype: torch.dtype, opset: int) -> onnx.ModelProto:
    shapes = _SHAPES.get(op, [[2, 3]])
    inputs = [helper.make_tensor_value_info(f"x{i}", onnx_dtype(dtype), shape)
              for i, shape in enumerate(shapes)]
    names = [i.name for i in inputs]
    if op == "Where":  # condition first
        inputs.insert(0, helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [2, 3]))
        names.insert(0, "c")
    if param == "T1":  # Pow's exponent: the base is float32
        inputs[0] = helper.make_tensor_value_info("x0", onnx.TensorProto.FLOAT, [2, 3])
    out_type = (onnx.TensorProto.INT64 if op in ("ArgMax", "ArgMin", "NonZero") else
                onnx.TensorProto.FLOAT if param == "T1" else onnx_dtype(dtype))
    node = helper.make_node(op, names, ["y"], **_ATTRS.get(op, {}))
    graph = helper.make_graph([node], "probe", inputs,
                              [helper.make_tensor_value_info("y", out_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("op,param", sorted(kernels.RUNTIME_GAPS))
def test_each_runtime_gap_is_real(op, param):
    opset = _OPSETS.get(op, 13)
    for dtype in kernels.RUNTIME_GAPS[op, param]:
        model = _probe_model(op, param, dtype, opset)
        with pytest.raises(Exception, match="NOT_IMPLEMENTED|Could not find an implementation"):
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_supported_dtypes_get_no_casts():
    model = as_module(lambda x, y: torch.where(x > 0, x, y) - y)
    result = oxport.convert(model, (torch.randn(3), torch.randn(3)), opset_version=17)
    assert [n.op_type for n in result.model_proto.graph.node].count("Cast") == 0


def test_a_missing_kernel_is_computed_wider_and_cast_back():
    model = as_module(lambda c, x, y: torch.where(c, x, y))
    args = (torch.rand(3) > 0.5, torch.arange(3, dtype=torch.int16),
            -torch.ones(3, dtype=torch.int16))
    proto = oxport.convert(model, args, opset_version=17).model_proto
    where = next(n for n in proto.graph.node if n.op_type == "Where")
    casts = {n.output[0]: n for n in proto.graph.node if n.op_type == "Cast"}
    assert all(casts[name].attribute[0].i == onnx.TensorProto.INT32 for name in where.input[1:])
    assert proto.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.INT16
    assert kernels.supported("Where", 17, "T", torch.int32)
    assert not kernels.supported("Sub", 13, "T", torch.int8)  # the schema: int8 from 14
    assert kernels.supported("Sub", 14, "T", torch.int8)
