"""``export_modules_as_functions``: module calls become ONNX local functions.

The walker stamps every top-level node with ``node.calls``, the chain of module
calls it was made in (call ids such as ``layers.0`` / ``layers.0.attn``; a
module's second call is ``act#1``). This pass groups the nodes of each selected
call into a function body, innermost calls first, and replaces them by one node
calling that function.

* **Sharing.** Calls of the same module class whose bodies have the same
  structure (ops, wiring, attribute names) share one ``FunctionProto``: domain
  the class's module (``torch.nn.modules.linear``), name the class name, with
  ``.1``, ``.2``... for further structures of that class (a ``Linear`` without
  bias).
* **Attributes.** Annotated class attributes (PEP 526, e.g. ``eps: float``) go on
  the call node and are declared by the function; the body does not use them.
  Attribute values that differ between the calls sharing a function (an
  epsilon, a Constant made from ``self.scale``) become ``inferred::`` function
  attributes that the body references (``ref_attr_name``); the name is the
  module attribute holding that value when one does (``inferred::scale``),
  else ``inferred::<op>_<attribute>``. Tensor-valued and private (``_name``)
  annotated attributes are not exported.
* **Weights** used in a body are function inputs (functions hold no
  initializers); Constant nodes are copied into every body that uses them.

The model itself is the main graph, never a function (torch.onnx also wraps it
in one). Code of ``torch.jit.script`` functions called from a traced module is
inlined without a module scope, so its nodes land in the main graph.
"""

from __future__ import annotations

import dataclasses
import heapq
import inspect
from collections.abc import Collection, Iterable
from typing import Any

import onnx
import torch

from oxport.errors import InvalidExportArgumentError
from oxport.ir import Graph, Node, Value
from oxport.serialize.proto import Namer, node_proto
from oxport.serialize.weights import raw_bytes

#: Local functions came with IR 8, which opset 15 introduced.
MIN_OPSET = 15
_SCALAR_KINDS = ("i", "f", "s", "t", "is", "fs", "ss", "ts")


def check_option(option: Any, opset: int, model: Any) -> bool | frozenset[type]:
    """Validate ``export_modules_as_functions``: False, True, or a set of module types."""
    if option is False or option is None:
        return False
    if not isinstance(option, bool):
        if isinstance(option, (str, bytes)) or not isinstance(option, Collection):
            raise InvalidExportArgumentError(
                "export_modules_as_functions must be True, False or a set of nn.Module types, "
                f"not {option!r}.")
        bad = [t for t in option if not (isinstance(t, type) and issubclass(t, torch.nn.Module))]
        if bad:
            raise InvalidExportArgumentError(
                "export_modules_as_functions must hold nn.Module types (classes such as "
                f"torch.nn.Linear), not {bad[0]!r}.")
        if not option:
            return False
    if opset < MIN_OPSET:
        raise InvalidExportArgumentError(
            f"export_modules_as_functions requires opset_version >= {MIN_OPSET} (ONNX local "
            f"functions need IR version 8), but opset_version is {opset}. Export with "
            f"opset_version={MIN_OPSET} or higher, or with export_modules_as_functions=False.")
    if not isinstance(model, torch.nn.Module) or isinstance(model, torch.jit.ScriptModule):
        raise InvalidExportArgumentError(
            "export_modules_as_functions needs an nn.Module that oxport traces; a ScriptModule "
            "or ScriptFunction has no module calls to turn into functions.")
    return True if option is True else frozenset(option)


def extract_functions(graph: Graph, model: torch.nn.Module,
                      selection: bool | Collection[type]) -> int:
    """Turn the selected module calls of ``graph`` into local function calls.

    Appends the ``FunctionProto`` s to ``graph.functions`` and returns how many there are.
    """
    modules = dict(model.named_modules())

    def selected(call_id: str) -> bool:
        module = modules.get(_path(call_id))
        return module is not None and (selection is True or type(module) in selection)

    return _Extraction(graph, modules, selected).run()


