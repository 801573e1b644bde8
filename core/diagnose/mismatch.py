"""``find_mismatch``: bisect the source graph to the smallest partitions whose
export differs from PyTorch (the seed's ``GraphInfo`` tree).

The model is traced (or, with ``dynamo=True``, captured with torch.export) once and its
graph run once, keeping every intermediate value: TorchScript runs a traced graph, torch.fx
the ExportedProgram's. A partition is a run of op nodes (constants and list constructions
follow the nodes that use them); its free values become graph inputs fed with the
computed values, it is exported with oxport's walker and run in ONNX Runtime, and
compared with the values PyTorch computed. Both front ends give the same view of their
graph (:mod:`oxport.frontends.view`), so partitions, the report and each node's source
line and module read the same from either.
"""

from __future__ import annotations

import collections
import warnings
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from oxport import api, serialize
from oxport.diagnose.verification import (
    VerificationOptions,
    compare,
    ort_session,
    run_ort,
)
from oxport.exporter import pipeline
from oxport.exporter.options import check_model, check_opset, check_training
from oxport.exporter.pretty import pretty
from oxport.exporter.result import ExportResult
from oxport.exporter.state import exporting, select_model_mode_for_export
from oxport.frontends import arguments
from oxport.frontends.base import FrontEnd
from oxport.frontends.view import (
    SourceBlock,
    SourceGraph,
    SourceNode,
    SourceValue,
    constant,
)
from oxport.ir import Type
from oxport.types import TrainingMode
from oxport.walk import source_of

#: Nodes that belong to whichever partition uses them (copied into each).
_FOLLOWERS = frozenset({"prim::Constant", "prim::ListConstruct"})
#: Types a value may have to cross a partition boundary (become a graph input).
_BOUNDARY_TYPES = frozenset({"TensorType", "IntType", "FloatType", "BoolType"})


class _Search:
    """What every partition of one :func:`find_mismatch` shares: the source graph, every
    intermediate value of one run of it, and the export options."""

    def __init__(self, front: FrontEnd, export_kwargs: dict[str, Any],
                 user_inputs: list[Any]) -> None:
        self.front = front
        self.graph = front.graph
        self.export_kwargs = export_kwargs
        self.nodes = list(self.graph.nodes())
        self.essential = [n for n in self.nodes if n.kind() not in _FOLLOWERS]
        #: Each node inside a block (an If branch, a Loop body) -> its top-level node.
        self.top: dict[Any, Any] = {}
        for node in self.nodes:
            self._enclose(node, node)
        inputs = list(self.graph.inputs())
        self.user_count = len(inputs) - len(front.params)
        self.params = {v.unique(): front.params[i - self.user_count]
                       for i, v in enumerate(inputs) if i >= self.user_count}
        self.values: dict[int, Any] = {}
        for value, example in zip(inputs, [*user_inputs, *(t for _, t in front.params)]):
            self.values[value.unique()] = example
        if front.evaluate is not None:
            self.values.update(front.evaluate(user_inputs))
        else:
            self._evaluate(user_inputs)

    def _enclose(self, node: Any, top: Any) -> None:
        for block in node.blocks():
            for inner in block.nodes():
                self.top[inner] = top
                self._enclose(inner, top)

    def outer(self, node: Any) -> Any:
        """The top-level node that is or holds ``node``."""
        return self.top.get(node, node)

    def _evaluate(self, user_inputs: list[Any]) -> None:
        """Run the TorchScript graph once, keeping a copy of every essential node's
        outputs."""
        copy = self.graph.copy()
        kept, originals = [], []
        copy_nodes = list(copy.nodes())
        if not copy_nodes:
            return
        with copy.insert_point_guard(copy_nodes[0]):
            none = copy.insertConstant(None)
        for node, twin in zip(self.nodes, copy_nodes):
            if node.kind() in _FOLLOWERS:
                continue
            for value, twin_value in zip(node.outputs(), twin.outputs()):
                if twin_value.type().kind() == "TensorType":
                    clone = copy.create("aten::clone", [twin_value, none])
                    clone.insertAfter(twin)
                    clone.output().setType(twin_value.type())
                    twin_value = clone.output()
                kept.append(twin_value)
                originals.append(value.unique())
        for value in kept:
            copy.registerOutput(value)
        count = len(list(self.graph.outputs()))
        inputs = [*user_inputs, *(t for _, t in self.front.params)]
        with torch.no_grad():
            results = torch._C._jit_interpret_graph(copy, tuple(inputs))
        if count + len(kept) == 1:
            results = (results,)
        self.values.update(zip(originals, list(results)[count:]))

    def partition(self, essential: list[Any]) -> tuple[FrontEnd, list[int]]:
        """The partition of ``essential`` nodes as a front end of its own, with the ids of
        its outputs (values that nodes outside it use)."""
        members = set(essential)
        pending = list(essential)
        while pending:
            for value in _used_values(pending.pop()):
                producer = value.node()
                if producer.kind() in _FOLLOWERS and producer not in self.top \
                        and producer not in members:
                    members.add(producer)
                    pending.append(producer)
        ordered = [n for n in self.nodes if n in members]
        defined = {o.unique() for n in ordered for o in n.outputs()}
        free: dict[int, torch._C.Value] = {}
        for node in ordered:
            for value in _used_values(node):
                if value.unique() not in defined:
                    free.setdefault(value.unique(), value)
        inside = set(essential)
        outputs = [o.unique() for n in essential for o in n.outputs()
                   if any(self.outer(u.user) not in inside for u in o.uses())]
        user_values = [v for v in free.values() if v.unique() not in self.params]
        param_values = [v for v in free.values() if v.unique() in self.params]
        inputs = [*user_values, *param_values]
        copy = _copy_script if isinstance(self.graph, torch._C.Graph) else _copy_source
        graph = copy(inputs, [self.values.get(v.unique()) for v in inputs], ordered, outputs)
        front = FrontEnd(graph, [self.values[v.unique()] for v in user_values],
                               [f"input_{i}" for i in range(len(user_values))],
                               [self.params[v.unique()] for v in param_values],
                               scripted=self.front.scripted,
                               example_sizes=self.front.example_sizes)
        return front, outputs

    def boundary_ok(self, upper: list[Any]) -> bool:
        """Whether every value ``upper`` hands to later nodes can be a graph input: of a
        tensor or number type, with its value known from the run."""
        inside = set(upper)
        for node in upper:
            for value in node.outputs():
                if any(self.outer(u.user) not in inside for u in value.uses()) and (
                        value.type().kind() not in _BOUNDARY_TYPES
                        or value.unique() not in self.values):
                    return False
        return True


