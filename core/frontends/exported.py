"""The torch.export front end: an ``ExportedProgram`` as the source-graph view.

A model is captured with ``torch.export.export`` (non-strict unless asked); an
``ExportedProgram`` is taken as it is. Its graph is then decomposed with torch's
decomposition table, except the ops an enabled pack serves at the target opset, which
stay whole (plugins first, decomposition second). Each FX node becomes a
:class:`~oxport.frontends.view.SourceNode` with its op's schema and every argument as
an input, exactly as TorchScript would give it, so the same symbolics serve it:

- SymInt arithmetic (``aten.sym_size.int``, ``operator.mul``...) becomes TorchScript's
  number ops (``aten::size``, ``aten::mul.int``...), computed at run time in ONNX;
- runtime asserts and range constraints are dropped;
- a value's symbolic dims are named after the ``torch.export.Dim`` (or the
  ``dynamic_axes`` name) they stand for.
"""

from __future__ import annotations

import inspect
import operator
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from oxport.errors import InvalidExportArgumentError, OnnxExporterError
from oxport.frontends.view import SourceBlock, SourceGraph, SourceNode, SourceValue, constant
from oxport.ir import Type
from oxport.types import JitScalarType

#: Python operators on SymInts -> TorchScript's number ops (same meaning on ints).
_SYM_OPERATORS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul",
    operator.floordiv: "floordiv", operator.truediv: "div", operator.mod: "remainder",
    operator.eq: "eq", operator.ne: "ne", operator.lt: "lt", operator.le: "le",
    operator.gt: "gt", operator.ge: "ge",
}
#: torch.sym_* functions -> (TorchScript kind, schema).
_SYM_FUNCTIONS = {
    torch.sym_max: ("prim::max", "prim::max.int(int a, int b) -> int"),
    torch.sym_min: ("prim::min", "prim::min.int(int a, int b) -> int"),
    torch.sym_not: ("aten::__not__", "aten::__not__(bool self) -> bool"),
    torch.sym_float: ("aten::Float", "aten::Float.Scalar(Scalar a) -> float"),
    torch.sym_int: ("aten::Int", "aten::Int.Scalar(Scalar a) -> int"),
    operator.neg: ("aten::neg", "aten::neg.int(int a) -> int"),
}
#: ATen ops the FX graph writes under another name than TorchScript does.
_RENAMED = {
    "aten::sym_size.int": "aten::size.int(Tensor self, int dim) -> int",
    "aten::sym_numel": "aten::numel(Tensor self) -> int",
    "aten::_local_scalar_dense": "aten::item(Tensor self) -> Scalar",
}
#: Checks torch.export records; ONNX Runtime checks shapes itself.
_DROPPED = re.compile(r"aten::(_assert_.*|_functional_assert_.*|sym_constrain_range.*|"
                      r"_print)$")
_MEMORY_FORMATS = {torch.contiguous_format: 0, torch.preserve_format: 1,
                   torch.channels_last: 2, torch.channels_last_3d: 3}
_LAYOUTS = {torch.strided: 0, torch.sparse_coo: 1}


