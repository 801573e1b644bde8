"""Casts around ONNX nodes whose input dtype the opset or ONNX Runtime has no kernel for.

Symbolics emit the op PyTorch computes in the dtype it computes in (``Sub`` of int8,
``Where`` of int16, ``Elu`` of float64). Where the ONNX schema at the export's opset does
not allow that dtype, or ONNX Runtime's CPU kernels lack it (``RUNTIME_GAPS``), this pass
computes the node in the nearest dtype that works and casts the result back, so the file
both validates and runs. A constant whose dtype differs from the computed inputs sharing
its type parameter takes theirs (a torch.onnx symbolic filling a float tensor with a bool
0). Dtypes come from the values' types, else from the schemas of the producing nodes (no
shape inference).
"""

from __future__ import annotations

import functools
from typing import Any

import onnx
import torch

from oxport.ir import Graph, Node, Type, Value
from oxport.types import onnx_dtype, torch_dtype

#: ONNX Runtime CPU kernels missing for the dtype of an op's inputs of type parameter
#: ``T`` (``T1`` for Pow's exponent), although the ONNX schema allows it: probed with
#: onnxruntime 1.2x at opsets 13, 17 and 20, a gap at any of them applies to all;
#: ``tests/test_kernels.py`` re-probes each entry.
_FLOAT64_GAPS = ("Erf", "Atan", "Tan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                 "Elu", "Softplus", "Softsign", "Selu", "LeakyRelu", "HardSigmoid",
                 "ThresholdedRelu", "Hardmax", "Mean", "Mish", "Gelu", "Conv", "ConvTranspose",
                 "AveragePool", "InstanceNormalization")
RUNTIME_GAPS: dict[tuple[str, str], frozenset[torch.dtype]] = {
    **{(op, "T"): frozenset({torch.float64}) for op in _FLOAT64_GAPS},
    **{(op, "T"): frozenset({torch.int16}) for op in ("ArgMax", "ArgMin", "Max", "Min", "Clip")},
    ("Where", "T"): frozenset({torch.bool, torch.int16}),
    ("Relu", "T"): frozenset({torch.int16, torch.int64}),
    ("PRelu", "T"): frozenset({torch.int32, torch.int64, torch.float64}),
    ("Gemm", "T"): frozenset({torch.int32, torch.int64}),
    ("NonZero", "T"): frozenset({torch.int8, torch.int16, torch.float64}),
    ("Einsum", "T"): frozenset({torch.uint8, torch.int8, torch.int16}),
    ("Trilu", "T"): frozenset({torch.uint8, torch.int8, torch.int16}),
    ("Pow", "T1"): frozenset({torch.uint8, torch.int8, torch.int16}),
}

#: Where a dtype goes when its kernel is missing, nearest first (exact where possible:
#: int64 through float64 is exact below 2**53; float64 through float32 is the last resort).
_WIDER: dict[torch.dtype, tuple[torch.dtype, ...]] = {
    torch.bool: (torch.int32, torch.float32),
    torch.uint8: (torch.int32, torch.int64, torch.float32),
    torch.int8: (torch.int32, torch.int64, torch.float32),
    torch.int16: (torch.int32, torch.int64, torch.float32),
    torch.int32: (torch.int64, torch.float64, torch.float32),
    torch.int64: (torch.float64, torch.float32),
    torch.float16: (torch.float32, torch.float64),
    torch.bfloat16: (torch.float32, torch.float64),
    torch.float32: (torch.float64,),
    torch.float64: (torch.float32,),
}

_ONNX_NAMES = {torch.float32: "float", torch.float64: "double"}


def _type_str(dtype: torch.dtype) -> str:
    return f"tensor({_ONNX_NAMES.get(dtype, str(dtype).removeprefix('torch.'))})"


_DTYPES_BY_TYPE_STR = {_type_str(d): d for d in _WIDER}


