"""The walker: visit the source graph's nodes in order and ask plugins to convert each.

For every node the registry names the symbolic that serves its kind at the
target opset. If none does (or the symbolic declines with
:class:`~oxport.errors.SymbolicDeclined`), the enabled fallbacks get a chance;
otherwise the node is collected and the walk goes on, so that one
:class:`~oxport.errors.UnsupportedOperatorError` can list every problem.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import os
import sysconfig
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import onnx
import torch

from oxport import torch_onnx_compat
from oxport.context import GraphContext, ViewWriter, call_symbolic
from oxport.errors import (
    FallbackWarning,
    OnnxExporterError,
    SymbolicDeclined,
    SymbolicError,
    UnsupportedOperatorError,
    advising_cli,
    how_to_set,
    user_stacklevel,
    warn_at_source,
)
from oxport.frontends.base import FrontEnd
from oxport.ir import COMPLEX_OF_REAL, Graph, Type, Value
from oxport.passes.infer import infer_value, needs_inference
from oxport.registry import RegistryView, SymbolicEntry, vet_symbolic
from oxport.symbolic_helper import (
    carries_complex_pairs,
    has_complex_input,
    mark_complex_pairs,
)

if TYPE_CHECKING:
    from oxport.frontends.view import SourceBlock, SourceGraph, SourceNode, SourceValue

log = logging.getLogger("oxport.walk")
_TORCH_DIR = os.path.dirname(torch.__file__)
_OXPORT_DIR = os.path.dirname(os.path.abspath(__file__))
#: The built-in example models (``oxport export --example``) are model code, not oxport's.
_EXAMPLES = os.path.join(_OXPORT_DIR, "cli", "examples.py")
#: Console-script launchers (the ``oxport`` command) are never the user's code.
_SCRIPTS_DIR = sysconfig.get_path("scripts") + os.sep


class Fallback(Protocol):
    """A fallback mode, registered by a plugin with ``registry.register_fallback`` (which
    checks that it has each member below; the registry keeps who registered it).
    """

    #: Whether it sees every node before the symbolics (like ONNX_ATEN), rather than only
    #: the nodes no symbolic converted.
    preempt: bool
    #: Whether, when enabled, it keeps an autograd Function without a symbolic as one node
    #: (ONNX_FALLTHROUGH, ONNX_ATEN_FALLBACK) rather than let it be inlined.
    keeps_autograd_functions: bool

    def claims(self, node: SourceNode) -> bool:
        """Whether this fallback converts ``node``."""

    def convert(self, g: GraphContext, node: SourceNode,
                inputs: Sequence[Value | None]) -> Any:
        """Emit the node; returns what a symbolic would."""


@dataclasses.dataclass
class Unconvertible:
    """One op kind the walk could not convert."""

    kind: str
    count: int = 0
    sources: list[str] = dataclasses.field(default_factory=list)
    min_opset: int | None = None
    reason: str = ""
    #: Loaded fallbacks, not enabled for this export, that would convert it.
    fallbacks: list[str] = dataclasses.field(default_factory=list)
    #: Installed plugins that provide it but are not loaded: "name, which is not loaded: why".
    unloaded: list[str] = dataclasses.field(default_factory=list)

    def describe(self, opset: int) -> str:
        where = f", first at {self.sources[0]}" if self.sources and self.sources[0] else ""
        uses = f"{self.count} use{'s' if self.count != 1 else ''}{where}"
        if self.reason:
            hint = self.reason
        elif self.min_opset is not None and self.min_opset > opset:
            hint = (f"supported from opset {self.min_opset}; export with "
                    f"{how_to_set('opset_version', self.min_opset)} or higher")
        elif self.unloaded:
            hint = f"provided by {'; '.join(self.unloaded)}"
        else:
            hint = "no symbolic is registered for it: install an op pack that provides it"
            if not advising_cli():
                hint += (f", or register one with oxport.register_custom_op_symbolic("
                         f"{self.kind!r}, fn, {opset})")
        if self.fallbacks:
            hint += "; or export it as it is with " + " or ".join(
                how_to_set("fallbacks", name) for name in self.fallbacks)
        return f"  - {self.kind} ({uses}): {hint}"


@dataclasses.dataclass
class _Attempt:
    """How the symbolics serving a node fared: ``done`` (it is converted, or stands for an
    unconvertible op upstream), whether one declined, and why none converted it."""

    done: bool = False
    declined: bool = False
    reason: str = ""

    def refused(self, entry: SymbolicEntry, why: str) -> None:
        self.reason += f"{'; ' if self.reason else ''}the symbolic from {entry.provenance} " \
                       f"declined: {why}"


@dataclasses.dataclass
class FallbackUse:
    """One node a fallback converted: its op, the fallback's name, and its source line."""

    kind: str
    fallback: str
    source: str


