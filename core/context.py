"""GraphContext: the ``g`` a symbolic function receives."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import torch

from oxport.errors import OnnxExporterError, SymbolicDeclined, SymbolicValueError
from oxport.ir import Graph, Node, Type, Value
from oxport.types import tensor_items

if TYPE_CHECKING:
    from oxport.frontends.view import SourceBlock, SourceGraph, SourceNode, SourceValue
    from oxport.registry import SymbolicEntry
    from oxport.walk import Conversion

#: ``write(g, base, new_view) -> new base``: ``base`` with a view's elements replaced.
ViewWriter = Callable[["GraphContext", Value, Value], Value]

_ATTR_KEY = re.compile(r"^(?P<name>.+)_(?P<kind>[ifstgz]|ty|tp)$")
ATEN_DOMAIN = "org.pytorch.aten"
#: Tensor constants with at least this many elements become initializers.
INITIALIZER_MIN_ELEMENTS = 16


def split_op_name(opname: str) -> tuple[str, str]:
    """``"Conv"`` -> ("", "Conv"); ``"onnx::Conv"`` -> ("", "Conv"); ``"d::Op"`` -> ("d", "Op")."""
    if "::" in opname:
        domain, _, op_type = opname.rpartition("::")
        return ("" if domain in ("onnx", "ai.onnx") else domain), op_type
    return "", opname


class GraphContext:
    """Where a symbolic writes its ONNX nodes.

    ``g.op`` follows torch.onnx's conventions: attributes carry a type suffix
    (``alpha_f``, ``axes_i``, ``mode_s``, ``value_t``, ``body_g``, ``type_tp`` for an
    ``onnx.TypeProto``; a list makes a
    list attribute), Python scalars and tensors passed as inputs become
    constants, and ``"domain::Op"`` adds that domain to the opset imports.

    What a symbolic may ask of the conversion beyond emitting nodes has a method here
    (:meth:`value_of`, :meth:`rebind`, :meth:`record_view`, :meth:`run_symbolic`,
    :meth:`convert_block`, :meth:`convert_subgraph`, :attr:`params_are_inputs`...): packs
    use these, never ``g.conversion``.
    """

    def __init__(self, graph: Graph, conversion: Conversion,
                 original_node: SourceNode | None = None,
                 entry: SymbolicEntry | None = None) -> None:
        self.graph = graph
        self.conversion = conversion
        #: The source node being converted (None in a graph pass).
        self.original_node = original_node
        #: The registration of the symbolic converting it (None for a fallback or a pass).
        self.entry = entry
        #: The number of the source node being converted (its rank in the walk).
        self.step: int | None = (conversion.nodes_done if original_node is not None
                                 and conversion is not None else None)
        self._source: str | None = None
        self._scope: str | None = None

    @property
    def source(self) -> str:
        """The user's source line of the node being converted (read when first asked)."""
        if self._source is None:
            from oxport.walk import source_of
            self._source = source_of(self.original_node) if self.original_node is not None \
                and hasattr(self.original_node, "sourceRange") else ""
        return self._source

    @source.setter
    def source(self, text: str) -> None:
        self._source = text

    @property
    def scope(self) -> str:
        """The module path of the node being converted (read when first asked)."""
        if self._scope is None:
            from oxport.walk import scope_of
            self._scope = scope_of(self.original_node) if self.original_node is not None \
                and hasattr(self.original_node, "scopeName") else ""
        return self._scope

    @scope.setter
    def scope(self, text: str) -> None:
        self._scope = text

    @property
    def opset(self) -> int:
        return self.conversion.opset

    @property
    def block(self) -> Graph:
        return self.graph

    @property
    def sizes_may_vary(self) -> bool:
        """Whether a size the types of the node's inputs hold may differ at run time: they
        are a trace's example sizes and ``dynamic_axes`` lets some vary, or an input's sizes
        are computed from tensor values (:meth:`sizes_from_data`). A symbolic choosing by a
        size, such as which dims ``squeeze`` removes, then decides at run time."""
        node = self.original_node
        return self.conversion.sizes_may_vary or (
            node is not None and any(self.sizes_from_data(v) for v in node.inputs()))

    def sizes_from_data(self, source_value: SourceValue) -> bool:
        """Whether ``source_value``'s sizes are computed from tensor values (``zeros(t[0])``
        or what is computed from it), which an example's sizes do not fix."""
        return source_value.unique() in self.conversion.data_sized

    def mark_sizes_from_data(self) -> None:
        """Say that the node's outputs have sizes computed from tensor values (``zeros(t[0])``
        traced); the walker passes this on to what is computed from them."""
        self.conversion.data_sized.update(v.unique() for v in self.original_node.outputs())

    @property
    def params_are_inputs(self) -> bool:
        """Whether parameters stay run-time inputs (``export_params=False`` or
        ``keep_initializers_as_inputs``): a symbolic must not bake their values into new
        constants then."""
        return self.conversion.params_are_inputs

    @property
    def autograd_inlining(self) -> bool:
        """Whether autograd Functions without a symbolic are inlined (export's
        ``autograd_inlining``)."""
        return self.conversion.autograd_inlining

    def fallback_keeping_autograd_functions(self) -> str | None:
        """The name of the first enabled fallback that keeps an autograd Function as one
        node (ONNX_FALLTHROUGH, ONNX_ATEN_FALLBACK), or None."""
        return next((name for name, fallback in self.conversion.fallbacks
                     if fallback.keeps_autograd_functions), None)

    def uses_traced_size(self, value: Value, axis: int, what: str) -> None:
        """Say that the output depends on ``value``'s traced size along ``axis`` in a way the
        graph cannot recompute (``what``: e.g. "the number of pieces, 3"); the export warns
        when that axis turns out to be dynamic."""
        self.conversion.traced_size_uses.append((value, axis, what, self.source))

    # -- the source graph's values -------------------------------------------
    def value_of(self, source_value: SourceValue) -> Value:
        """The converted value of a source value defined so far."""
        return self.conversion.lookup(source_value)

    def rebind(self, source_value: SourceValue, value: Value) -> None:
        """Later uses of ``source_value`` read ``value`` (the op mutated it, e.g. a list
        appended to), within the block being converted."""
        self.conversion.env[source_value.unique()] = value

    def record_view(self, write: ViewWriter) -> None:
        """Note that the node's output views its first input, so that in-place writes to
        the view reach the base: ``write(g, base, new_view)`` returns ``base`` with the
        view's elements replaced by ``new_view``."""
        node = self.original_node
        self.conversion.views[node.output().unique()] = (node.inputsAt(0), write)

    def run_symbolic(self, name: str, *args: Any, type_: Type | None = None) -> Value:
        """Convert op ``name`` (e.g. ``"aten::layer_norm"``) with the symbolic the registry
        names at this opset, for an op exported through another one (a fused op through its
        unfused form, a quantized op on dequantized inputs). Python values become constants;
        ``type_`` types an untyped result (the walker types only the node's outputs).
        Declines when no symbolic serves ``name``."""
        entry = self.conversion.registry.lookup(name, self.opset)
        if entry is None:
            op = self.original_node.kind() if self.original_node is not None else name
            raise SymbolicDeclined(op, f"it is exported through {name}, which nothing "
                                       f"converts at opset {self.opset}")
        values = [a if isinstance(a, Value) else self.python_constant(a) for a in args]
        result = call_symbolic(entry.fn, self, values, {})
        if type_ is not None and result.type().dtype() is None:
            result.setType(type_)
        return result

    # -- nodes -------------------------------------------------------------
    def op(self, opname: str, *raw_args: Any, outputs: int = 1,
           **kwargs: Any) -> Value | tuple[Value, ...]:
        """Add an ONNX node and return its output (a tuple when ``outputs > 1``)."""
        domain, op_type = split_op_name(opname)
        attrs = {}
        for key, value in kwargs.items():
            if value is None:
                continue
            name, kind, value = _attribute(key, value)
            attrs[name] = (kind, value)
        if not domain and op_type == "Constant" and not raw_args and len(attrs) == 1:
            (name, (kind, value)), = attrs.items()
            if name == "value" and kind == "t":
                return self.constant(value)
        inputs = [self.as_value(arg) for arg in raw_args]
        node = self.graph.add_node(domain, op_type, inputs, outputs, attrs)
        self.stamp(node)
        if domain:
            self.graph.use_domain(domain, self.conversion.domain_version(domain))
        return node.output_values[0] if outputs == 1 else tuple(node.output_values)

    def stamp(self, node: Node) -> None:
        """Record where a node came from (source line, scope, plugin)."""
        node.source = self.source
        node.scope = self.scope
        node.provenance = self.entry
        node.origin = self.original_node.kind() if self.original_node is not None else ""
        node.step = self.step

    def at(self, operator: str, *args: Any, overload_name: str = "", outputs: int = 1,
           **kwargs: Any) -> Value | tuple[Value, ...]:
        """An ``ATen`` node in the ``org.pytorch.aten`` domain."""
        return self.op(f"{ATEN_DOMAIN}::ATen", *args, operator_s=operator,
                       overload_name_s=overload_name, outputs=outputs, **kwargs)

    def onnxscript_op(self, onnx_fn: Any, *args: Any, outputs: int = 1,
                      **kwargs: Any) -> Value | tuple[Value, ...]:
        """Call an ONNX-script function (or an ``onnx.FunctionProto``) as a custom op,
        adding the function to the model's local functions and its domain to the imports."""
        proto = _function_proto(onnx_fn)
        root = self.graph.root
        if not any(f.domain == proto.domain and f.name == proto.name for f in root.functions):
            root.functions.append(proto)
            for opset in proto.opset_import:
                if opset.domain not in ("", "ai.onnx"):
                    self.graph.use_domain(opset.domain, opset.version)
        self.graph.use_domain(proto.domain, self.conversion.domain_version(proto.domain, 1))
        return self.op(f"{proto.domain}::{proto.name}", *args, outputs=outputs, **kwargs)

    # -- constants and values ------------------------------------------------
    def constant(self, value: Any, dtype: torch.dtype | None = None) -> Value:
        """A constant; it becomes a node or an initializer only if something uses it."""
        tensor = _as_tensor(value, dtype)
        result = self.graph.deferred(Type.of(tensor), _emit_constant(tensor), const=tensor)
        result.producer = Node("", "Constant", [], [result], {"value": ("t", tensor)})
        return result

    def python_constant(self, value: Any, type_: Type | None = None) -> Value:
        """A TorchScript non-tensor constant (int, float, list, None, str, device...)."""
        if isinstance(value, torch.Tensor):
            return self.constant(value)

        def materialize(graph: Graph) -> Value:
            if value is None or isinstance(value, (str, torch.device)):
                raise OnnxExporterError(
                    f"A {type(value).__name__} constant ({value!r}) cannot be an ONNX input."
                )
            # A traced Python number is typed as its use (2.5 times a float64 tensor is a
            # float64 constant): emit it in that dtype, as its type says.
            dtype = type_.dtype() if type_ is not None and type_.kind() == "TensorType" else None
            return _emit_constant(_as_tensor(value, dtype))(graph)

        result = self.graph.deferred(type_ or Type.of(value), materialize, const=value)
        attrs = {} if value is None else {"value": (_kind_of(value), value)}
        result.producer = Node("prim", "Constant", [], [result], attrs)
        return result

    def as_value(self, arg: Any) -> Value | None:
        """``arg`` as an input of ``g.op``: a Value or None as it is, a tensor, array or
        Python number as a constant."""
        if arg is None or isinstance(arg, Value):
            return arg
        if isinstance(arg, (torch.Tensor, np.ndarray, bool, int, float, list, tuple)):
            return self.constant(arg)
        raise SymbolicValueError(
            f"g.op() got an input of type {type(arg).__name__} ({arg!r}); inputs must be "
            "Values, tensors, or Python numbers."
        )

    # -- subgraphs -----------------------------------------------------------
    def subgraph(self, name: str = "subgraph") -> GraphContext:
        """A context over a fresh subgraph (for If/Loop bodies), sharing this conversion."""
        child = GraphContext(Graph(self.graph.root.fresh_name(name), parent=self.graph),
                             self.conversion, self.original_node, self.entry)
        child._source, child._scope, child.step = self._source, self._scope, self.step
        return child

    def on(self, graph: Graph) -> GraphContext:
        """This context writing into ``graph`` (used when a deferred value materializes)."""
        if graph is self.graph:
            return self
        other = GraphContext(graph, self.conversion, self.original_node, self.entry)
        other._source, other._scope, other.step = self._source, self._scope, self.step
        return other

    def for_entry(self, entry: SymbolicEntry) -> GraphContext:
        """This context for another symbolic of the same node."""
        other = GraphContext(self.graph, self.conversion, self.original_node, entry)
        other._source, other._scope, other.step = self._source, self._scope, self.step
        return other

    def convert_block(self, block: SourceBlock, inputs: Sequence[Value]) -> list[Value]:
        """Convert a block of the source graph (an If branch, a Loop body) into this
        context's graph, its inputs bound to ``inputs``; returns its outputs."""
        return self.conversion.convert_block(block, self.graph, list(inputs))

    def convert_subgraph(self, source_graph: SourceGraph, inputs: Sequence[Value]) -> list[Value]:
        """Convert a separate source graph (an autograd Function's recorded forward) into
        this context's graph, its inputs bound to ``inputs``; returns its outputs."""
        return self.conversion.convert_subgraph(source_graph, self.graph, list(inputs))


