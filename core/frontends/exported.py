"""The torch.export front end: an ``ExportedProgram`` as the source-graph view.

A model is captured with ``torch.export.export`` (:mod:`oxport.frontends.capture`); an
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

import functools
import math
import operator
import re
import warnings
from collections.abc import Container, Mapping, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from oxport.errors import (
    OnnxExporterError,
    front_end,
    user_stacklevel,
)
from oxport.frontends import size_guards
from oxport.frontends.base import FrontEnd
from oxport.frontends.view import (
    SourceBlock,
    SourceGraph,
    SourceNode,
    SourceValue,
    constant,
)
from oxport.ir import Type
from oxport.types import JitScalarType

#: Python operators on SymInts and SymFloats -> TorchScript's number ops (same meaning).
_SYM_OPERATORS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul",
    operator.floordiv: "floordiv", operator.truediv: "div", operator.mod: "remainder",
    operator.pow: "pow", operator.eq: "eq", operator.ne: "ne", operator.lt: "lt",
    operator.le: "le", operator.gt: "gt", operator.ge: "ge",
}
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
#: torch.sym_* functions -> (TorchScript kind, schema).
_SYM_FUNCTIONS = {
    torch.sym_max: ("prim::max", "prim::max.int(int a, int b) -> int"),
    torch.sym_min: ("prim::min", "prim::min.int(int a, int b) -> int"),
    torch.sym_not: ("aten::__not__", "aten::__not__(bool self) -> bool"),
    operator.and_: ("aten::__and__", "aten::__and__.bool(bool a, bool b) -> bool"),
    operator.or_: ("aten::__or__", "aten::__or__.bool(bool a, bool b) -> bool"),
    torch.sym_float: ("aten::Float", "aten::Float.Scalar(Scalar a) -> float"),
    torch.sym_int: ("aten::Int", "aten::Int.Scalar(Scalar a) -> int"),
    operator.neg: ("aten::neg", "aten::neg.int(int a) -> int"),
    math.ceil: ("aten::ceil", "aten::ceil.float(float a) -> int"),
    math.floor: ("aten::floor", "aten::floor.float(float a) -> int"),
    math.trunc: ("aten::Int", "aten::Int.float(float a) -> int"),
    torch._sym_sqrt: ("aten::sqrt", "aten::sqrt.float(float a) -> float"),
    torch.sym_ite: ("aten::where",
                    "aten::where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor"),
}
#: ATen ops the FX graph writes under another name than TorchScript does.
_RENAMED = {
    "aten::sym_size.int": "aten::size.int(Tensor self, int dim) -> int",
    "aten::sym_numel": "aten::numel(Tensor self) -> int",
    "aten::_local_scalar_dense": "aten::item(Tensor self) -> Scalar",
    "aten::lift_fresh_copy": "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) "
                             "-> Tensor",
}
#: A size's symbol in torch.export's expressions: ``s95`` (backed), ``u0`` (unbacked).
_SIZE_SYMBOL = re.compile(r"\b[su]\d+\b")
#: Checks torch.export records; ONNX Runtime checks shapes itself.
_DROPPED = re.compile(r"aten::(_assert_.*|_functional_assert_.*|sym_constrain_range.*|"
                      r"_print)$")
#: The trip count TorchScript gives a while loop (no limit).
_WHILE_TRIPS = 2**63 - 1
#: torch.export's functional forms of a mutating custom op.
_FUNCTIONALIZED = (torch.ops.higher_order.auto_functionalized,
                   torch.ops.higher_order.auto_functionalized_v2)
#: Higher-order ops that only wrap a subgraph -> the position of that subgraph in their
#: arguments (its inputs follow it).
_WRAPPERS = {torch.ops.higher_order.wrap_with_set_grad_enabled: 1,
             torch.ops.higher_order.wrap_with_autocast: 4}
_MEMORY_FORMATS = {torch.contiguous_format: 0, torch.preserve_format: 1,
                   torch.channels_last: 2, torch.channels_last_3d: 3}
_LAYOUTS = {torch.strided: 0, torch.sparse_coo: 1}


class ServedOps(Container[str]):
    """The qualified names (``aten::conv2d``, ``aten::max.other``) a symbolic serves at an
    opset, each looked up when asked about (so a pack that loads on demand loads only for
    the ops a model has)."""

    def __init__(self, registry: Any, opset: int) -> None:
        self.registry, self.opset = registry, opset

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.registry.lookup(name, self.opset) is not None


def decompose(program: torch.export.ExportedProgram, served: Container[str]
              ) -> torch.export.ExportedProgram:
    """Decompose with torch's default table, keeping whole every op a pack serves.

    A graph whose ops are all served is read as captured, in-place ops and views
    included (the walker writes them through as it does TorchScript's): decomposing it
    would retrace the whole model for nothing."""
    if not _unserved(program, served):
        return program
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        name = op._schema.name
        overload = f"{name}.{op._schema.overload_name}"
        if name in served or overload in served:
            del table[op]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return program.run_decompositions(table)


def _unserved(program: torch.export.ExportedProgram, served: Container[str]) -> bool:
    """Whether some ATen op of the graph (or of a subgraph) has no symbolic."""
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            schema = node.target._schema
            name, overload = schema.name, f"{schema.name}.{schema.overload_name}"
            if not (_DROPPED.match(name) or overload in _RENAMED or name in _RENAMED
                    or name in served or overload in served):
                return True
    return False


class _Reader:
    """Builds the source-graph view of one ExportedProgram's graph."""

    def __init__(self, program: torch.export.ExportedProgram,
                 axis_names: Mapping[tuple[int, int], str], prefix: str,
                 input_names: Sequence[str] = ()) -> None:
        self.program = program
        self._input_names = list(input_names)
        self.env: dict[torch.fx.Node, Any] = {}
        self.symbols: dict[str, str] = {}
        self._axis_names = axis_names
        self._prefix = prefix
        #: Nodes only the dropped runtime asserts read, and the graphs searched for them.
        self._checks_only: set[torch.fx.Node] = set()
        self._checked_graphs: set[torch.fx.Graph] = set()

    # -- types ------------------------------------------------------------------
    def dim(self, size: Any) -> int | str | None:
        if isinstance(size, int):
            return size
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if expr.is_number:
                return int(expr)
            text = str(expr)
            if text in self.symbols:
                return self.symbols[text]
            # an expression of sizes (2*s95): each symbol by its name (2*n), as torch.onnx
            return _SIZE_SYMBOL.sub(lambda m: self.symbols.get(m.group(), m.group()), text)
        return None

    def typed(self, value: SourceValue, example: Any) -> SourceValue:
        """``value`` with the example's sizes as its traced sizes, when a dim is symbolic."""
        if isinstance(example, torch.Tensor) and any(
                isinstance(size, torch.SymInt) for size in example.shape):
            value.set_traced_sizes([_example_size(size) for size in example.shape])
        return value

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
                params.append((node, spec.target.removeprefix(self._prefix), tensor))
            else:
                raise OnnxExporterError(
                    f"The exported program has a {spec.kind.name} input ({spec.target}), which "
                    f"ONNX cannot hold; export {front_end(False)}.")
        fixed = []
        for index, node in enumerate(user):
            example = node.meta.get("val")
            if isinstance(example, torch.Tensor):
                for axis, size in enumerate(example.shape):
                    name = self._axis_names.get((index, axis))
                    if isinstance(size, torch.SymInt) and not size.node.expr.is_number:
                        # A Dim's name, else the first input axis the symbol sizes.
                        self.symbols.setdefault(str(size.node.expr),
                                                name or f"{node.name}_dim_{axis}")
                    elif name:
                        label = self._input_names[index] if index < len(
                            self._input_names) else node.name
                        fixed.append(f"{label} axis {axis} ({name!r}) = {int(size)}")
        if fixed:
            warnings.warn(
                "oxport: torch.export fixed dynamic axes the model's code makes static: "
                + "; ".join(fixed) + ". The ONNX model only works at these sizes.",
                UserWarning, stacklevel=user_stacklevel())
        graph = SourceGraph()
        tensors, names, examples = [], [], []
        for node in user:
            example = node.meta.get("val")
            if isinstance(example, torch.Tensor):
                value = self.typed(SourceValue(node.name, self.type_of(example)), example)
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
            if node.op == "output":
                graph.set_outputs(self.outputs(graph, node, notes))
            elif node.op != "placeholder":
                self.read_node(graph, node, program.graph_module)
        return graph, examples, names, [(t, tensor) for _, t, tensor in params], notes

    def read_node(self, block: SourceBlock, node: torch.fx.Node, owner: torch.nn.Module
                  ) -> None:
        if node.graph not in self._checked_graphs:
            self._checked_graphs.add(node.graph)
            self._checks_only |= _feeding_checks_only(node.graph)
        if node in self._checks_only:
            return
        if node.op == "call_function":
            self.call(block, node)
        elif node.op == "get_attr":  # a higher-order op's subgraph
            self.env[node] = getattr(owner, node.target)
        else:
            raise OnnxExporterError(
                f"The exported graph has a {node.op} node ({node.name}), which oxport cannot "
                f"read; export {front_end(False)}.")

    def inline(self, block: SourceBlock, module: torch.fx.GraphModule,
               inputs: Sequence[SourceValue]) -> list[SourceValue]:
        """``module``'s graph read into ``block``, its placeholders standing for ``inputs``;
        returns its outputs."""
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise OnnxExporterError(
                f"Internal error: a subgraph takes {len(placeholders)} inputs, got {len(inputs)}.")
        self.env.update(zip(placeholders, inputs))
        outputs: list[SourceValue] = []
        for node in module.graph.nodes:
            if node.op == "output":
                outputs = [self.argument(block, arg, None)
                           for arg in pytree.tree_leaves(node.args[0])]
            elif node.op != "placeholder":
                self.read_node(block, node, module)
        return outputs

    def higher_order(self, block: SourceBlock, node: torch.fx.Node) -> bool:
        """torch.cond as TorchScript's ``prim::If``, while_loop as ``prim::Loop``, scan and
        map as ``higher_order::`` nodes with a block; grad-mode and autocast wrappers inlined.
        False for another op."""
        target, args = node.target, node.args
        if target is torch.ops.higher_order.cond:
            predicate, true_module, false_module, operands = args
            condition = self.argument(block, predicate, None)
            operand_values = [self.argument(block, a, None) for a in operands]
            branches = []
            for module in (true_module, false_module):
                branch = SourceBlock()
                branch.set_outputs(self.inline(branch, self.env[module], operand_values))
                branches.append(branch)
            self.emit(block, node, "prim::If", "(no schema)", [condition], None,
                      blocks=branches)
            return True
        if target is torch.ops.higher_order.while_loop:
            cond_module, body_module, carried, extra = (self.env[args[0]], self.env[args[1]],
                                                        args[2], args[3])
            initial = [self.argument(block, a, None) for a in carried]
            outer = [self.argument(block, a, None) for a in extra]
            condition = self.inline(block, cond_module, [*initial, *outer])[0]
            iteration = SourceValue("iteration", Type("IntType", torch.int64, ()))
            body_inputs = [SourceValue(f"{p.name}.carried", self.type_of(p.meta.get("val")))
                           for p in body_module.graph.nodes if p.op == "placeholder"
                           ][:len(initial)]
            body = SourceBlock([iteration, *body_inputs])
            updated = self.inline(body, body_module, [*body_inputs, *outer])
            again = self.inline(body, cond_module, [*updated, *outer])[0]
            body.set_outputs([again, *updated])
            trips = constant(block, _WHILE_TRIPS, Type("IntType", torch.int64, ()))
            self.emit(block, node, "prim::Loop", "(no schema)", [trips, condition, *initial],
                      None, blocks=[body])
            return True
        if target in _FUNCTIONALIZED:
            self.functionalized(block, node)
            return True
        if target in (torch.ops.higher_order.scan, torch.ops.higher_order.map_impl):
            self.scan(block, node)
            return True
        wrapped = _WRAPPERS.get(target)
        if wrapped is not None:
            module, operands = self.env[args[wrapped]], args[wrapped + 1:]
            self.env[node] = self.inline(block, module,
                                         [self.argument(block, a, None) for a in operands])
            return True
        return False

    def scan(self, block: SourceBlock, node: torch.fx.Node) -> None:
        """``scan(combine, init, xs, additional_inputs)`` and ``map_impl(body, xs, args)`` as
        a ``higher_order::scan`` / ``higher_order::map_impl`` node taking the carried values,
        then the scanned tensors; its block takes the carried values and one item of each,
        and reads the extra inputs from outside (as ONNX subgraphs may). Attribute
        ``carried``: how many operands are carried."""
        if node.target is torch.ops.higher_order.scan:
            module, carried, scanned, extra = node.args
        else:
            (module, scanned, extra), carried = node.args, []
        module = self.env[module]
        operands = [self.argument(block, a, None) for a in (*carried, *scanned)]
        outer = [self.argument(block, a, None) for a in extra]
        placeholders = [p for p in module.graph.nodes if p.op == "placeholder"]
        inputs = [self.typed(SourceValue(f"{p.name}.item", self.type_of(p.meta.get("val"))),
                             p.meta.get("val")) for p in placeholders[:len(operands)]]
        body = SourceBlock(inputs)
        body.set_outputs(self.inline(body, module, [*inputs, *outer]))
        kind = f"higher_order::{node.target.__name__}"
        self.emit(block, node, kind, "(no schema)", operands, None, blocks=[body],
                  attributes={"carried": ("i", len(carried))})

    def functionalized(self, block: SourceBlock, node: torch.fx.Node) -> None:
        """``auto_functionalized(op, **arguments)`` (a mutating custom op, made functional)
        as the op itself, its mutated arguments read from their bases: the walker writes the
        new values its symbolic returns into them, and the node's outputs after the op's
        results are those arguments (v1) or the bases (v2), read after it."""
        op, arguments = node.args[0], node.kwargs
        bases = arguments.get("_all_bases")  # v2: each mutated argument is a whole base
        schema_arguments = op._schema.arguments
        if bases is not None:
            arguments = dict(arguments)
            for argument in schema_arguments:
                index = arguments.get(f"_{argument.name}_base_index")
                if any(key.startswith(f"_{argument.name}_") and not key.endswith("_base_index")
                       for key in arguments):
                    raise OnnxExporterError(
                        f"{op._schema.name} mutates {argument.name}, a view of another tensor "
                        f"(at {_user_line(node)}); "
                        "oxport writes whole tensors only: pass the tensor itself, or export "
                        f"{front_end(False)}.")
                if index is not None:
                    arguments[argument.name] = bases[index]
        written = bases if bases is not None else [
            arguments[a.name] for a in schema_arguments
            if a.alias_info is not None and a.alias_info.is_write]
        results = len(op._schema.returns)
        inputs = self.schema_inputs(block, (), arguments, schema_arguments)
        self.emit(block, node, op._schema.name, str(op._schema), inputs, op._schema.returns,
                  example=_first(node.meta.get("val"), results))
        made = self.env.pop(node, None)
        # An op returning nothing still has one (None) result slot before the written ones.
        outputs = [None] if results == 0 else made if isinstance(made, list) else [made]
        self.env[node] = [*outputs, *(self.argument(block, w, None) for w in written)]

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

    def call(self, graph: SourceBlock, node: torch.fx.Node) -> None:
        target = node.target
        if target is operator.getitem:
            self.env[node] = self.env[node.args[0]][node.args[1]]
            return
        if isinstance(target, torch._ops.HigherOrderOperator) and self.higher_order(graph, node):
            return
        if isinstance(target, torch._ops.OpOverload):
            name = target._schema.name
            overload = f"{name}.{target._schema.overload_name}" if \
                target._schema.overload_name else name
            schema = _RENAMED.get(overload) or _RENAMED.get(name) or str(target._schema)
            kind = schema.partition("(")[0].partition(".")[0]
            arguments = torch._C.parse_schema(schema).arguments if schema != str(
                target._schema) else target._schema.arguments
            inputs = self.schema_inputs(graph, node.args, node.kwargs, arguments)
            self.emit(graph, node, kind, schema, inputs, target._schema.returns)
            return
        if target in _SYM_OPERATORS:
            op = _SYM_OPERATORS[target]
            types = [_number_type(self._example(a)) for a in node.args]
            suffix = "float" if "float" in types else "int"
            example = node.meta.get("val")
            if example is not None:
                returns = _number_type(example)
            elif op in _COMPARISONS:
                returns = "bool"
            else:
                returns = "float" if op in ("div", "pow") else suffix
            schema = (_pow_schema(*types, returns) if op == "pow" else
                      f"aten::{op}.{suffix}({suffix} a, {suffix} b) -> {returns}")
            inputs = [self.argument(graph, a, None) for a in node.args]
            self.emit(graph, node, f"aten::{op}", schema, inputs, None)
            return
        if target in _SYM_FUNCTIONS:
            kind, schema = _SYM_FUNCTIONS[target]
            inputs = [self.argument(graph, a, None) for a in node.args]
            self.emit(graph, node, kind, schema, inputs, None)
            return
        # Anything else is reported as unconvertible, with its source line.
        qualified = (getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
                     or str(target))
        module = getattr(target, "__module__", None) or "python"
        inputs = [self.argument(graph, a, None) for a in node.args
                  if isinstance(a, torch.fx.Node)]
        self.emit(graph, node, f"{module.replace('.', '_')}::{qualified}", "(no schema)",
                  inputs, None)

    def _example(self, arg: Any) -> Any:
        return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg

    def schema_inputs(self, graph: SourceGraph, args: Sequence[Any], kwargs: Mapping[str, Any],
                      arguments: Sequence[Any]) -> list[SourceValue]:
        """Every argument of the schema in order, defaults filled in, as TorchScript has."""
        inputs = []
        for index, argument in enumerate(arguments):
            if index < len(args) and not argument.kwarg_only:
                value = args[index]
            elif argument.name in kwargs:
                value = kwargs[argument.name]
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

    def emit(self, graph: SourceBlock, node: torch.fx.Node, kind: str, schema: str,
             inputs: list[SourceValue], returns: Sequence[Any] | None,
             blocks: Sequence[SourceBlock] = (),
             attributes: dict[str, tuple[str, Any]] | None = None, example: Any = None
             ) -> None:
        """``node`` as a source node of ``kind`` (typed by ``example``, else the node's own
        example value)."""
        example = node.meta.get("val") if example is None else example
        source = _stack(node.meta.get("stack_trace"))
        scope = _scope(node.meta.get("nn_module_stack"), self._prefix)
        is_list = returns is not None and len(returns) == 1 and \
            returns[0].type.kind() == "ListType"
        multiple = (returns is not None and len(returns) > 1) or (
            blocks and isinstance(example, (list, tuple)))
        if multiple:
            examples = list(example) if isinstance(example, (list, tuple)) else [example]
            types = [self.type_of(e) for e in examples]
        elif returns is not None and not returns:
            types = []
        else:
            types = [self.type_of(example)]
        made = graph.append(SourceNode(kind, schema, inputs, types, names=[node.name],
                                       source=source, scope=scope, blocks=blocks,
                                       attributes=attributes))
        if is_list and isinstance(example, (list, tuple)):
            unpack = graph.append(SourceNode(
                "prim::ListUnpack", "(no schema)", [made.output()],
                [self.type_of(e) for e in example],
                names=[f"{node.name}.{i}" for i in range(len(example))],
                source=source, scope=scope))
            self.env[node] = [self.typed(v, e) for v, e in zip(unpack.outputs(), example)]
        elif multiple:
            self.env[node] = [self.typed(v, e) for v, e in zip(made.outputs(), examples)]
        elif types:
            self.env[node] = self.typed(made.output(), example)


def _feeding_checks_only(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The nodes whose results only runtime asserts read (directly or through each other):
    the asserts are dropped, and so are they (``aten.sym_storage_offset`` of a slice, which
    ONNX has no meaning for, is one). Ops that write in place are kept."""
    dropped: set[torch.fx.Node] = set()
    for node in reversed(graph.nodes):
        if node.op != "call_function":
            continue
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and _DROPPED.match(target._schema.name):
            dropped.add(node)
        elif node.users and all(user in dropped for user in node.users) and (
                target in _SYM_OPERATORS or target in _SYM_FUNCTIONS
                or (isinstance(target, torch._ops.OpOverload) and not target._schema.is_mutable)):
            dropped.add(node)
    return dropped


def _number_type(example: Any) -> str:
    """The TorchScript number type of a SymInt, SymFloat or SymBool (or plain) value."""
    if isinstance(example, (bool, torch.SymBool)):
        return "bool"
    return "float" if isinstance(example, (float, torch.SymFloat)) else "int"


def _pow_schema(base: str, exponent: str, returns: str) -> str:
    """TorchScript's overload of ``a ** b`` on numbers of these types: an int to a
    natural power stays an int, every other power is a float."""
    if base == exponent == "int":
        overload = "int_to_int" if returns == "int" else "int"
    else:
        overload = "float" if base == exponent else f"{base}_{exponent}"
    return f"aten::pow.{overload}({base} a, {exponent} b) -> {returns}"


def _user_line(node: torch.fx.Node) -> str:
    """The innermost frame of a node's stack trace."""
    return _stack(node.meta.get("stack_trace")).partition("\n")[0] or "unknown"


def _first(example: Any, count: int) -> Any:
    """The op's own results in a functionalized op's example outputs."""
    if not isinstance(example, (list, tuple)):
        return example
    return None if count == 0 else example[0] if count == 1 else list(example[:count])


def _example_size(size: int | torch.SymInt) -> int | None:
    """A dim of an example: its size, a symbolic dim's example size (None if unbacked)."""
    if isinstance(size, int):
        return size
    hint = size.node.hint
    return int(hint) if hint is not None else None


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
    """An FX stack trace as a source range: its frames, innermost first, without the
    code torch.fx generated (a higher-order op's subgraph: the user's line is the call
    of ``torch.cond``, ``while_loop``...)."""
    if not trace:
        return ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', trace)
    return "\n".join(f"{path}({line}): {fn}" for path, line, fn in reversed(frames)
                     if not path.startswith("<eval_with_key>"))


def _scope(stack: Mapping[str, tuple[str, Any]] | None, prefix: str) -> str:
    """``nn_module_stack`` as a TorchScript scope name (``__module.model.a/...a.b``), the
    paths below the user's model (``prefix``, when oxport wrapped it for the capture); a
    module's repeated call (key ``...@1``) is ``a#1``, as the TorchScript front end names it."""
    if not stack:
        return ""
    calls = []
    for key, (path, _type) in stack.items():
        if not isinstance(path, str) or not path.startswith(prefix) or path == prefix:
            continue
        path = path.removeprefix(prefix)
        count = key.rpartition("@")[2] if "@" in key else ""
        if path:
            calls.append(f"__module.model.{path}" + (f"#{count}" if count.isdigit() else ""))
    return "/".join(calls)


def read(program: torch.export.ExportedProgram,
         axis_names: Mapping[tuple[int, int], str] | None = None, *,
         input_names: Sequence[str] | None = None, notes: Sequence[str] = (),
         output_names: Sequence[str | None] = (), prefix: str = "", runnable: bool = True
         ) -> Any:
    """The front end of ``program`` (already decomposed): a FrontEnd whose graph is the
    source-graph view. ``prefix`` is the path of the user's model in the captured module
    (``"model."`` when :func:`~oxport.frontends.capture.capture` wrapped it): parameter
    names and scopes drop it; ``output_names`` name the outputs
    (:attr:`~oxport.frontends.capture.Captured.output_names`).
    ``runnable``: whether the front end keeps the program to run it (``evaluate``, for
    ``find_mismatch``); an export drops it once read."""

    reader = _Reader(program, axis_names or {}, prefix, input_names or ())
    graph, examples, names, params, more = reader.read()
    assumed = list(dict.fromkeys([
        *_assumed_conditions(program, list(input_names or names)),
        *size_guards.branch_conditions(program, list(input_names or names)),
        *size_guards.user_bounds(program, list(input_names or names))]))
    if assumed:
        warnings.warn(
            "oxport: torch.export captured the model's code on a branch that holds only "
            "where " + "; ".join(assumed) + " (values of dynamic axes that the code "
            "tested or turned into Python numbers). The ONNX model cannot check them and is "
            "only right at sizes where they hold: capture at example sizes that take the "
            "general path (or, for code that tests torch.jit.is_tracing(), export "
            f"{front_end(False)}).", UserWarning, stacklevel=user_stacklevel())
    return FrontEnd(graph, examples, list(input_names or names), params, [],
                    [*notes, *more], output_names=list(output_names),
                    evaluate=(functools.partial(_evaluate, program, reader.env)
                              if runnable else None),
                    example_sizes=False)


#: A size in torch.export's guards: ``L['x'].size()[1]``, or ``L['tensors'][0].size()[1]``
#: for the inputs of the model :func:`~oxport.frontends.capture.capture` wraps.
_GUARDED_SIZE = re.compile(r"L\['(\w+)'\](?:\[(\d+)\])?\.size\(\)\[(\d+)\]")
_INTEGER = re.compile(r"-?\d+")


def _assumed_conditions(program: torch.export.ExportedProgram, input_names: Sequence[str]
                        ) -> list[str]:
    """The values torch.export pinned an expression of input sizes to, because the model's
    code branched on it (``if h * w == 16:``, ``int(n ** 0.5)``), with the sizes written
    ``name.shape[axis]``.

    Other guards are left out: sizes equal to each other or divisible by another (a
    broadcast, a reshape), which the ONNX model's own operators check at run time. The
    guards are ``ExportedProgram._guards_code``, which ``ExportedProgram.module()`` checks
    on every call."""
    def size(match: re.Match[str]) -> str:
        name, index, axis = match.groups()
        if index is not None and int(index) < len(input_names):
            name = input_names[int(index)]
        return f"{name}.shape[{axis}]"

    found = []
    for guard in getattr(program, "_guards_code", None) or ():
        sides = guard.split(" == ")
        if len(sides) != 2:
            continue
        expression, value = sorted(sides, key=lambda side: bool(_INTEGER.fullmatch(side)))
        if _INTEGER.fullmatch(value) and _GUARDED_SIZE.search(expression) and not (
                value == "0" and "%" in expression):
            found.append(_GUARDED_SIZE.sub(size, guard))
    return found


def _evaluate(program: torch.export.ExportedProgram, env: Mapping[torch.fx.Node, Any],
              tensors: Sequence[torch.Tensor]) -> dict[int, Any]:
    """Run ``program``'s graph on the user's ``tensors`` (its tensor inputs, in order) and
    return each top-level node's result by the ``unique()`` of the source value(s) read
    from it. Nodes read from inside a subgraph (an inlined wrapper's) get no value."""
    kinds = torch.export.graph_signature.InputKind
    state = {**program.state_dict, **program.constants}
    fed = iter(tensors)
    feeds = []
    for node, spec in zip(program.graph.find_nodes(op="placeholder"),
                          program.graph_signature.input_specs):
        if spec.kind != kinds.USER_INPUT:
            feeds.append(state[spec.target])
        elif isinstance(node.meta.get("val"), torch.Tensor):
            feeds.append(next(fed))
        else:  # a number torch.export specialized the graph on
            feeds.append(node.meta.get("val"))
    found: dict[int, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            result = super().run_node(node)
            read = env.get(node)
            if isinstance(read, SourceValue):
                found[read.unique()] = result
            elif isinstance(read, (list, tuple)) and isinstance(result, (list, tuple)):
                found.update((v.unique(), r) for v, r in zip(read, result)
                             if isinstance(v, SourceValue))
            return result

    with torch.no_grad():
        Recorder(program.graph_module).run(*feeds)
    return found