class Conversion:
    """The state of one conversion: the source-to-IR value map and what was used."""

    def __init__(self, registry: RegistryView, opset: int, *,
                 fallbacks: Sequence[tuple[str, Fallback]] = (),
                 custom_opsets: dict[str, int] | None = None,
                 training: bool = False, collect_only: bool = False,
                 unloaded: Callable[[str], list[str]] | None = None,
                 autograd_inlining: bool = True, params_are_inputs: bool = False,
                 progress: Callable[[int, int], None] | None = None,
                 sizes_may_vary: bool = False) -> None:
        self.registry = registry
        self.opset = opset
        self.fallbacks = list(fallbacks)
        self.custom_opsets = dict(custom_opsets or {})
        self.training = training
        self.collect_only = collect_only
        #: ``unloaded(kind)``: the installed plugins providing ``kind`` that are not loaded.
        self.unloaded = unloaded
        self.env: dict[int, Value] = {}
        self.used: collections.Counter[SymbolicEntry] = collections.Counter()
        self.fallback_uses: list[FallbackUse] = []
        self.unconvertible: dict[str, Unconvertible] = {}
        self._first_met: dict[str, int] = {}
        #: (kind, schema name) -> the symbolic that serves it: looked up once per export.
        self._symbolics: dict[tuple[str, str], SymbolicEntry | None] = {}
        self.nodes_done = 0
        #: TorchScript nodes to visit (blocks included); set when the walk starts.
        self.nodes_total = 0
        #: Called as ``progress(nodes_done, nodes_total)`` after each node starts converting.
        self.progress = progress
        #: Whether autograd Functions without a symbolic are inlined (export's autograd_inlining).
        self.autograd_inlining = autograd_inlining
        #: Whether parameters stay run-time inputs (export_params=False or
        #: keep_initializers_as_inputs): symbolics must not bake their values into new constants.
        self.params_are_inputs = params_are_inputs
        #: Whether the sizes the source graph holds are an example's that dynamic axes let
        #: vary (a trace exported with dynamic_axes).
        self.sizes_may_vary = sizes_may_vary
        #: Whether the source graph's static sizes are proven (torch.export's), not an
        #: example's: they fill in the sizes a symbolic's output leaves unknown.
        self.sizes_proven = False
        #: Source view value -> (its base value, write(g, base, new_view) -> new base);
        #: filled by view symbolics (select, slice...) so in-place ops write through.
        self.views: dict[int, tuple[SourceValue, ViewWriter]] = {}
        #: (value, axis, what the traced size fixed, source line): the uses of traced sizes
        #: symbolics report through ``g.uses_traced_size``, checked against the dynamic axes
        #: after the walk.
        self.traced_size_uses: list[tuple[Value, int, str, str]] = []
        #: TorchScript value -> the deferred output of the unconvertible op it is computed
        #: from: a symbolic failing on it blames that op (``_stands_for_unconvertible``).
        self.downstream_of: dict[int, Value] = {}
        #: TorchScript values whose sizes are computed from tensor values (marked by
        #: symbolics through ``g.mark_sizes_from_data``, passed on to what uses them).
        self.data_sized: set[int] = set()

    # -- entry points ------------------------------------------------------
    def run(self, front: FrontEnd) -> Graph:
        """Convert the whole front-end graph; raises if any op was unconvertible."""
        graph = self.walk(front)
        ts_outputs = list(front.graph.outputs())
        outputs = [self.lookup(v) for v in ts_outputs]
        self.raise_if_unconvertible()
        outputs = [self._as_output(graph, t, v) for t, v in zip(ts_outputs, outputs)]
        graph.outputs = [graph.materialize(v) for v in self._without_none(graph, outputs)]
        self.warn_fallback_uses()
        return graph

    def _as_output(self, graph: Graph, ts_value: SourceValue, value: Value) -> Value:
        """``value``, converted from the graph output ``ts_value``; a list of numbers (a
        1-D tensor inside the graph) is the Sequence of 0-d tensors torch.onnx writes for
        a list built at run time from opset 11, one item per number eager's list flattens
        to."""
        ts_type = ts_value.type()
        if self.opset < SEQUENCE_OUTPUT_OPSET or ts_type.kind() != "ListType" \
                or ts_type.getElementType().kind() not in _NUMBER_KINDS:
            return value
        tensor = graph.materialize(value)
        if tensor.type().kind() != "TensorType":
            return value
        node = graph.add_node("", "SplitToSequence", [tensor], 1,
                              {"axis": ("i", 0), "keepdims": ("i", 0)})
        return node.output_values[0].setType(
            Type("ListType", elem=Type.tensor(tensor.type().dtype(), [])))

    def _without_none(self, graph: Graph, outputs: list[Value]) -> list[Value]:
        """The outputs with those that are always None (a scripted ``return x, None``) as
        empty Optionals of float from opset 15, as torch.onnx writes them; left out below."""
        if self.opset < NONE_OUTPUT_OPSET:
            return [v for v in outputs if not (v.is_const and v.const is None)]
        return [_empty_optional(graph) if v.is_const and v.const is None else v
                for v in outputs]

    def walk(self, front: FrontEnd) -> Graph:
        """Convert every node (collecting unconvertible ones) without raising or finishing."""
        graph = Graph()
        graph.use_domain("", self.opset)
        self.sizes_proven = not front.example_sizes
        ts_inputs = list(front.graph.inputs())
        user_count = len(ts_inputs) - len(front.params)
        for index, (ts_value, name) in enumerate(zip(ts_inputs[:user_count],
                                                      front.input_names)):
            value = graph.add_input(name, _named_dims(Type.of(ts_value.type()).as_real_pairs(),
                                                      front.input_dim_names, index))
            _mark_if_complex(ts_value, value)
            if index < len(front.input_leaves):
                value.meta = {"arg_leaf": front.input_leaves[index]}
            if index in front.kept_inputs:
                value.meta = {**(value.meta or {}), "kept": True}
            self.env[ts_value.unique()] = value
        for ts_value, (name, tensor) in zip(ts_inputs[user_count:], front.params):
            # The trace's type keeps requires_grad, which symbolics may ask about.
            type_ = Type.of(ts_value.type())
            if tensor.dtype.is_complex:  # ONNX holds it as its real pairs
                tensor, type_ = torch.view_as_real(tensor.resolve_conj()), type_.as_real_pairs()
            self.env[ts_value.unique()] = graph.add_initializer(
                name, tensor, type_ if type_.dtype() == tensor.dtype else None, parameter=True)
            _mark_if_complex(ts_value, self.env[ts_value.unique()])
        if getattr(self.progress, "listened", self.progress is not None):
            self.nodes_total = count_nodes(front.graph)
        for node in front.graph.nodes():
            first = len(graph.nodes)
            self.convert_node(node, graph)
            if len(graph.nodes) > first:
                _stamp_calls(graph.nodes[first:], node)
        for ts_value in front.graph.outputs():
            _collect_if_unconvertible(self.lookup(ts_value))
        return graph

    def convert_block(self, block: SourceBlock, graph: Graph,
                      inputs: list[Value]) -> list[Value]:
        """Convert a block of the source graph into ``graph``; block inputs map to
        ``inputs``."""
        block_inputs = list(block.inputs())
        if len(block_inputs) != len(inputs):
            raise OnnxExporterError(
                f"convert_block: the block takes {len(block_inputs)} inputs, got {len(inputs)}.")
        # A block's writes (in-place ops, list appends) stay in its scope: an If's other
        # branch and the code after it see the values they had before the block.
        saved = self.env, self.views
        self.env, self.views = dict(self.env), dict(self.views)
        try:
            for ts_value, value in zip(block_inputs, inputs):
                self.env[ts_value.unique()] = value
            for node in block.nodes():
                self.convert_node(node, graph)
            return [self.lookup(v) for v in block.outputs()]
        finally:
            self.env, self.views = saved

    def convert_subgraph(self, ts_graph: SourceGraph, graph: Graph,
                         inputs: list[Value]) -> list[Value]:
        """Convert a separate source graph (e.g. an autograd Function's ``Subgraph``)
        into ``graph``; its value ids are its own, so it gets its own value map."""
        saved = self.env, self.views
        self.env, self.views = {}, {}
        try:
            return self.convert_block(ts_graph, graph, inputs)
        finally:
            self.env, self.views = saved

    def lookup(self, ts_value: SourceValue) -> Value:
        try:
            return self.env[ts_value.unique()]
        except KeyError:
            raise OnnxExporterError(
                f"Internal error: %{ts_value.debugName()} is used before it is defined."
            ) from None

    def domain_version(self, domain: str, default: int | None = None) -> int:
        """The opset version for a custom domain: custom_opsets, then the pack's, then 1."""
        if domain in self.custom_opsets:
            return self.custom_opsets[domain]
        return self.registry.domain_versions.get(domain, default or 1)

    # -- one node ----------------------------------------------------------
    def convert_node(self, node: SourceNode, graph: Graph) -> None:
        if self.data_sized and any(v.unique() in self.data_sized for v in node.inputs()):
            self.data_sized.update(v.unique() for v in node.outputs())
        self._convert_node(node, graph)
        if self.downstream_of:  # what is computed from an unconvertible op's outputs
            upstream = next((self.downstream_of[v.unique()] for v in node.inputs()
                             if v.unique() in self.downstream_of), None)
            if upstream is not None:
                for ts_value in node.outputs():
                    self.downstream_of.setdefault(ts_value.unique(), upstream)

    def _convert_node(self, node: SourceNode, graph: Graph) -> None:
        """Convert one node: a preempting fallback, else the symbolics serving it in turn,
        else a fallback; else collect it as unconvertible."""
        inputs = self._inputs_of(node)
        g = GraphContext(graph, self, node)
        self._advance()
        if self._convert_by_fallback(g, node, inputs, preempt=True):
            return
        attempt = self._convert_by_symbolics(g, node, inputs)
        if attempt.done or self._convert_by_fallback(g, node, inputs, preempt=False):
            return
        if attempt.declined and self._stands_for_unconvertible(node, graph):
            return
        self._record_unconvertible(node, graph, node.kind(), g.source, attempt.reason)

    def _inputs_of(self, node: SourceNode) -> list[Value]:
        """The converted values of the node's inputs."""
        env = self.env
        try:
            return [env[v.unique()] for v in node.inputs()]
        except KeyError:
            return [self.lookup(v) for v in node.inputs()]  # raises, naming the value

    def _advance(self) -> None:
        """Count the node and report progress."""
        self.nodes_done += 1
        if self.progress is not None:
            self.progress(self.nodes_done, max(self.nodes_total, self.nodes_done))

    def _convert_by_fallback(self, g: GraphContext, node: SourceNode,
                             inputs: Sequence[Value | None], *, preempt: bool) -> bool:
        """Convert the node with the first enabled fallback of the kind (``preempt``) that
        claims it; False when none does."""
        for name, fallback in self.fallbacks:
            if fallback.preempt == preempt and fallback.claims(node):
                kind = node.kind()
                producer = Described(lambda name=name, kind=kind: (
                    f"The {name!r} fallback from {self.registry.fallback_providers.get(name)} "
                    f"converting {kind} (at {g.source or 'unknown'})"))
                self._map(node, g.graph, fallback.convert(g, node, inputs), producer)
                self.fallback_uses.append(FallbackUse(kind, name, g.source))
                return True
        return False

    def _convert_by_symbolics(self, base: GraphContext, node: SourceNode,
                              inputs: list[Value]) -> _Attempt:
        """Try the symbolics serving the node, the winner first: one that declines hands it
        to the next (a shadowed pack); one that fails ends the attempt."""
        kind, graph = node.kind(), base.graph
        attempt = _Attempt()
        outs = out_arguments(node)
        call: tuple[list[Any], dict[str, Any]] | None = None
        complex_input = has_complex_input(node)
        for entry in self.symbolic_candidates(node, kind):
            if complex_input and not entry.accepts_complex:
                attempt.refused(entry, "it takes no complex tensors (oxport carries them as "
                                       "real pairs through the ops registered with "
                                       "accepts_complex; take view_as_real / .real / .abs() "
                                       "before this op)")
                continue
            if call is None:  # read once a symbolic serves it (its pack is loaded then)
                call = self._call_arguments(node, inputs, outs)
            g = base.for_entry(entry)
            try:
                result = call_symbolic(entry.fn, g, *call)
            except SymbolicDeclined as declined:
                attempt.refused(entry, declined.reason)
                attempt.declined = True
                continue
            except Exception as exc:
                if self._stands_for_unconvertible(node, graph):
                    attempt.done = True
                elif not self.collect_only:
                    if isinstance(exc, OnnxExporterError):
                        _add_context(exc, _failure_context(kind, entry, exc, g.source))
                        raise
                    raise _symbolic_error(kind, entry, exc, g.source) from exc
                else:
                    attempt.reason = (str(exc) if isinstance(exc, OnnxExporterError)
                                      else f"{type(exc).__name__}: {exc}")
                return attempt
            attempt.done = self._bind(g, node, entry, result, outs)
            if not attempt.done:
                attempt.reason = f"the symbolic from {entry.provenance} returned None"
            return attempt
        return attempt

    def _call_arguments(self, node: SourceNode, inputs: list[Value],
                        outs: Sequence[int]) -> tuple[list[Any], dict[str, Any]]:
        """What the node's symbolics are called with: its inputs and attributes, or what
        the op's registered argument reader makes of them; an out= overload's ``out``
        arguments left out (the walker writes them)."""
        reader = self.registry.argument_readers.get(node.kind())
        args, kwargs = reader(node, inputs) if reader else (list(inputs), ts_attributes(node))
        if outs:
            args = [arg for index, arg in enumerate(args) if index not in outs]
        return args, kwargs

    def _bind(self, g: GraphContext, node: SourceNode, entry: SymbolicEntry, result: Any,
              outs: Sequence[int]) -> bool:
        """Map the node's outputs to what the symbolic returned and write through what the
        op writes in place; False when it returned None for outputs that are used."""
        producer = Described(lambda: f"The symbolic for {node.kind()} from {entry.provenance} "
                                     f"(at {g.source or 'unknown'})")
        result, writes = _split_writes(node, result, producer)
        if not self._map(node, g.graph, result, producer):
            return False
        self.used[entry] += 1
        self._write_through(g, node, outs)
        for index, value in writes:
            self._assign(g, node.inputsAt(index), value)
        return True

    def _write_through(self, g: GraphContext, node: SourceNode,
                       outs: Sequence[int] = ()) -> None:
        """After an in-place op (``x[1].copy_(v)``: its schema writes an argument and
        returns it) or an out= overload (``torch.add(a, b, out=c)``), later uses of what
        it wrote, and of every base that views, see the new value."""
        if outs and len(outs) == node.outputsSize():
            for index, output in zip(outs, node.outputs()):
                self._write(g, node.inputsAt(index), output)
            return
        target = _in_place_argument(node.schema())
        if target is not None and node.outputsSize() == 1:
            self._write(g, node.inputsAt(target), node.output())

    def _write(self, g: GraphContext, target: SourceValue, output: SourceValue) -> None:
        """``output`` is ``target`` written: it views what ``target`` views (``v.zero_()
        .add_(x)`` on a view ``v`` reaches its base), and ``target``'s value is its own."""
        link = self.views.get(target.unique())
        if link is not None:
            self.views[output.unique()] = link
        self._assign(g, target, self.env.get(output.unique()))

    def _assign(self, g: GraphContext, target: SourceValue, value: Value | None) -> None:
        """``target`` (a source value) is ``value`` from now on, and so is what it views in
        every base it views."""
        while value is not None and target.type().kind() == "TensorType":
            self.env[target.unique()] = value
            link = self.views.get(target.unique())
            if link is None:
                return
            target, write = link
            value = write(g, self.lookup(target), value)

    def symbolic_candidates(self, node: SourceNode, kind: str) -> Iterator[SymbolicEntry]:
        """Every symbolic serving the node at this opset, the one that wins first (the
        others are looked up only if it declines)."""
        first = self.lookup_symbolic(node, kind)
        if first is None:
            return
        yield first
        rest = [e for e in self.registry.entries(kind) if e is not first and e.serves(self.opset)]
        rest.sort(key=lambda e: (e.layer, e.override), reverse=True)
        for entry in rest:
            vet_symbolic(entry)
            yield entry

    def lookup_symbolic(self, node: SourceNode, kind: str) -> SymbolicEntry | None:
        """The symbolic for ``kind.overload`` (e.g. ``aten::max.other``, the name its schema
        gives) if one serves and is not shadowed by a higher layer, else the one for
        ``kind``."""
        name = node.schema().partition("(")[0]
        if (kind, name) not in self._symbolics:
            self._symbolics[kind, name] = self._lookup_symbolic(kind, name)
        return self._symbolics[kind, name]

    def _lookup_symbolic(self, kind: str, name: str) -> SymbolicEntry | None:
        entry = self.registry.lookup(kind, self.opset)
        if name.startswith(kind + "."):
            specific = self.registry.lookup(name, self.opset)
            if specific is not None and (entry is None or specific.layer >= entry.layer):
                return specific
        return entry

    def _map(self, node: SourceNode, graph: Graph, result: Any, producer: Described) -> bool:
        """Map the node's outputs to what ``producer`` (a symbolic or fallback, named in
        errors) returned; False when it returned None for outputs that are used."""
        ts_outputs = list(node.outputs())
        if result is None:
            return not ts_outputs or all(not o.uses() for o in ts_outputs)
        for ts_value, value in zip(ts_outputs, _results(result, ts_outputs, producer)):
            if value is None:
                continue
            theirs = self._source_type(ts_value)
            if value.type().kind() == "TensorType" and value.type().dtype() is None:
                value.setType(_merge(value.type(), theirs))
            elif value.type().kind() == "TensorType" and value.type().shape is None \
                    and ts_value.type().kind() == "TensorType":
                value.setType(value.type().with_sizes(theirs.shape))
            elif self.sizes_proven:
                _fill_proven_sizes(value, theirs)
            if needs_inference(value):  # scripted code: TorchScript knew no dtype or rank
                infer_value(value, self.opset)
            _type_complex_pairs(ts_value, value)
            self.env[ts_value.unique()] = value
        return True

    def _source_type(self, ts_value: SourceValue) -> Type:
        """The type the source graph gives ``ts_value`` (complex as real pairs), its sizes
        unknown (its rank kept) when they are computed from tensor values: the example's
        sizes do not hold then."""
        theirs = Type.of(ts_value.type()).as_real_pairs()
        if ts_value.unique() in self.data_sized and theirs.shape is not None:
            return theirs.with_sizes([None] * len(theirs.shape))
        return theirs

    def _stands_for_unconvertible(self, node: SourceNode, graph: Graph) -> bool:
        """After a symbolic failed or declined: if an input is computed from an
        unconvertible op's output (which a scripted graph gives no sizes for, say), that op
        is the cause. This node's outputs stand for it: when the export needs them, it is
        collected, so the error names it and not this node's symbolic. False when no input
        is computed from one."""
        upstream = [self.downstream_of[v.unique()] for v in node.inputs()
                    if v.unique() in self.downstream_of]
        if not upstream:
            return False

        def collect() -> None:
            for value in upstream:
                _collect_if_unconvertible(value)

        self._defer_outputs(node, graph, upstream[0].meta["unconvertible"], collect)
        return True

    def _defer_outputs(self, node: SourceNode, graph: Graph, kind: str,
                       collect: Callable[[], None]) -> list[Value]:
        """Bind the node's outputs to deferred values that stand for the unconvertible op
        ``kind``: materializing one (the export needs it) calls ``collect``, as does a node
        that cannot be deferred, at once."""
        deferred_outputs = []
        for ts_value in node.outputs():
            def materialize(target: Graph, ts_value: SourceValue = ts_value) -> Value:
                collect()
                poison = Value(target, ts_value.debugName(), Type.of(ts_value.type()))
                poison.meta = {"unconvertible": kind}
                return poison
            deferred = graph.deferred(Type.of(ts_value.type()), materialize)
            deferred.meta = {"unconvertible": kind, "collect": collect}
            self.env[ts_value.unique()] = deferred
            deferred_outputs.append(deferred)
        if not _may_defer(node):
            collect()
        return deferred_outputs

    def _record_unconvertible(self, node: SourceNode, graph: Graph, kind: str,
                              source: str, reason: str) -> None:
        """Collect the node as unconvertible once the export needs it: its outputs are
        deferred values that collect it when materialized (an emitted node or the graph
        outputs use them), so a value no symbolic reads, such as the zeros an LSTM's
        symbolic replaces by ONNX's default state, does not fail the export. A node without
        outputs, or one that mutates an input, is collected at once."""
        inputs = [self.lookup(v) for v in node.inputs()]
        position, recorded = self.nodes_done, False

        def record() -> None:
            nonlocal recorded
            if recorded:
                return
            recorded = True
            if kind not in self.unconvertible:  # listed in the order the walk met them
                self._first_met[kind] = position
                self.unconvertible[kind] = Unconvertible(
                    kind, fallbacks=[name for name, fallback in sorted(self.registry.fallbacks.items())
                                     if fallback.claims(node)],
                    unloaded=self.unloaded(kind) if self.unloaded else [])
                self.unconvertible = dict(sorted(self.unconvertible.items(),
                                                 key=lambda item: self._first_met[item[0]]))
            info = self.unconvertible[kind]
            info.count += 1
            info.sources.append(source)
            info.min_opset = self.registry.min_opset(kind)
            info.reason = info.reason or reason
            for value in inputs:  # what fed it cannot be skipped either
                _collect_if_unconvertible(value)

        for ts_value, deferred in zip(node.outputs(),
                                      self._defer_outputs(node, graph, kind, record)):
            self.downstream_of[ts_value.unique()] = deferred

    def warn_fallback_uses(self) -> None:
        """One :class:`FallbackWarning` per op and fallback, with the source lines."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for use in self.fallback_uses:
            grouped.setdefault((use.kind, use.fallback), []).append(use.source or "unknown")
        for (kind, fallback), sources in grouped.items():
            where = "; ".join(dict.fromkeys(sources[:3])) + ("; ..." if len(sources) > 3 else "")
            warn_at_source(
                f"oxport: {kind} ({len(sources)} use{'s' if len(sources) != 1 else ''}) was "
                f"exported by the {fallback!r} fallback, not by a symbolic; at {where}",
                FallbackWarning, sources[0])

    def raise_if_unconvertible(self) -> None:
        if not self.unconvertible:
            return
        lines = [info.describe(self.opset) for info in self.unconvertible.values()]
        count = len(lines)
        raise UnsupportedOperatorError(
            f"Exporting {count} operator{'s' if count != 1 else ''} to ONNX opset version "
            f"{self.opset} is not supported:\n" + "\n".join(lines),
            list(self.unconvertible.values()),
        )


class Described:
    """Text for an error message, made only when one is raised (a symbolic's source line
    costs a lookup per node)."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[], str]) -> None:
        self._make = make

    def __str__(self) -> str:
        return self._make()