def _copy_script(inputs: list[torch._C.Value], examples: list[Any],
                 nodes: list[torch._C.Node], outputs: list[int]) -> torch._C.Graph:
    """A TorchScript graph of ``nodes`` reading ``inputs``, returning ``outputs`` (ids)."""
    graph = torch._C.Graph()
    env: dict[int, torch._C.Value] = {}
    for value, example in zip(inputs, examples):
        # The computed value's type: scripted graphs leave intermediate dtypes unknown.
        env[value.unique()] = graph.addInput()
        env[value.unique()].setType(torch._C.TensorType.create_from_tensor(example)
                                    if isinstance(example, torch.Tensor) else value.type())
    for node in nodes:
        clone = graph.createClone(node, lambda v: env[v.unique()])
        graph.insertNode(clone)
        for value, twin in zip(node.outputs(), clone.outputs()):
            env[value.unique()] = twin
    for unique in outputs:
        graph.registerOutput(env[unique])
    return graph


def _copy_source(inputs: list[SourceValue], examples: list[Any], nodes: list[SourceNode],
                 outputs: list[int]) -> SourceGraph:
    """A source-graph view of ``nodes`` reading ``inputs``, returning ``outputs`` (ids)."""
    env: dict[int, SourceValue] = {}
    for value, example in zip(inputs, examples):
        # The computed value's type: a partition is exported at the sizes of the run.
        type_ = Type.of(example) if isinstance(example, torch.Tensor) else value.type()
        env[value.unique()] = SourceValue(value.debugName(), type_)
    graph = SourceGraph(list(env.values()))
    for node in nodes:
        _copy_source_node(graph, node, env)
    graph.set_outputs([env[unique] for unique in outputs])
    return graph