# -- the call tree ---------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class _Call:
    """One call of a selected module: its nodes and inner calls, then its function."""

    id: str
    module: torch.nn.Module
    items: list[Any] = dataclasses.field(default_factory=list)  # Node | _Call, in order
    body: list[Node] = dataclasses.field(default_factory=list)
    inputs: list[Value] = dataclasses.field(default_factory=list)
    outputs: list[Value] = dataclasses.field(default_factory=list)
    node: Node | None = None
    group: _Group | None = None
    #: (body node index, attribute name) -> (kind, value), for every scalar attribute.
    values: dict[tuple[int, str], tuple[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(eq=False)
class _Group:
    """Calls that share one function."""

    domain: str
    name: str
    members: list[_Call] = dataclasses.field(default_factory=list)
    annotated: list[str] = dataclasses.field(default_factory=list)
    #: (body node index, attribute name) -> function attribute name, for varying values.
    inferred: dict[tuple[int, str], str] = dataclasses.field(default_factory=dict)
    done: bool = False


class _Extraction:
    """One run of the pass over a graph: the call tree, the groups, the protos."""

    def __init__(self, graph: Graph, modules: dict[str, torch.nn.Module],
                 selected: Any) -> None:
        self.graph = graph
        self.modules = modules
        self.groups: dict[Any, _Group] = {}
        self.names: dict[tuple[str, str], int] = {}
        self.protos: list[onnx.FunctionProto] = []
        self.call_of_node: dict[int, _Call] = {}
        #: Constant nodes belong to no call: each body (and the main graph) that uses one
        #: gets it. Keyed by the id of their output.
        self.constants = {id(n.output_values[0]): n for n in graph.nodes if _is_constant(n)}
        self.nodes = [n for n in graph.nodes if not _is_constant(n)]
        #: id(node) -> the selected calls it was made in, outermost first.
        self.chains = {id(n): tuple(c for c in n.calls if selected(c)) for n in self.nodes}
        self.consumers: dict[int, list[Node]] = {}
        for node in self.nodes:
            for value in _uses(node):
                self.consumers.setdefault(id(value), []).append(node)
        self.graph_outputs = {id(v) for v in graph.outputs}

    def run(self) -> int:
        graph, nodes = self.graph, self.nodes
        roots: list[Any] = []
        calls: dict[str, _Call] = {}
        for node in nodes:
            items = roots
            for call_id in self.chains[id(node)]:
                call = calls.get(call_id)
                if call is None:
                    call = calls[call_id] = _Call(call_id, self.modules[_path(call_id)])
                    items.append(call)
                items = call.items
            items.append(node)
        if not calls:
            return 0
        tops = [item for item in roots if isinstance(item, _Call)]
        for call in tops:
            self._build(call)
        for call in tops:
            self._finish(call.group)
        top = [item.node if isinstance(item, _Call) else item for item in roots]
        for call in tops:
            for index, value in enumerate(call.outputs):
                value.producer, value.index = call.node, index
        graph.nodes = _toposort(self._constants_for(top, graph.outputs) + top)
        for group in self.groups.values():
            graph.use_domain(group.domain, 1)
        graph.functions.extend(self.protos)
        return len(self.protos)

    # -- bodies, bottom-up -------------------------------------------------------------
    def _build(self, call: _Call) -> None:
        for item in call.items:
            if isinstance(item, _Call):
                self._build(item)
        members = [item.node if isinstance(item, _Call) else item for item in call.items]
        call.body = _toposort(self._constants_for(members) + members)
        produced = {id(v) for n in call.body for v in n.output_values}
        seen: set[int] = set()
        for node in call.body:
            for value in _uses(node):
                if id(value) not in produced and id(value) not in seen:
                    seen.add(id(value))
                    call.inputs.append(value)
        for node in self._descendant_nodes(call):
            for value in node.output_values:
                if id(value) in self.graph_outputs or any(
                        call.id not in self.chains[id(user)]
                        for user in self.consumers.get(id(value), ())):
                    call.outputs.append(value)
        order = {id(v): i for i, v in enumerate(v for n in call.body for v in n.output_values)}
        call.outputs.sort(key=lambda v: order[id(v)])

        structure = _structure(call.body, call.inputs, call.outputs)
        cls = type(call.module)
        key = (cls, structure)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(cls.__module__, self._fresh_name(cls))
        group.members.append(call)
        call.group = group
        node = Node(group.domain, group.name, list(call.inputs), call.outputs)
        node.source = next((n.source for n in members if n.source), "")
        node.scope = _path(call.id)
        chain = self.chains[id(self._descendant_nodes(call)[0])]
        node.calls = chain[:chain.index(call.id) + 1]
        call.node = node
        self.call_of_node[id(node)] = call

    def _descendant_nodes(self, call: _Call) -> list[Node]:
        found: list[Node] = []
        for item in call.items:
            found += self._descendant_nodes(item) if isinstance(item, _Call) else [item]
        return found

    def _constants_for(self, nodes: list[Node], extra: Iterable[Value] = ()) -> list[Node]:
        """The Constant nodes that ``nodes`` (and ``extra``) use, in first-use order."""
        found: dict[int, Node] = {}
        for value in [*(v for n in nodes for v in _uses(n)), *extra]:
            node = self.constants.get(id(value))
            if node is not None:
                found.setdefault(id(node), node)
        return list(found.values())

    def _fresh_name(self, cls: type) -> str:
        count = self.names.get((cls.__module__, cls.__name__), 0)
        self.names[(cls.__module__, cls.__name__)] = count + 1
        return cls.__name__ if count == 0 else f"{cls.__name__}.{count}"

    # -- attributes and protos, per group ----------------------------------------------
    def _finish(self, group: _Group) -> None:
        """Settle the group's attributes, set them on each call node, make the proto."""
        if group.done:
            return
        group.done = True
        for member in group.members:
            for item in member.items:
                if isinstance(item, _Call):
                    self._finish(item.group)
        for member in group.members:  # inner call nodes now carry their attributes
            for index, node in enumerate(member.body):
                for name, (kind, value) in node.attrs.items():
                    if kind in _SCALAR_KINDS:
                        member.values[(index, name)] = (kind, value)
        annotated = [annotated_attributes(m.module) for m in group.members]
        group.annotated = list(dict.fromkeys(name for attrs in annotated for name in attrs))
        keys = list(dict.fromkeys(k for m in group.members for k in m.values))
        # A value that differs between the calls becomes a function attribute; an inner
        # call's annotated ``eps`` and its ``inferred::eps`` with the same values share one.
        shared: dict[Any, str] = {}
        for key in keys:
            seen = tuple((m.values[key][0], _value_key(*m.values[key])) if key in m.values
                         else None for m in group.members)
            if len(set(seen)) == 1:
                continue
            seen = (key[0], key[1].removeprefix("inferred::"), seen)
            if seen not in shared:
                name = base = self._inferred_name(group, key)
                n = 1
                while name in shared.values():
                    name, n = f"{base}_{n}", n + 1
                shared[seen] = name
            group.inferred[key] = shared[seen]
        for member, attrs in zip(group.members, annotated):
            member.node.attrs = dict(attrs)
            for key, name in group.inferred.items():
                if key in member.values:
                    member.node.attrs[name] = member.values[key]
        self.protos.append(self._proto(group))

    def _inferred_name(self, group: _Group, key: tuple[int, str]) -> str:
        """``inferred::<module attribute>`` when every call's module holds the value under
        the same name; ``inferred::<inner module>.<attribute>`` for an inner call's
        attribute; else ``inferred::<op>_<attribute>``."""
        index, attr = key
        attr = attr.removeprefix("inferred::")
        inner = self.call_of_node.get(id(group.members[0].body[index]))
        if inner is not None:
            outer = _path(group.members[0].id)
            return f"inferred::{_path(inner.id).removeprefix(outer + '.')}.{attr}"
        common: set[str] | None = None
        for member in group.members:
            value = member.values.get(key)
            names = {name for name, held in vars(member.module).items()
                     if not name.startswith("_") and value is not None
                     and _same_scalar(held, *value)}
            common = names if common is None else common & names
        if common and len(common) == 1:
            return f"inferred::{common.pop()}"
        return f"inferred::{group.members[0].body[index].op_type}_{attr}"

    def _proto(self, group: _Group) -> onnx.FunctionProto:
        call = group.members[0]
        namer = Namer()
        inputs = [namer.name(v) for v in call.inputs]
        nodes = []
        counters: dict[str, int] = {}
        for index, node in enumerate(call.body):
            proto = node_proto(node, namer, False, True, counters, {}, {})
            for attr in proto.attribute:
                ref = group.inferred.get((index, attr.name))
                if ref is not None:  # the body reads the value from the call's attribute
                    name, kind = attr.name, attr.type
                    attr.Clear()
                    attr.name, attr.type, attr.ref_attr_name = name, kind, ref
            nodes.append(proto)
        outputs = [namer.name(v) for v in call.outputs]
        imports = {"": self.graph.opset_imports.get("", MIN_OPSET)}
        for node in call.body:
            for inner in [node, *_subgraph_nodes(node)]:
                if inner.domain and inner.domain not in imports:
                    imports[inner.domain] = self.graph.opset_imports.get(inner.domain, 1)
        return onnx.helper.make_function(
            group.domain, group.name, inputs, outputs, nodes,
            [onnx.helper.make_opsetid(d, v) for d, v in imports.items()],
            attributes=list(dict.fromkeys([*group.annotated, *group.inferred.values()])),
            doc_string=f"{group.domain}.{type(call.module).__qualname__}")


def annotated_attributes(module: torch.nn.Module) -> dict[str, tuple[str, Any]]:
    """The module's PEP 526 annotated attributes that ONNX attributes can hold.

    Class annotations of ``module``'s classes below ``nn.Module``, public names only,
    whose value is a bool, int, float, str, or a list/tuple of one of those.
    """
    names: list[str] = []
    for cls in reversed(type(module).__mro__):
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module) \
                and cls is not torch.nn.Module:
            names += [n for n in inspect.get_annotations(cls) if not n.startswith("_")]
    attrs: dict[str, tuple[str, Any]] = {}
    for name in dict.fromkeys(names):
        value = _attribute_value(getattr(module, name, None))
        if value is not None:
            attrs[name] = value
    return attrs


def _attribute_value(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, (bool, int)):
        return "i", int(value)
    if isinstance(value, float):
        return "f", value
    if isinstance(value, str):
        return "s", value
    if isinstance(value, (list, tuple)) and value:
        if all(isinstance(v, (bool, int)) for v in value):
            return "is", [int(v) for v in value]
        if all(isinstance(v, (bool, int, float)) for v in value):
            return "fs", [float(v) for v in value]
        if all(isinstance(v, str) for v in value):
            return "ss", list(value)
    return None


# -- helpers ----------------------------------------------------------------------------
def _path(call_id: str) -> str:
    """``layers.0.act#1`` -> ``layers.0.act``."""
    return call_id.partition("#")[0]


def _is_constant(node: Node) -> bool:
    return (not node.domain and node.op_type == "Constant" and not node.input_values
            and len(node.output_values) == 1)


def _subgraphs(node: Node) -> list[Graph]:
    found = []
    for kind, value in node.attrs.values():
        if kind == "g":
            found.append(value)
        elif kind == "gs":
            found += list(value)
    return found


def _subgraph_nodes(node: Node) -> list[Node]:
    return [inner for sub in _subgraphs(node) for inner in sub.walk()]


def _uses(node: Node) -> list[Value]:
    """The values a node reads: its inputs, then what its subgraphs take from outside."""
    values = [v for v in node.input_values if v is not None]
    for sub in _subgraphs(node):
        values += _captured(sub)
    return values


def _captured(graph: Graph) -> list[Value]:
    defined = {id(v) for v in graph.inputs}
    found = []
    for node in graph.nodes:
        found += [v for v in _uses(node) if id(v) not in defined]
        defined.update(id(v) for v in node.output_values)
    return found + [v for v in graph.outputs if id(v) not in defined]


def _toposort(nodes: list[Node]) -> list[Node]:
    """``nodes`` in an order where each comes after the nodes it reads (stable)."""
    position = {id(n): i for i, n in enumerate(nodes)}
    producer = {id(v): n for n in nodes for v in n.output_values}
    waiting: dict[int, int] = {}
    readers: dict[int, list[Node]] = {}
    for node in nodes:
        deps = {id(producer[id(v)]) for v in _uses(node) if id(v) in producer}
        deps.discard(id(node))
        waiting[id(node)] = len(deps)
        for dep in deps:
            readers.setdefault(dep, []).append(node)
    ready = [(position[id(n)], n) for n in nodes if waiting[id(n)] == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        _, node = heapq.heappop(ready)
        ordered.append(node)
        for reader in readers.get(id(node), ()):
            waiting[id(reader)] -= 1
            if waiting[id(reader)] == 0:
                heapq.heappush(ready, (position[id(reader)], reader))
    return ordered if len(ordered) == len(nodes) else nodes


def _structure(body: list[Node], inputs: list[Value], outputs: list[Value]) -> Any:
    """A hashable description of a body: ops, wiring and attribute names, with the
    values of scalar attributes left out (subgraphs are described in full)."""
    env = {id(v): ("in", i) for i, v in enumerate(inputs)}
    return len(inputs), _encode(body, env, 0), tuple(env[id(v)] for v in outputs)


def _encode(nodes: list[Node], env: dict[int, Any], depth: int) -> tuple[Any, ...]:
    encoded = []
    for index, node in enumerate(nodes):
        ins = tuple(None if v is None else env.get(id(v), ("?", id(v))) for v in node.input_values)
        attrs = []
        for name, (kind, value) in sorted(node.attrs.items()):
            if kind in ("g", "gs"):
                graphs = value if kind == "gs" else [value]
                attrs.append((name, kind, tuple(_encode_graph(g, env, depth + 1)
                                                for g in graphs)))
            elif depth == 0:
                attrs.append((name, kind))
            else:
                attrs.append((name, kind, _value_key(kind, value)))
        encoded.append((node.domain, node.op_type, ins, len(node.output_values), tuple(attrs)))
        for k, value in enumerate(node.output_values):
            env[id(value)] = (depth, index, k)
    return tuple(encoded)


def _encode_graph(graph: Graph, outer: dict[int, Any], depth: int) -> tuple[Any, ...]:
    env = dict(outer)
    env.update((id(v), ("sub", depth, i)) for i, v in enumerate(graph.inputs))
    nodes = _encode(graph.nodes, env, depth)
    return nodes, tuple(env.get(id(v)) for v in graph.outputs)


def _value_key(kind: str, value: Any) -> Any:
    if kind == "t":
        if isinstance(value, onnx.TensorProto):
            return value.SerializeToString()
        dtype = value.dtype if isinstance(value, torch.Tensor) else str(getattr(value, "dtype", ""))
        return str(dtype), tuple(value.shape), bytes(raw_bytes(value))
    if kind == "ts":
        return tuple(_value_key("t", v) for v in value)
    if isinstance(value, list):
        return kind, tuple(repr(v) for v in value)
    return kind, repr(value)


def _same_scalar(held: Any, kind: str, value: Any) -> bool:
    """Whether a module attribute ``held`` is the scalar attribute value ``(kind, value)``."""
    if isinstance(held, bool) or not isinstance(held, (int, float)):
        return False
    if kind == "t" and isinstance(value, torch.Tensor) and value.numel() == 1:
        return bool(torch.tensor(held, dtype=value.dtype) == value.reshape(()))
    if kind == "f":
        return torch.tensor(held, dtype=torch.float32).item() == \
            torch.tensor(value, dtype=torch.float32).item()
    if kind == "i":
        return isinstance(held, int) and held == value
    return False