@dataclasses.dataclass
class SymbolicContext:
    """What a symbolic whose first parameter is annotated ``SymbolicContext`` receives
    before ``g`` (torch.onnx 1.13's form); ``cur_node`` is the TorchScript node."""

    params_dict: dict[str, Any]
    env: dict[Any, Any]
    cur_node: Any
    onnx_block: Any


def call_symbolic(fn: Callable[..., Any], g: GraphContext, args: Sequence[Any],
                  kwargs: dict[str, Any]) -> Any:
    """Call a symbolic; one whose first parameter is annotated ``SymbolicContext`` gets
    that context first (the 1.13-era ``symbolic(ctx, g, *args)`` form)."""
    if _wants_context(fn):
        ctx = SymbolicContext(params_dict={}, env={}, cur_node=g.original_node,
                              onnx_block=g.graph)
        return fn(ctx, g, *args, **kwargs)
    return fn(g, *args, **kwargs)


@functools.lru_cache(maxsize=None)
def _wants_context(fn: Any) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if not params:
        return False
    annotation = params[0].annotation
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return name.rpartition(".")[2] == "SymbolicContext"


def _function_proto(onnx_fn: Any) -> onnx.FunctionProto:
    if isinstance(onnx_fn, onnx.FunctionProto):
        return onnx_fn
    try:
        import onnxscript  # noqa: F401 - optional dependency
    except ImportError:
        raise OnnxExporterError(
            "g.onnxscript_op needs the optional dependency onnxscript: install it with "
            "`pip install onnxscript` (or `pip install oxport[onnxscript]`), or pass an "
            "onnx.FunctionProto instead.") from None
    to_proto = getattr(onnx_fn, "to_function_proto", None)
    if to_proto is None:
        raise SymbolicValueError(
            f"g.onnxscript_op expects a function decorated with @onnxscript.script(opset) or an "
            f"onnx.FunctionProto, not {type(onnx_fn).__name__}.")
    return to_proto()