def capture(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], *,
            dynamic_shapes: Any = None, strict: bool = False
            ) -> torch.export.ExportedProgram:
    """``torch.export.export`` with oxport's errors: a capture that fails says so."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return torch.export.export(model, args, kwargs=kwargs or None,
                                       dynamic_shapes=dynamic_shapes, strict=strict)
    except Exception as exc:  # noqa: BLE001 - torch.export's own errors, chained
        raise OnnxExporterError(
            f"torch.export could not capture {type(model).__name__}: {type(exc).__name__}: "
            f"{exc}\nExport with dynamo=False (the TorchScript front end) instead, or fix the "
            "model where torch.export points.") from exc


def dynamic_shapes_from_axes(model: torch.nn.Module, args: tuple[Any, ...],
                             kwargs: dict[str, Any], dynamic_axes: Mapping[str, Any],
                             input_names: Sequence[str] | None
                             ) -> tuple[dict[str, Any], dict[tuple[int, int], str]]:
    """torch.onnx's ``dynamic_axes`` as torch.export's ``dynamic_shapes`` (by parameter
    name), and the names the axes get: ``{(input leaf index, axis): name}``.

    As on the TorchScript path, the keys name the flat tensor inputs: ``input_names``, else
    the parameter names (``hidden.0`` for the first tensor of a tuple ``hidden``)."""
    from oxport.trace import _leaf_paths

    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
    except (TypeError, ValueError) as exc:
        raise InvalidExportArgumentError(
            f"args do not match {type(model).__name__}.forward: {exc}") from None
    leaves = pytree.tree_leaves((args, kwargs))
    paths = _leaf_paths(args, kwargs, model.forward)
    tensor_slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    names = list(input_names or [])
    by_tensor: dict[int, dict[int, Any]] = {}
    axis_names: dict[tuple[int, int], str] = {}
    for position, slot in enumerate(tensor_slots):
        key = names[position] if position < len(names) else paths[slot]
        spec = dynamic_axes.get(key)
        if spec is None:
            continue
        tensor = leaves[slot]
        pairs = (spec.items() if isinstance(spec, Mapping)
                 else [(axis, f"{key}_dynamic_axes_{i + 1}") for i, axis in enumerate(spec)])
        for axis, name in pairs:
            axis %= max(tensor.dim(), 1)
            by_tensor.setdefault(id(tensor), {})[axis] = torch.export.Dim.DYNAMIC
            axis_names[(slot, axis)] = str(name)
    shapes = {param: pytree.tree_map(
        lambda leaf: by_tensor.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None, value)
        for param, value in bound.items()}
    return shapes, axis_names


def dim_names(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              dynamic_shapes: Any) -> dict[tuple[int, int], str]:
    """The names a ``dynamic_shapes`` gives: ``{(flat input index, axis): Dim name}``."""
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, Mapping) and isinstance(model, torch.nn.Module):
        try:
            bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
        except (TypeError, ValueError):
            return {}
        pairs = [(value, dynamic_shapes.get(name)) for name, value in bound.items()]
    else:
        pairs = list(zip((*args, *kwargs.values()), dynamic_shapes))
    names: dict[tuple[int, int], str] = {}
    index = 0
    for value, spec in pairs:
        leaves = pytree.tree_leaves(value)
        if isinstance(value, torch.Tensor) and spec is not None:
            items = spec.items() if isinstance(spec, Mapping) else enumerate(spec)
            for axis, dim in items:
                name = getattr(dim, "__name__", None)
                if isinstance(name, str):
                    names[(index, axis % value.dim())] = name
        index += len(leaves)
    return names


def served_ops(registry: Any, opset: int) -> set[str]:
    """The qualified names (``aten::conv2d``, ``aten::max.other``) a symbolic serves at
    ``opset``."""
    return {name for name in registry.names() if registry.lookup(name, opset) is not None}


def decompose(program: torch.export.ExportedProgram, served: set[str]
              ) -> torch.export.ExportedProgram:
    """Decompose with torch's default table, keeping whole every op a pack serves."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        name = op._schema.name
        overload = f"{name}.{op._schema.overload_name}"
        if name in served or overload in served:
            del table[op]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return program.run_decompositions(table)


