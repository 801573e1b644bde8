"""autograd Functions: the ``prim::PythonOp`` nodes a trace records for ``Function.apply``.

In the order torch.onnx uses:

1. a symbolic registered for ``prim::PythonOp`` with ``register_custom_op_symbolic``
   (a higher layer than this pack) sees every Function first; it gets the Function's
   class name as ``name=`` and the TorchScript node as ``g.original_node``; if it
   declines (``symbolic_helper._unimplemented``) this pack takes over;
2. the Function's static ``symbolic(g, *args)`` method;
3. the Function's forward, inlined: the ops the trace recorded inside it (the node's
   ``Subgraph``) are converted in its place, unless ``autograd_inlining=False`` or an
   enabled fallback (ONNX_FALLTHROUGH, ONNX_ATEN_FALLBACK) keeps Functions as one node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from oxport import OpPack
from oxport.context import GraphContext
from oxport.errors import OnnxExporterError, SymbolicDeclined
from oxport.ir import Type, Value
from oxport.walk import ts_attributes

pack = OpPack("oxport.autograd")
_OP = "prim::PythonOp"


@pack.arguments(_OP)
def python_op_arguments(node: torch._C.Node,
                        inputs: Sequence[Value | None]) -> tuple[list[Any], dict[str, Any]]:
    """A ``prim::PythonOp``'s call arguments, for every symbolic of the op: its Function's
    arguments as it got them (the non-tensor ones, Python values, in their places among
    the tensor inputs), and its attributes with ``name=``, the Function's class name."""
    scalars, tensors = iter(node.scalar_args()), iter(inputs)
    args = [next(scalars) if conv == "c" else next(tensors) for conv in node.cconv()]
    return args, {**ts_attributes(node), "name": node.pyname()}


@pack.symbolic(_OP, since=7)
def python_op(g: GraphContext, *args: Any, name: str = "", **_attrs: Any) -> Any:
    """PythonOp(...) -> ...

    An autograd Function: its static ``symbolic`` method, else its inlined forward."""
    node = g.original_node
    function = getattr(node.pyobj(), "__self__", None)
    symbolic = getattr(function, "symbolic", None)
    if symbolic is not None:
        return symbolic(g, *args)
    if not g.autograd_inlining:
        raise SymbolicDeclined(_OP, f"the autograd Function {name} has no static symbolic "
                                    "method and autograd_inlining=False")
    keeper = g.fallback_keeping_autograd_functions()
    if keeper is not None:
        raise SymbolicDeclined(_OP, f"the {keeper!r} fallback keeps the autograd Function "
                                    f"{name} as one node")
    if not node.hasAttribute("Subgraph"):  # scripted code calls the Function as Python
        raise SymbolicDeclined(_OP, f"no graph of the forward of {name} was recorded (only a "
                                    "trace records it; scripted code calls it as Python): "
                                    "give it a static symbolic method, or trace the model")
    return _inline(g, node, args, name)


def _inline(g: GraphContext, node: torch._C.Node, args: tuple[Any, ...], name: str) -> Any:
    subgraph = node.g("Subgraph").copy()
    torch._C._jit_pass_dce(subgraph)
    inputs = [g.value_of(v) for v in node.inputs()]
    if len(list(subgraph.inputs())) != len(inputs):
        raise SymbolicDeclined(_OP, f"the recorded forward of {name} does not take the "
                                    "Function's tensor inputs")
    order = _output_order(node, subgraph, args, name)
    outputs = g.convert_subgraph(subgraph, inputs)
    ordered = tuple(outputs[i] for i in order)
    return ordered[0] if len(ordered) == 1 else ordered