def _results(result: Any, ts_outputs: Sequence[SourceValue], producer: Described
             ) -> list[Any]:
    """What a symbolic returned as one entry per output (a Value, or None for an unused
    one); a :class:`SymbolicError` naming ``producer`` when it is anything else."""
    count = len(ts_outputs)
    expected = Described(lambda: "it must return a Value" if count == 1 else
                         f"it must return a tuple of {count} Values (None for an unused one)")
    if isinstance(result, Value):
        results: list[Any] = [result]
    elif isinstance(result, (tuple, list)):
        results = list(result)
    else:
        raise SymbolicError(
            f"{producer} returned {_describe(result)}, not its output: {expected} (or None "
            "when no output is used). This is a bug in that plugin; report it to its authors.")
    wrong = next((v for v in results if v is not None and not isinstance(v, Value)), None)
    if wrong is not None:
        raise SymbolicError(
            f"{producer} returned {_describe(wrong)} among its outputs, not a Value: {expected}. "
            "This is a bug in that plugin; report it to its authors.")
    missing = [o for o in ts_outputs[len(results):] if o.uses()]
    if len(results) > count or missing:
        raise SymbolicError(
            f"{producer} returned {len(results)} value{'s' if len(results) != 1 else ''} for "
            f"an op with {count} output{'s' if count != 1 else ''}: {expected}. This is a bug "
            "in that plugin; report it to its authors.")
    return results