def _copy_source_node(block: SourceBlock, node: SourceNode, env: dict[int, SourceValue]
                      ) -> None:
    """Append a copy of ``node`` (its blocks too) to ``block``, its inputs looked up in
    ``env``, which then maps its outputs to the copies'."""
    if node.kind() == "prim::Constant":
        value = node.output()
        env[value.unique()] = constant(block, value.toIValue(), value.type(), value.debugName())
        return
    blocks = []
    for inner in node.blocks():
        copy = SourceBlock([SourceValue(v.debugName(), v.type()) for v in inner.inputs()])
        env.update(zip((v.unique() for v in inner.inputs()), copy.inputs()))
        for child in inner.nodes():
            _copy_source_node(copy, child, env)
        copy.set_outputs([env[v.unique()] for v in inner.outputs()])
        blocks.append(copy)
    attributes = {name: (node.kindOf(name), getattr(node, node.kindOf(name))(name))
                  for name in node.attributeNames()}
    made = block.append(SourceNode(
        node.kind(), node.schema(), [env[v.unique()] for v in node.inputs()],
        [v.type() for v in node.outputs()], names=[v.debugName() for v in node.outputs()],
        source=node.sourceRange(), scope=node.scopeName(), blocks=blocks,
        attributes=attributes))
    env.update(zip((v.unique() for v in node.outputs()), made.outputs()))


def _used_values(node: Any) -> list[Any]:
    """The values ``node`` (with its blocks) reads that are defined outside it."""
    inner: set[int] = set()
    used: list[torch._C.Value] = []

    def visit(n: Any) -> None:
        used.extend(n.inputs())
        for block in n.blocks():
            inner.update(v.unique() for v in block.inputs())
            for child in block.nodes():
                inner.update(v.unique() for v in child.outputs())
                visit(child)
            used.extend(block.outputs())

    visit(node)
    return list({v.unique(): v for v in used if v.unique() not in inner}.values())