class _Reader:
    """Builds the source-graph view of one ExportedProgram's graph."""

    def __init__(self, program: torch.export.ExportedProgram,
                 axis_names: Mapping[tuple[int, int], str]) -> None:
        self.program = program
        self.env: dict[torch.fx.Node, Any] = {}
        self.symbols: dict[str, str] = {}
        self._axis_names = axis_names

    # -- types ------------------------------------------------------------------
    def dim(self, size: Any) -> int | str | None:
        if isinstance(size, int):
            return size
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if expr.is_number:
                return int(expr)
            text = str(expr)
            return self.symbols.get(text, text)
        return None

    def type_of(self, example: Any) -> Type:
        if isinstance(example, torch.Tensor):
            return Type("TensorType", example.dtype, tuple(self.dim(d) for d in example.shape))
        if isinstance(example, (bool, torch.SymBool)):
            return Type("BoolType", torch.bool, ())
        if isinstance(example, (int, torch.SymInt)):
            return Type("IntType", torch.int64, ())
        if isinstance(example, (float, torch.SymFloat)):
            return Type("FloatType", torch.float32, ())
        if isinstance(example, (list, tuple)):
            return Type("ListType", elem=self.type_of(example[0]) if example else Type())
        return Type.of(example)

    # -- the graph --------------------------------------------------------------
    def read(self) -> tuple[SourceGraph, list[Any], list[str], list[tuple[str, torch.Tensor]],
                            list[str]]:
        """The view, the example user inputs, their names, the parameters, notes."""
        program = self.program
        signature = program.graph_signature
        kinds = torch.export.graph_signature.InputKind
        placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
        user, params = [], []
        for node, spec in zip(placeholders, signature.input_specs):
            if spec.kind == kinds.USER_INPUT:
                user.append(node)
            elif spec.kind in (kinds.PARAMETER, kinds.BUFFER, kinds.CONSTANT_TENSOR):
                tensor = (program.constants[spec.target] if spec.target in program.constants
                          else program.state_dict[spec.target])
                params.append((node, spec.target, tensor))
            else:
                raise OnnxExporterError(
                    f"The exported program has a {spec.kind.name} input ({spec.target}), which "
                    "ONNX cannot hold; export with dynamo=False.")
        for index, node in enumerate(user):
            example = node.meta.get("val")
            if isinstance(example, torch.Tensor):
                for axis, size in enumerate(example.shape):
                    name = self._axis_names.get((index, axis))
                    if name and isinstance(size, torch.SymInt) and not size.node.expr.is_number:
                        self.symbols.setdefault(str(size.node.expr), name)
        graph = SourceGraph()
        tensors, names, examples = [], [], []
        for node in user:
            example = node.meta.get("val")
            if isinstance(example, torch.Tensor):
                value = SourceValue(node.name, self.type_of(example))
                tensors.append(value)
                names.append(node.name)
                examples.append(example)
                self.env[node] = value
            else:  # a number or None: torch.export specialized the graph on it
                self.env[node] = constant(graph, example, self.type_of(example), node.name)
        param_values = []
        for node, target, tensor in params:
            value = SourceValue(node.name, Type.of(tensor))
            param_values.append(value)
            self.env[node] = value
        graph._inputs = tensors + param_values
        notes: list[str] = []
        for node in program.graph.nodes:
            if node.op == "call_function":
                self.call(graph, node)
            elif node.op == "output":
                graph.set_outputs(self.outputs(graph, node, notes))
            elif node.op != "placeholder":
                raise OnnxExporterError(
                    f"The exported graph has a {node.op} node ({node.name}), which oxport cannot "
                    "read yet; export with dynamo=False.")
        return graph, examples, names, [(t, tensor) for _, t, tensor in params], notes

    def outputs(self, graph: SourceGraph, node: torch.fx.Node, notes: list[str]
                ) -> list[SourceValue]:
        kinds = torch.export.graph_signature.OutputKind
        results = []
        for spec, arg in zip(self.program.graph_signature.output_specs, node.args[0]):
            if spec.kind != kinds.USER_OUTPUT:
                continue  # a buffer or input written in place: ONNX models have no state
            if arg is None:
                continue
            results.append(self.argument(graph, arg, None))
        return results

    def call(self, graph: SourceGraph, node: torch.fx.Node) -> None:
        target = node.target
        if target is operator.getitem:
            self.env[node] = self.env[node.args[0]][node.args[1]]
            return
        if isinstance(target, torch._ops.OpOverload):
            name = target._schema.name
            overload = f"{name}.{target._schema.overload_name}" if \
                target._schema.overload_name else name
            if _DROPPED.match(name):
                return
            schema = _RENAMED.get(overload) or _RENAMED.get(name) or str(target._schema)
            kind = schema.partition("(")[0].partition(".")[0]
            arguments = torch._C.parse_schema(schema).arguments if schema != str(
                target._schema) else target._schema.arguments
            inputs = self.schema_inputs(graph, node, arguments)
            self.emit(graph, node, kind, schema, inputs, target._schema.returns)
            return
        if target in _SYM_OPERATORS:
            numbers = [a for a in node.args]
            suffix = "float" if any(isinstance(self._example(a), (float, torch.SymFloat))
                                    for a in numbers) else "int"
            op = _SYM_OPERATORS[target]
            returns = "float" if op == "div" else (
                "bool" if op in ("eq", "ne", "lt", "le", "gt", "ge") else suffix)
            schema = f"aten::{op}.{suffix}({suffix} a, {suffix} b) -> {returns}"
            inputs = [self.argument(graph, a, None) for a in numbers]
            self.emit(graph, node, f"aten::{op}", schema, inputs, None)
            return
        if target in _SYM_FUNCTIONS:
            kind, schema = _SYM_FUNCTIONS[target]
            inputs = [self.argument(graph, a, None) for a in node.args]
            self.emit(graph, node, kind, schema, inputs, None)
            return
        # Anything else is reported as unconvertible, with its source line.
        qualified = getattr(target, "__qualname__", None) or getattr(target, "__name__", str(target))
        module = getattr(target, "__module__", None) or "python"
        inputs = [self.argument(graph, a, None) for a in node.args
                  if isinstance(a, torch.fx.Node)]
        self.emit(graph, node, f"{module.replace('.', '_')}::{qualified}", "(no schema)",
                  inputs, None)

    def _example(self, arg: Any) -> Any:
        return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg

    def schema_inputs(self, graph: SourceGraph, node: torch.fx.Node,
                      arguments: Sequence[Any]) -> list[SourceValue]:
        """Every argument of the schema in order, defaults filled in, as TorchScript has."""
        inputs = []
        for index, argument in enumerate(arguments):
            if index < len(node.args) and not argument.kwarg_only:
                value = node.args[index]
            elif argument.name in node.kwargs:
                value = node.kwargs[argument.name]
            elif argument.has_default_value():
                value = argument.default_value
            else:
                value = None
            inputs.append(self.argument(graph, value, argument.type))
        return inputs

    def argument(self, graph: SourceBlock, value: Any, schema_type: Any) -> SourceValue:
        """An FX argument as a source value: a node's value, or a constant / list node."""
        if isinstance(value, torch.fx.Node):
            result = self.env.get(value)
            if result is None:
                raise OnnxExporterError(
                    f"Internal error: the exported graph uses {value.name} before it is made.")
            return result
        if isinstance(value, (list, tuple)) and any(
                isinstance(item, torch.fx.Node) for item in value):
            item_type = _element_type(schema_type)
            items = [self.argument(graph, item, item_type) for item in value]
            list_type = Type("ListType", elem=_list_element(items, item_type))
            node = graph.append(SourceNode("prim::ListConstruct", "(no schema)", items,
                                           [list_type], names=["list"]))
            return node.output()
        python = _python_value(value)
        return constant(graph, python, _constant_type(python, schema_type))

    def emit(self, graph: SourceGraph, node: torch.fx.Node, kind: str, schema: str,
             inputs: list[SourceValue], returns: Sequence[Any] | None) -> None:
        example = node.meta.get("val")
        source = _stack(node.meta.get("stack_trace"))
        scope = _scope(node.meta.get("nn_module_stack"))
        is_list = returns is not None and len(returns) == 1 and \
            returns[0].type.kind() == "ListType"
        multiple = returns is not None and len(returns) > 1
        if multiple:
            examples = list(example) if isinstance(example, (list, tuple)) else [example]
            types = [self.type_of(e) for e in examples]
        elif returns is not None and not returns:
            types = []
        else:
            types = [self.type_of(example)]
        made = graph.append(SourceNode(kind, schema, inputs, types, names=[node.name],
                                       source=source, scope=scope))
        if is_list and isinstance(example, (list, tuple)):
            unpack = graph.append(SourceNode(
                "prim::ListUnpack", "(no schema)", [made.output()],
                [self.type_of(e) for e in example],
                names=[f"{node.name}.{i}" for i in range(len(example))],
                source=source, scope=scope))
            self.env[node] = unpack.outputs()
        elif multiple:
            self.env[node] = made.outputs()
        elif types:
            self.env[node] = made.output()