def _describe(value: Any) -> str:
    """A returned object for an error message: its type, and its text if short."""
    if isinstance(value, (str, int, float, bool)):
        return f"{type(value).__name__} {value!r}"[:80]
    return f"a {type(value).__module__}.{type(value).__qualname__}".replace("builtins.", "")


def _failure_context(kind: str, entry: SymbolicEntry, exc: BaseException,
                     source: str) -> str:
    """Where a symbolic failed, and the import to change when the symbolic uses another
    exporter's symbolic helpers (found by name in its code; nothing is imported)."""
    advice = torch_onnx_compat.torch_onnx_advice(entry.fn, exc)
    return (f"(converting {kind} at {source or 'unknown'}, symbolic from {entry.provenance})"
            + (f" {advice}" if advice else ""))


def _add_context(exc: BaseException, context: str) -> None:
    """Append ``context`` to the message of ``exc``, keeping its type and attributes (an
    :class:`~oxport.errors.UnsupportedOperatorError`'s ``ops``, a
    :class:`~oxport.errors.SymbolicValueError`'s ``value``)."""
    message, *rest = exc.args or ("",)
    exc.args = (f"{message} {context}".lstrip(), *rest)


def _symbolic_error(kind: str, entry: SymbolicEntry, exc: Exception,
                    source: str) -> SymbolicError:
    """A symbolic's unexpected exception (not an oxport error), blamed on its plugin."""
    return SymbolicError(
        f"The symbolic for {kind} from {entry.provenance} raised {type(exc).__name__}: {exc} "
        f"(at {source or 'unknown'}). "
        + (torch_onnx_compat.torch_onnx_advice(entry.fn, exc) or
           "This is a bug in that plugin; report it to its authors."))