class GraphInfo:
    """One partition of the source graph, its check, and its sub-partitions.

    ``id`` is ``""`` for the whole graph; the upper half of partition ``p`` is ``p+"0"``,
    the lower ``p+"1"``. ``mismatch_error`` holds what differed (or why the export
    failed), None when ONNX Runtime matched TorchScript.
    """

    def __init__(self, search: _Search, essential: list[Any], id: str = "") -> None:
        self._search = search
        self.essential_nodes = essential
        self.id = id
        front, self.output_values = search.partition(essential)
        #: The partition's source graph (TorchScript's, or the torch.export front end's
        #: view, :class:`~oxport.frontends.view.SourceGraph`).
        self.graph: Any = front.graph
        self.input_args = tuple(front.example_inputs)
        self.params_dict = dict(front.params)
        self._front = front
        self.pt_outs = [search.values[u] for u in self.output_values]
        self.onnx_outs: list[np.ndarray] | None = None
        self.export_result: ExportResult | None = None
        self.mismatch_error: str | None = None
        self.upper_graph_info: GraphInfo | None = None
        self.lower_graph_info: GraphInfo | None = None

    def __repr__(self) -> str:
        return (f"<GraphInfo {self.id or '(whole graph)'}: {self.essential_node_count()} "
                f"nodes, {'mismatch' if self.has_mismatch() else 'ok'}>")

    # -- checks -----------------------------------------------------------------------
    def verify_export(self, options: VerificationOptions) -> str | None:
        """Export this partition, run it in ONNX Runtime, compare with PyTorch's values."""
        self.mismatch_error = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.export_result = api.convert(self._front, None, check=False,
                                                 **self._search.export_kwargs)
            proto = self.export_result.model_proto
            names = [i.name for i in proto.graph.input][:len(self.input_args)]
            self.onnx_outs = run_ort(ort_session(proto), names, self.input_args)
        except Exception as exc:  # noqa: BLE001 - an export or runtime error is a finding too
            where = serialize.blame(self.export_result.serialized, str(exc)) \
                if self.export_result is not None else ""
            self.mismatch_error = f"{type(exc).__name__}: {exc}{where}"
            return self.mismatch_error
        names = [o.name for o in proto.graph.output]
        for name, expected, actual in zip(names, self.pt_outs, self.onnx_outs):
            result = compare(name, expected, actual, options)
            if not result.ok:
                self.mismatch_error = result.message
                break
        return self.mismatch_error

    def find_mismatch(self, options: VerificationOptions | None = None) -> None:
        """Check this partition; where it differs, split it and check both halves."""
        options = options or VerificationOptions()
        self.verify_export(options)
        if not self.has_mismatch() or self.essential_node_count() < 2:
            return
        split = self._split()
        if split is None:
            return
        self.upper_graph_info = GraphInfo(self._search, self.essential_nodes[:split],
                                          self.id + "0")
        self.lower_graph_info = GraphInfo(self._search, self.essential_nodes[split:],
                                          self.id + "1")
        self.upper_graph_info.find_mismatch(options)
        self.lower_graph_info.find_mismatch(options)

    def _split(self) -> int | None:
        """The split point nearest the middle whose boundary values can be graph inputs."""
        count = len(self.essential_nodes)
        middle = count // 2
        for offset in range(count):
            for split in (middle + offset, middle - offset):
                if 0 < split < count and \
                        self._search.boundary_ok(self.essential_nodes[:split]):
                    return split
        return None

    # -- queries ----------------------------------------------------------------------
    def has_mismatch(self) -> bool:
        return self.mismatch_error is not None

    def essential_node_count(self) -> int:
        return len(self.essential_nodes)

    def essential_node_kinds(self) -> set[str]:
        return {n.kind() for n in self.essential_nodes}

    def all_mismatch_leaf_graph_info(self) -> list[GraphInfo]:
        """The smallest partitions that differ (mismatching nodes without children)."""
        if not self.has_mismatch():
            return []
        if self.upper_graph_info is None or self.lower_graph_info is None:
            return [self]
        leaves = (self.upper_graph_info.all_mismatch_leaf_graph_info()
                  + self.lower_graph_info.all_mismatch_leaf_graph_info())
        return leaves or [self]

    def find_partition(self, id: str) -> GraphInfo | None:
        """The partition with this id, if the search created it."""
        if id == self.id:
            return self
        for child in (self.upper_graph_info, self.lower_graph_info):
            if child is not None and id.startswith(child.id):
                return child.find_partition(id)
        return None

    def mismatch_node_kinds(self) -> dict[str, int]:
        """How many mismatching leaves hold each op kind."""
        counts: collections.Counter[str] = collections.Counter()
        for leaf in self.all_mismatch_leaf_graph_info():
            counts.update(leaf.essential_node_kinds())
        return dict(counts)

    def provenance(self) -> list[str]:
        """For each node of this partition: its op, module, source line and the plugin
        whose symbolic (or fallback) converted it."""
        converted: dict[str, list[str]] = {}
        if self.export_result is not None:
            for entry in self.export_result.used:
                converted.setdefault(entry.name, []).append(
                    f"the symbolic from {entry.provenance}")
            for use in self.export_result.fallback_uses:
                converted.setdefault(use.kind, []).append(f"the {use.fallback!r} fallback")
        lines = []

        def describe(node: Any, depth: int) -> None:
            scope = trace_scope(node)
            where = source_of(node) or "an unknown line"
            by = " and ".join(dict.fromkeys(converted.get(node.kind(), []))) or \
                "no plugin (it failed to convert)"
            indent = "  " * depth + "inside: " if depth else ""
            lines.append(f"{indent}{node.kind()}{f' ({scope})' if scope else ''} at {where}, "
                         f"converted by {by}")
            for block in node.blocks():  # the ops inside an If or Loop
                for inner in block.nodes():
                    if inner.kind() not in _FOLLOWERS:
                        describe(inner, depth + 1)

        for node in self.essential_nodes:
            describe(node, 0)
        return lines

    # -- printing ---------------------------------------------------------------------
    def tree_text(self) -> str:
        """The seed's partition tree: node count, X or ✓, and id per partition."""
        return "\n".join(_tree_lines(self))

    def print_tree(self) -> None:
        print(self.tree_text())

    pretty_print_tree = print_tree

    def report(self, graph: bool = False) -> str:
        """The seed's mismatch report, then where each mismatching node came from."""
        out = [_banner(f"Mismatch info for graph partition {self.id}:")]
        if graph:
            out += ([_banner("TorchScript graph"), str(self.graph)]
                    if isinstance(self.graph, torch._C.Graph) else
                    [_banner("torch.export graph"), _source_text(self.graph)])
            if self.export_result is not None:
                out += [_banner("ONNX graph"), pretty(self.export_result.serialized)]
        if not self.has_mismatch():
            out += ["No mismatch found.", _banner("Tree:"), self.tree_text()]
            return "\n".join(out)
        leaves = self.all_mismatch_leaf_graph_info()
        out += [_banner("Mismatch error"), str(self.mismatch_error), _banner("Tree:"),
                self.tree_text(), _banner("Mismatch leaf subgraphs:"),
                str([leaf.id for leaf in leaves]), _banner("Mismatch node kinds:"),
                str(self.mismatch_node_kinds()), _banner("Mismatch provenance:")]
        out += [f"{leaf.id}: {line}" for leaf in leaves for line in leaf.provenance()]
        return "\n".join(out)

    def pretty_print_mismatch(self, graph: bool = False) -> None:
        print(self.report(graph))