def _element_type(schema_type: Any) -> Any:
    if schema_type is None:
        return None
    if schema_type.kind() == "OptionalType":
        schema_type = schema_type.getElementType()
    return schema_type.getElementType() if schema_type.kind() == "ListType" else None


def _list_element(items: Sequence[SourceValue], item_type: Any) -> Type:
    if item_type is not None:
        return Type.of(item_type)
    return items[0].type() if items else Type()


def _python_value(value: Any) -> Any:
    """An FX constant argument as TorchScript holds it (dtypes and layouts as numbers)."""
    if isinstance(value, torch.dtype):
        return int(JitScalarType.from_dtype(value))
    if isinstance(value, torch.memory_format):
        return _MEMORY_FORMATS.get(value, 0)
    if isinstance(value, torch.layout):
        return _LAYOUTS.get(value, 0)
    if isinstance(value, (list, tuple)):
        return [_python_value(v) for v in value]
    return value


def _constant_type(value: Any, schema_type: Any) -> Type:
    if value is None:
        return Type("NoneType")
    if isinstance(value, list) and not value and schema_type is not None:
        inner = schema_type.getElementType() if schema_type.kind() == "OptionalType" \
            else schema_type
        return Type.of(inner)
    return Type.of(value)


def _stack(trace: str | None) -> str:
    """An FX stack trace as a source range: its frames, innermost first."""
    if not trace:
        return ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', trace)
    return "\n".join(f"{path}({line}): {fn}" for path, line, fn in reversed(frames))


def _scope(stack: Mapping[str, tuple[str, Any]] | None) -> str:
    """``nn_module_stack`` as a TorchScript scope name (``__module.model.a/...a.b``)."""
    if not stack:
        return ""
    paths = [path for path, _type in stack.values() if isinstance(path, str) and path]
    return "/".join(f"__module.model.{path}" for path in paths)


def read(program: torch.export.ExportedProgram,
         axis_names: Mapping[tuple[int, int], str] | None = None) -> Any:
    """The front end of ``program`` (already decomposed): a FrontEnd whose graph is the
    source-graph view."""
    from oxport.trace import FrontEnd

    graph, examples, names, params, notes = _Reader(program, axis_names or {}).read()
    return FrontEnd(graph, examples, names, params, [], notes)