def out_arguments(node: SourceNode) -> list[int]:
    """The input positions of an out= overload's outputs (keyword-only arguments written in
    place, ``*, Tensor(a!) out``); empty for other nodes."""
    schema = node.schema()
    if schema == "(no schema)" or "!" not in schema:
        return []
    arguments = torch._C.parse_schema(schema).arguments
    return [index for index, argument in enumerate(arguments)
            if argument.kwarg_only and argument.alias_info is not None
            and argument.alias_info.is_write]


def _split_writes(node: SourceNode, result: Any,
                  producer: Described) -> tuple[Any, list[tuple[int, Value]]]:
    """A symbolic for an op that writes arguments it does not return (a custom op's
    ``mutates_args``, ``Tensor(a!) out`` in its schema) returns the op's results followed by
    the new value of each written argument, in schema order: (the results, [(argument
    position, new value)]). One that returns only the results (torch.onnx's form) drops the
    writes, with a warning."""
    written = _written_arguments(node.schema())
    if not written:
        return result, []
    values = list(result) if isinstance(result, (tuple, list)) else [result]
    count = node.outputsSize()
    news = values[count:]
    if len(values) == count + len(written) and all(v is not None for v in news):
        head = values[:count]
        results = None if not head else head[0] if count == 1 else tuple(head)
        return results, [(index, value) for (index, _), value in zip(written, news)]
    warnings.warn(
        f"oxport: {producer} returned no new value for {', '.join(n for _, n in written)}, "
        "which the op writes in place: later reads see the old value (as in torch.onnx's "
        "file). Return the op's results, then the new value of each argument it writes.",
        UserWarning, stacklevel=user_stacklevel())
    return result, []