def trace_scope(node: Any) -> str:
    """A source node's module path (``layers.1``)."""
    scope = node.scopeName().rsplit("/", 1)[-1]
    return scope.removeprefix("__module.model").removeprefix("__module").lstrip(".")


def _source_text(block: Any, indent: str = "") -> str:
    """A source-graph view as text, one node a line with its first user source line."""
    lines = [f"{indent}inputs: {', '.join(f'%{v.debugName()}' for v in block.inputs())}"]
    for node in block.nodes():
        outputs = ", ".join(f"%{v.debugName()}" for v in node.outputs())
        inputs = ", ".join(f"%{v.debugName()}" for v in node.inputs())
        where = source_of(node)
        comment = f"  # {where}" if where else ""
        lines.append(f"{indent}{outputs} = {node.kind()}({inputs}){comment}")
        lines += [_source_text(inner, indent + "  ") for inner in node.blocks()]
    lines.append(f"{indent}return {', '.join(f'%{v.debugName()}' for v in block.outputs())}")
    return "\n".join(lines)


def _banner(title: str) -> str:
    return f" {title} ".center(80, "=")


def _tree_lines(info: GraphInfo) -> list[str]:
    mismatch = info.has_mismatch()
    head = f"{info.essential_node_count()} {'X' if mismatch else '✓'}"
    if mismatch and info.essential_node_count() == 1:
        head += f" ({next(iter(info.essential_node_kinds()))})"
    ident = f"id: {info.id}"
    if info.upper_graph_info is None or info.lower_graph_info is None:
        return [head, ident]
    upper, lower = _tree_lines(info.upper_graph_info), _tree_lines(info.lower_graph_info)
    pad = " " * max(len(head), len(ident))
    lines = [head.ljust(len(pad)) + "  __" + upper[0], ident.ljust(len(pad)) + " |  " + upper[1]]
    lines += [pad + " |  " + line for line in upper[2:]]
    lines += [pad + " |", pad + " |__" + lower[0]]
    lines += [pad + "    " + line for line in lower[1:]]
    return lines


def find_mismatch(model: Any, input_args: Any, do_constant_folding: bool = True,
                  training: TrainingMode = TrainingMode.EVAL,
                  opset_version: int | None = None, keep_initializers_as_inputs: bool = True,
                  verbose: bool = False, options: VerificationOptions | None = None, *,
                  dynamo: bool = False, dynamic_shapes: Any = None) -> GraphInfo:
    """Find the smallest parts of the model whose export differs from PyTorch.

    The model is traced (or taken as scripted) once; its TorchScript graph is run on
    ``input_args`` to get every intermediate value. With ``dynamo=True`` (or an
    ``ExportedProgram`` as ``model``) it is captured with torch.export instead, as
    ``export(..., dynamo=True)`` reads it, and torch.fx runs that graph. Then the graph is
    checked as a whole and, where ONNX Runtime differs, split in two halves (by op nodes;
    constants follow their users) and each half checked with the computed values as
    inputs, recursively. The report is printed (``verbose`` adds both graphs of the whole
    model) and the root :class:`GraphInfo` returned. Parameters are those of
    :func:`oxport.export`.
    """
    options = options or VerificationOptions()
    opset = check_opset(opset_version)
    check_model(model)
    mode = check_training(training)
    registry = pipeline.loaded_registry()
    # Traced in the caller's grad mode, as export traces (layers pick their path by it).
    grad = pipeline.tracing_grad(dynamo or isinstance(model, torch.export.ExportedProgram))
    with exporting(), select_model_mode_for_export(model, mode), \
            torch.set_grad_enabled(grad):
        front = pipeline.source_front_end(model, input_args, registry, opset, dynamo,
                                          dynamic_shapes)
    graph_training = pipeline.is_training(model, mode)
    # The torch.export front end's examples are fake tensors: the run needs the real ones.
    user_inputs = (list(front.example_inputs) if front.evaluate is None else
                   [leaf for leaf in pytree.tree_leaves(arguments.normalize_args(input_args))
                    if isinstance(leaf, torch.Tensor)])
    search = _Search(front, {
        "opset_version": opset, "do_constant_folding": do_constant_folding,
        "training": TrainingMode.TRAINING if graph_training else TrainingMode.EVAL,
        "keep_initializers_as_inputs": keep_initializers_as_inputs}, user_inputs)
    root = GraphInfo(search, search.essential)
    root.find_mismatch(options)
    root.pretty_print_mismatch(graph=verbose)
    return root


__all__ = ["GraphInfo", "find_mismatch"]