def _as_tensor(value: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value if dtype is None else value.to(dtype)
    if isinstance(value, np.ndarray):
        tensor = torch.from_numpy(value)
        return tensor if dtype is None else tensor.to(dtype)
    return torch.tensor(value, dtype=dtype)


def _emit_constant(tensor: torch.Tensor):
    def materialize(graph: Graph) -> Value:
        # Constant supports non-float types only from opset 9.
        float_only = graph.root.opset_imports.get("", 9) < 9 and not tensor.dtype.is_floating_point
        if float_only and graph.parent is not None:
            raise OnnxExporterError(
                f"A {tensor.dtype} constant inside a subgraph needs opset 9 or higher.")
        if graph.parent is None and (tensor.numel() >= INITIALIZER_MIN_ELEMENTS or float_only):
            return graph.add_initializer(graph.fresh_name("const"), tensor)
        key = (tensor.dtype, tuple(tensor.shape), tuple(tensor_items(tensor)))
        cached = graph.constant_cache.get(key)
        if cached is not None:
            return cached
        node = graph.add_node("", "Constant", [], 1, {"value": ("t", tensor)})
        value = node.output_values[0]
        value.setType(Type.of(tensor))
        value.const = tensor
        graph.constant_cache[key] = value
        return value
    return materialize


def _kind_of(value: Any) -> str:
    if isinstance(value, bool) or isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    if isinstance(value, str):
        return "s"
    if isinstance(value, torch.Tensor):
        return "t"
    if isinstance(value, (list, tuple)) and value:
        return _kind_of(value[0]) + "s"
    return "ival"


def _attribute(key: str, value: Any) -> tuple[str, str, Any]:
    """Split ``alpha_f`` into ("alpha", "f") and normalise the value."""
    match = _ATTR_KEY.match(key)
    if match:
        name, kind = match.group("name"), match.group("kind")
    else:
        name, kind = key, "z"
    if isinstance(value, GraphContext):
        value = value.graph
    is_list = isinstance(value, (list, tuple))
    if kind == "z":
        sample = value[0] if is_list and value else value
        kind = {bool: "i", int: "i", float: "f", str: "s"}.get(type(sample), "t")
        if isinstance(sample, Graph):
            kind = "g"
    try:
        if kind == "i":
            value = [int(v) for v in value] if is_list else int(value)
        elif kind == "f":
            value = [float(v) for v in value] if is_list else float(value)
        elif kind == "s":
            value = [str(v) for v in value] if is_list else (
                value.decode() if isinstance(value, bytes) else str(value))
        elif kind == "t":
            value = [_as_tensor(v) for v in value] if is_list else _as_tensor(value)
        elif kind == "ty":
            value = int(value)
        elif kind == "tp" and not isinstance(value, onnx.TypeProto):
            raise TypeError("expected an onnx.TypeProto")
    except (TypeError, ValueError) as exc:
        raise SymbolicValueError(
            f"Attribute {key}={value!r} does not match its '_{kind}' suffix: {exc}"
        ) from exc
    if kind == "ty":
        return name, "i", value
    return name, (kind + "s" if is_list else kind), value