@functools.lru_cache(maxsize=1024)
def _in_place_argument(schema: str) -> int | None:
    """The position of the argument an in-place op writes and returns (``self`` of
    ``add_(Tensor(a!) self, ...) -> Tensor(a!)``); None for other schemas."""
    if schema == "(no schema)" or "!" not in schema:
        return None
    parsed = torch._C.parse_schema(schema)
    if len(parsed.returns) != 1 or parsed.returns[0].alias_info is None:
        return None
    returned = set(parsed.returns[0].alias_info.before_set)
    return next((index for index, argument in enumerate(parsed.arguments)
                 if not argument.kwarg_only and argument.alias_info is not None
                 and argument.alias_info.is_write
                 and returned & set(argument.alias_info.before_set)), None)


@functools.lru_cache(maxsize=1024)
def _written_arguments(schema: str) -> tuple[tuple[int, str], ...]:
    """(position, name) of each positional tensor argument a schema writes without
    returning it."""
    if schema == "(no schema)" or "!" not in schema:
        return ()
    parsed = torch._C.parse_schema(schema)
    returned = {name for r in parsed.returns if r.alias_info is not None
                for name in r.alias_info.before_set}
    return tuple((index, argument.name) for index, argument in enumerate(parsed.arguments)
                 if not argument.kwarg_only and argument.alias_info is not None
                 and argument.alias_info.is_write and argument.type.kind() == "TensorType"
                 and not returned & set(argument.alias_info.before_set))