@functools.lru_cache(maxsize=None)
def _schema(op_type: str, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def _param(params: list[onnx.defs.OpSchema.FormalParameter], index: int) -> str | None:
    """The type string (``T`` or ``tensor(int64)``) of the formal parameter at ``index``
    (the last one repeats for variadic parameters); None for a heterogeneous variadic
    parameter, whose values each have their own type (Loop's carried values)."""
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    if index < len(params):
        param = params[index]
    elif params and params[-1].option == variadic:
        param = params[-1]
    else:
        return None
    if param.option == variadic and not param.is_homogeneous:
        return None
    return param.type_str


def supported(op_type: str, opset: int, type_param: str, dtype: torch.dtype) -> bool:
    """Whether ``op_type`` at ``opset`` takes ``dtype`` for its ``type_param`` inputs, in
    the ONNX schema and in ONNX Runtime."""
    schema = _schema(op_type, opset)
    if schema is None:
        return True
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    if type_param in allowed and _type_str(dtype) not in allowed[type_param]:
        return False
    return dtype not in RUNTIME_GAPS.get((op_type, type_param), ())


def legalize_dtypes(graph: Graph, opset: int) -> int:
    """Compute each node whose dtype has no kernel in a wider one (see the module doc);
    returns how many nodes it changed."""
    known: dict[int, torch.dtype] = {}

    def dtype_of(value: Value) -> torch.dtype | None:
        return value.type().dtype() or known.get(id(value))

    nodes: list[Node] = []
    changed = 0
    for node in graph.nodes:
        schema = None if node.domain else _schema(node.op_type, opset)
        if schema is None:
            nodes.append(node)
            continue
        bound = _bind_constants_to_tensors(graph, node, schema, dtype_of, nodes)
        wider = {}
        for param, dtype in bound.items():
            if not supported(node.op_type, opset, param, dtype):
                target = next((d for d in _WIDER.get(dtype, ())
                               if supported(node.op_type, opset, param, d)), None)
                if target is not None:
                    wider[param] = target
        if wider:
            changed += 1
            nodes.extend(_casts_in(graph, node, schema, wider))
            nodes.append(node)
            nodes.extend(_casts_out(graph, node, schema, wider, bound))
        else:
            nodes.append(node)
        for index, out in enumerate(node.output_values):
            param = _param(schema.outputs, index)
            if param in bound:
                known[id(out)] = bound[param]
            elif param in _DTYPES_BY_TYPE_STR:
                known[id(out)] = _DTYPES_BY_TYPE_STR[param]
            elif node.op_type == "Cast":
                known[id(out)] = torch_dtype(node.attrs["to"][1])
    graph.nodes = nodes
    return changed


def _bind_constants_to_tensors(graph: Graph, node: Node, schema: onnx.defs.OpSchema,
                               dtype_of: Any, nodes: list[Node]) -> dict[str, torch.dtype]:
    """Each type parameter's dtype, from the node's computed (non-constant) inputs first. A
    constant of another dtype where the parameter asks for one dtype takes the computed
    inputs' (as a Python scalar takes the tensor's in PyTorch: ``masked_fill`` by a bool 0
    in a torch.onnx symbolic); its Cast is appended to ``nodes`` and folded later."""
    bound: dict[str, torch.dtype] = {}
    params = [_param(schema.inputs, i) for i in range(len(node.input_values))]
    for constants_too in (False, True):
        for value, param in zip(node.input_values, params):
            dtype = dtype_of(value) if value is not None else None
            if param is not None and dtype is not None and (constants_too or not value.is_const):
                bound.setdefault(param, dtype)
    for index, (value, param) in enumerate(zip(node.input_values, params)):
        if value is not None and value.is_const and param in bound and \
                not param.startswith("tensor(") and dtype_of(value) not in (None, bound[param]):
            cast = _cast(graph, node, value, bound[param])
            node.input_values[index] = cast.output_values[0]
            nodes.append(cast)
    return bound


def _cast(graph: Graph, template: Node, value: Value, dtype: torch.dtype,
          out: Value | None = None) -> Node:
    """A Cast of ``value`` to ``dtype`` (into ``out`` when given), blamed on ``template``."""
    cast = Node("", "Cast", [value], [], {"to": ("i", onnx_dtype(dtype))})
    if out is None:
        out = Value(graph, graph.fresh_name("Cast"), value.type().with_dtype(dtype), cast, 0)
    else:
        out.producer, out.index = cast, 0
    cast.output_values = [out]
    cast.source, cast.scope = template.source, template.scope
    cast.provenance, cast.origin = template.provenance, template.origin
    return cast


def _casts_in(graph: Graph, node: Node, schema: onnx.defs.OpSchema,
              wider: dict[str, torch.dtype]) -> list[Node]:
    casts = []
    for index, value in enumerate(node.input_values):
        param = _param(schema.inputs, index)
        if value is not None and param in wider:
            cast = _cast(graph, node, value, wider[param])
            node.input_values[index] = cast.output_values[0]
            casts.append(cast)
    return casts


def _casts_out(graph: Graph, node: Node, schema: onnx.defs.OpSchema,
               wider: dict[str, torch.dtype], bound: dict[str, torch.dtype]) -> list[Node]:
    casts = []
    for index, out in enumerate(node.output_values):
        param = _param(schema.outputs, index)
        if param in wider:
            raw = Value(graph, graph.fresh_name(node.op_type),
                        out.type().with_dtype(wider[param]) if out.type().kind() == "TensorType"
                        else Type.tensor(wider[param]), node, index)
            node.output_values[index] = raw
            casts.append(_cast(graph, node, raw, bound[param], out))
    return casts