def _output_order(node: torch._C.Node, subgraph: torch._C.Graph, args: tuple[Any, ...],
                  name: str) -> list[int]:
    """For each output of the Function, the index of the recorded graph's output holding it.

    The trace lists the recorded outputs in the order the forward computed them, not the
    order it returned them: match them by type, or when types repeat, by running both.
    """
    wanted = [_type_key(v) for v in node.outputs()]
    recorded = [_type_key(v) for v in subgraph.outputs()]
    if len(wanted) != len(recorded):
        raise SymbolicDeclined(_OP, f"the forward of {name} returns {len(wanted)} values but "
                                    f"the trace recorded {len(recorded)} (it returns an input "
                                    "or one value twice): give it a static symbolic method")
    if len(wanted) == 1:
        return [0]
    if len(set(wanted)) == len(wanted) and sorted(wanted, key=str) == sorted(recorded, key=str):
        return [recorded.index(key) for key in wanted]
    return _probe_order(node, subgraph, args, name)


def _type_key(value: torch._C.Value) -> tuple[Any, ...]:
    type_ = Type.of(value.type())
    return type_.kind(), type_.dtype(), type_.shape


def _probe_order(node: torch._C.Node, subgraph: torch._C.Graph, args: tuple[Any, ...],
                 name: str) -> list[int]:
    probes = [_probe_tensor(v, name) for v in node.inputs()]
    feed = iter(probes)
    call_args = [next(feed) if isinstance(arg, Value) else arg for arg in args]
    probe_graph = subgraph.copy()
    probe_graph.makeMultiOutputIntoTuple()
    with torch.no_grad():
        expected = node.pyobj()(*call_args)
        recorded = torch._C._create_function_from_graph("oxport_probe", probe_graph)(*probes)
    expected = expected if isinstance(expected, tuple) else (expected,)
    recorded = recorded if isinstance(recorded, tuple) else (recorded,)
    order = []
    for want in expected:
        matches = [i for i, got in enumerate(recorded) if isinstance(got, torch.Tensor)
                   and got.shape == want.shape and got.dtype == want.dtype
                   and torch.equal(got, want)]
        if len(matches) != 1:
            raise OnnxExporterError(
                f"oxport cannot tell which value the trace recorded for each output of the "
                f"autograd Function {name}: give it a static symbolic method, or register a "
                "prim::PythonOp symbolic.")
        order.append(matches[0])
    return order


def _probe_tensor(value: torch._C.Value, name: str) -> torch.Tensor:
    type_ = Type.of(value.type())
    if type_.dtype() is None or type_.shape is None or \
            not all(isinstance(d, int) for d in type_.shape):
        raise OnnxExporterError(
            f"oxport cannot inline the autograd Function {name}: an input's type is not "
            "fully known. Give it a static symbolic method.")
    generator = torch.Generator().manual_seed(0)
    if type_.dtype().is_floating_point:
        return torch.rand(type_.shape, generator=generator).to(type_.dtype()) + 0.5
    return torch.ones(type_.shape, dtype=type_.dtype())


# -- cases: the Functions of the seeds -------------------------------------------------
class _ClampRelu(torch.autograd.Function):
    """The seeds' MyRelu: a static symbolic method."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def symbolic(g: GraphContext, input: Value) -> Value:
        return g.op("Clip", input, g.op("Constant", value_t=torch.tensor(0, dtype=torch.float)))


class _AbsAffine(torch.autograd.Function):
    """No symbolic: inlined to the ops its forward ran."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(input)
        return input.abs() * scale + input


class _TwoOutputs(torch.autograd.Function):
    """Two outputs of one type, returned in the reverse of the order they are computed."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        first = input.abs() + 1
        return first * 2, first


pack.case(_OP, lambda x: _ClampRelu.apply(x) + 1, (2, 3), name="static_symbolic", min_opset=11)
pack.case(_OP, lambda x: _AbsAffine.apply(x, 0.5), (2, 3), name="inlined",
          not_scriptable="no graph of the forward of _AbsAffine was recorded")
pack.case(_OP, lambda x: _TwoOutputs.apply(x), (2, 3), name="inlined_output_order")
