"""The oxport side: how ``oxport_example::scaled_add`` becomes ONNX.

* From opset 15 it is the custom op ``com.example::ScaledAdd`` (domain version declared
  below, overridable with ``export(custom_opsets={"com.example": N})``). The model also
  carries an ONNX function implementing it, so any ONNX runtime runs it; a runtime with
  its own ``com.example`` kernel may use that instead.
* Below opset 15 (no ``CastLike`` for the function body) it is written with standard ops.

Nothing registers on import: oxport calls the pack's hook when it loads the entry point.
"""

from __future__ import annotations

import functools

import onnx
import torch
from onnx import helper

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.context import GraphContext
from oxport.ir import Value

from oxport_example_pack.ops import scaled_add as scaled_add_op

DOMAIN = "com.example"
pack = OpPack("example-pack", domains={DOMAIN: 1})


@pack.symbolic("oxport_example::scaled_add", since=9)
@sh.parse_args("v", "v", "f")
def scaled_add_9(g: GraphContext, x: Value, y: Value, alpha: float) -> Value:
    """``Add(x, Mul(y, alpha))`` with standard ops."""
    return g.op("Add", x, g.op("Mul", y, g.constant(alpha, dtype=y.type().dtype())))


@pack.symbolic("oxport_example::scaled_add", since=15)
@sh.parse_args("v", "v", "f")
def scaled_add(g: GraphContext, x: Value, y: Value, alpha: float) -> Value:
    """The custom op ``com.example::ScaledAdd[alpha](x, y)``, with its function."""
    return g.onnxscript_op(scaled_add_function(g.opset), x, y, alpha_f=alpha)


@functools.lru_cache(maxsize=None)
def scaled_add_function(opset: int) -> onnx.FunctionProto:
    """``ScaledAdd(X, Y; alpha) = X + CastLike(alpha, Y) * Y`` at the model's ai.onnx opset."""
    alpha = helper.make_node("Constant", [], ["alpha"])
    alpha.attribute.append(onnx.AttributeProto(
        name="value_float", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT))
    nodes = [
        alpha,
        helper.make_node("CastLike", ["alpha", "Y"], ["alpha_y"]),
        helper.make_node("Mul", ["Y", "alpha_y"], ["scaled"]),
        helper.make_node("Add", ["X", "scaled"], ["Z"]),
    ]
    return helper.make_function(DOMAIN, "ScaledAdd", ["X", "Y"], ["Z"], nodes,
                                [helper.make_opsetid("", opset)], attributes=["alpha"])


# Test cases: `oxport.testing.op_tests("example-pack")` exports each at the opsets its
# symbolic serves, runs it in ONNX Runtime and compares with PyTorch.
pack.case("oxport_example::scaled_add", lambda x, y: torch.ops.oxport_example.scaled_add(
    x, y, 0.5), (2, 3), (2, 3))
pack.case("oxport_example::scaled_add", lambda x, y: scaled_add_op(x, y, alpha=-2.0),
          (4,), (3, 4), name="broadcast")