def _collect_if_unconvertible(value: Value) -> None:
    """Collect the unconvertible node behind ``value``, if it stands for one."""
    if value.meta and "collect" in value.meta:
        value.meta["collect"]()


def _may_defer(node: SourceNode) -> bool:
    """Whether an unconvertible node may wait to be collected until its outputs are needed:
    it has outputs and a schema that mutates none of its arguments."""
    if node.outputsSize() == 0:
        return False
    schema = node.schema()
    return schema != "(no schema)" and "!" not in schema


def _mark_if_complex(ts_value: SourceValue, value: Value) -> None:
    """Mark a graph input or weight that is a complex tensor as its real pairs."""
    dtype = Type.of(ts_value.type()).dtype()
    if dtype is not None and dtype.is_complex:
        mark_complex_pairs(value)


def _type_complex_pairs(ts_value: SourceValue, value: Value) -> None:
    """Type a TorchScript value complex when its symbolic made it as complex pairs and
    TorchScript knew no dtype (scripted code), so the ops reading it see a complex tensor
    (``is_complex``, the walker's accepts_complex check) as traced code's types tell them."""
    ts_type = ts_value.type()
    real = value.type().dtype()
    if isinstance(ts_type, torch._C.TensorType) and ts_type.dtype() is None \
            and real in COMPLEX_OF_REAL and carries_complex_pairs(value):
        ts_value.setType(ts_type.with_dtype(COMPLEX_OF_REAL[real]))


def _fill_proven_sizes(value: Value, theirs: Type) -> None:
    """The sizes of ``value`` that its symbolic left unknown, where the source graph
    proved them (torch.export's: a reshape to ``(n, -1)`` whose last size is 1; a loop's
    carried tensor sized by a dynamic axis, by that axis's name)."""
    ours = value.type()
    if ours.kind() != "TensorType" or ours.shape is None or theirs.kind() != "TensorType" \
            or theirs.shape is None or len(theirs.shape) != len(ours.shape):
        return
    sizes = [t if o is None and isinstance(t, (int, str)) else o
             for o, t in zip(ours.shape, theirs.shape)]
    if sizes != list(ours.shape):
        value.setType(ours.with_sizes(sizes))


def _merge(ours: Type, theirs: Type) -> Type:
    if theirs.kind() != "TensorType":
        return ours if ours.kind() != "TensorType" or ours.dtype() is not None else theirs
    shape = ours.shape if ours.shape is not None else theirs.shape
    return Type("TensorType", theirs.dtype(), shape)


def count_nodes(block: SourceBlock) -> int:
    """The nodes of a TorchScript graph or block, those in nested blocks included."""
    return sum(1 + sum(count_nodes(b) for b in node.blocks()) for node in block.nodes())


def source_of(node: SourceNode) -> str:
    """The user's source line for a node: the first frame outside torch and oxport."""
    text = node.sourceRange()
    return _user_frame(text) if text else ""


@functools.lru_cache(maxsize=4096)
def _user_frame(text: str) -> str:
    """The first user frame of a source range (the repeated layers of a model share
    their call stacks: each is read once)."""
    frames = [line.strip() for line in text.splitlines() if line.strip()]
    for frame in frames:
        if _EXAMPLES in frame or (_TORCH_DIR not in frame and _OXPORT_DIR + os.sep not in frame
                                  and not frame.startswith(_SCRIPTS_DIR)):
            return frame
    return frames[0] if frames else ""


def scope_of(node: SourceNode) -> str:
    """The module path of a node, e.g. ``features.0`` (empty at the top level)."""
    calls = call_chain(node)
    return calls[-1].partition("#")[0] if calls else ""


def call_chain(node: SourceNode) -> tuple[str, ...]:
    """The module calls a node was made in, outermost first, below the model itself:
    ``("layers.0", "layers.0.act#1")`` (``#n`` marks a module's repeated calls)."""
    return _calls(node.scopeName())


@functools.lru_cache(maxsize=4096)
def _calls(scope_name: str) -> tuple[str, ...]:
    calls = []
    for part in scope_name.split("/") if scope_name else ():
        call = part.removeprefix("__module.model").removeprefix("__module").lstrip(".")
        if call:
            calls.append(call)
    return tuple(calls)


#: ONNX Optional, which an output that is always None becomes, arrived in opset 15.
NONE_OUTPUT_OPSET = 15

#: ONNX SplitToSequence, which makes a list of numbers at the graph's output a Sequence,
#: arrived in opset 11.
SEQUENCE_OUTPUT_OPSET = 11

#: The element kinds of a list of numbers (a 1-D tensor inside the graph).
_NUMBER_KINDS = ("IntType", "FloatType", "BoolType", "NumberType")


def _empty_optional(graph: Graph) -> Value:
    """An empty Optional of float tensors."""
    empty = onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None)
    node = graph.add_node("", "Optional", [], 1, {"type": ("tp", empty)})
    return node.output_values[0].setType(Type("OptionalType", elem=Type.tensor(torch.float32)))


def _named_dims(type_: Type, names: list[dict[int, str]], index: int) -> Type:
    """An input's type with the dims ``dynamic_axes`` names typed by their names."""
    named = names[index] if index < len(names) else {}
    shape = type_.shape
    if not named or shape is None or type_.kind() != "TensorType":
        return type_
    rank = len(shape)
    by_axis = {axis % rank: name for axis, name in named.items() if -rank <= axis < rank}
    return type_.with_sizes([by_axis.get(axis, dim) if dim is None else dim
                             for axis, dim in enumerate(shape)])


def _stamp_calls(nodes: list[Any], ts_node: SourceNode) -> None:
    """Give the top-level nodes made for ``ts_node`` its module calls; nodes made for its
    deferred inputs (constants, lists) get its scope too."""
    calls = call_chain(ts_node)
    scope = calls[-1].partition("#")[0] if calls else ""
    for node in nodes:
        node.calls = calls
        node.scope = node.scope or scope


def ts_attributes(node: SourceNode) -> dict[str, Any]:
    """A node's attributes as torch.onnx passes them: ``{name_kind: value}``."""
    attrs: dict[str, Any] = {}
    for name in node.attributeNames():
        kind = node.kindOf(name)
        getter = getattr(node, "is_" if kind == "is" else kind, None)
        if kind in ("i", "f", "s", "t", "is", "fs", "ss", "ts") and getter is not None:
            attrs[f"{name}_{kind[0]}"] = getter(name)
    return attrs
