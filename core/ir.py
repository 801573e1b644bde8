"""oxport's graph IR: Graph, Node and Value, with the torch.onnx-compatible surface.

Symbolic functions written for ``torch.onnx`` ask values questions such as
``v.type().sizes()``, ``v.type().scalarType()``, ``v.node().kind()`` or
``v.debugName()``; these classes answer them. Values may be *deferred*: a
constant or a packed list that exists only as Python data until an ONNX node
consumes it, at which point the graph materializes it once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from oxport.types import JitScalarType

_NO_CONST = object()


#: The real dtype of each complex dtype's parts.
REAL_OF_COMPLEX = {torch.complex32: torch.float16, torch.complex64: torch.float32,
                   torch.complex128: torch.float64}
#: The complex dtype whose parts have each real dtype.
COMPLEX_OF_REAL = {real: complex_ for complex_, real in REAL_OF_COMPLEX.items()}


class Type:
    """A value's type in TorchScript terms (``TensorType``, ``IntType``, ``ListType``...)."""

    __slots__ = ("_kind", "_dtype", "_shape", "_elem", "_requires_grad")

    def __init__(self, kind: str = "TensorType", dtype: torch.dtype | None = None,
                 shape: Sequence[int | str | None] | None = None, elem: Type | None = None,
                 requires_grad: bool = False) -> None:
        self._kind = kind
        self._dtype = dtype
        self._shape = tuple(shape) if shape is not None else None
        self._elem = elem
        self._requires_grad = requires_grad

    # -- construction -----------------------------------------------------
    @classmethod
    def tensor(cls, dtype: torch.dtype | None = None,
               shape: Sequence[int | str | None] | None = None) -> Type:
        return cls("TensorType", dtype, shape)

    @classmethod
    def of(cls, obj: Any) -> Type:
        """The type of a Python object, a tensor, or a ``torch._C`` type."""
        if isinstance(obj, Type):
            return obj
        if isinstance(obj, torch.Tensor):
            return cls("TensorType", obj.dtype, tuple(obj.shape), requires_grad=obj.requires_grad)
        if isinstance(obj, torch._C.Type):
            return _from_torch_type(obj)
        if obj is None:
            return cls("NoneType")
        if isinstance(obj, bool):
            return cls("BoolType", torch.bool, ())
        if isinstance(obj, int):
            return cls("IntType", torch.int64, ())
        if isinstance(obj, float):
            return cls("FloatType", torch.float32, ())
        if isinstance(obj, str):
            return cls("StringType")
        if isinstance(obj, torch.device):
            return cls("DeviceObjType")
        if isinstance(obj, (list, tuple)):
            elem = cls.of(obj[0]) if obj else cls("TensorType")
            return cls("ListType" if isinstance(obj, list) else "TupleType", elem=elem)
        return cls("AnyType")

    # -- the torch._C.Type surface -----------------------------------------
    def kind(self) -> str:
        return self._kind

    def dtype(self) -> torch.dtype | None:
        return self._dtype

    def scalarType(self) -> str | None:  # noqa: N802 - torch.onnx compatible
        if self._dtype is None:
            return None
        return JitScalarType.from_dtype(self._dtype).scalar_name()

    def dim(self) -> int | None:
        return None if self._shape is None else len(self._shape)

    def sizes(self) -> list[int]:
        """Static sizes; raises when the rank or any dim is unknown (as torch does)."""
        if self._shape is None or not all(isinstance(d, int) for d in self._shape):
            raise RuntimeError(f"Type {self} does not have complete sizes.")
        return list(self._shape)

    def varyingSizes(self) -> list[int | None] | None:  # noqa: N802
        if self._shape is None:
            return None
        return [d if isinstance(d, int) else None for d in self._shape]

    def symbolic_sizes(self) -> list[int | str | None] | None:
        return None if self._shape is None else list(self._shape)

    def isSubtypeOf(self, other: Any) -> bool:  # noqa: N802 - torch._C.Type's surface
        """Whether this type is ``other`` (a ``torch._C`` type or a Type) or narrower, by kind
        and element kind: what torch.onnx's helpers ask (``_is_tensor``, ``_is_list``)."""
        kind = other.kind()
        if kind == "AnyType":
            return True
        if kind != self._kind:
            return False
        if kind in ("ListType", "OptionalType") and self._elem is not None:
            return self._elem.isSubtypeOf(other.getElementType())
        return True

    def isCompleteTensor(self) -> bool:  # noqa: N802
        return (self._kind == "TensorType" and self._dtype is not None
                and self._shape is not None and all(isinstance(d, int) for d in self._shape))

    def requires_grad(self) -> bool:
        return self._requires_grad

    def requiresGrad(self) -> bool:  # noqa: N802
        return self._requires_grad

    def getElementType(self) -> Type:  # noqa: N802
        if self._elem is None:
            raise RuntimeError(f"{self} has no element type.")
        return self._elem

    def with_dtype(self, dtype: torch.dtype) -> Type:
        return Type(self._kind, dtype, self._shape, self._elem, self._requires_grad)

    def with_sizes(self, sizes: Sequence[int | str | None] | None) -> Type:
        return Type(self._kind, self._dtype, sizes, self._elem, self._requires_grad)

    def as_real_pairs(self) -> Type:
        """A complex tensor type as the real tensor that carries it in ONNX: its (real,
        imaginary) pairs on a trailing axis of 2. Other types are returned unchanged."""
        if self._kind != "TensorType" or self._dtype not in REAL_OF_COMPLEX:
            return self
        shape = None if self._shape is None else [*self._shape, 2]
        return Type(self._kind, REAL_OF_COMPLEX[self._dtype], shape,
                    requires_grad=self._requires_grad)

    @property
    def shape(self) -> tuple[int | str | None, ...] | None:
        return self._shape

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and (self._kind, self._dtype, self._shape, self._elem) == (
            other._kind, other._dtype, other._shape, other._elem)

    def __hash__(self) -> int:
        return hash((self._kind, self._dtype, self._shape))

    def __str__(self) -> str:
        if self._kind == "TensorType":
            if self._dtype is None:
                return "Tensor"
            name = JitScalarType.from_dtype(self._dtype).scalar_name()
            if self._shape is None:
                return name
            return f"{name}({', '.join('?' if d is None else str(d) for d in self._shape)})"
        if self._kind == "ListType" and self._elem is not None:
            return f"{self._elem}[]"
        return self._kind.replace("Type", "").lower() or self._kind

    __repr__ = __str__


#: TorchScript scalars are 0-d tensors in ONNX (a Python float becomes float32).
_SCALAR_TYPES = {"IntType": torch.int64, "FloatType": torch.float32, "BoolType": torch.bool,
                 "NumberType": None}


#: A quantized tensor is exported as the float output of a DequantizeLinear (QDQ form).
_QUANTIZED = {torch.quint8, torch.qint8, torch.qint32, torch.quint4x2, torch.quint2x4}


def _from_torch_type(t: torch._C.Type) -> Type:
    kind = t.kind()
    if kind == "TensorType":
        sizes = t.varyingSizes() if t.dim() is not None else None
        req = bool(t.requires_grad()) if t.requires_grad() is not None else False
        dtype = torch.float32 if t.dtype() in _QUANTIZED else t.dtype()
        return Type("TensorType", dtype, sizes, requires_grad=req)
    if kind in _SCALAR_TYPES:
        return Type(kind, _SCALAR_TYPES[kind], ())
    if kind in ("ListType", "OptionalType"):
        return Type(kind, elem=_from_torch_type(t.getElementType()))
    if kind == "TupleType":
        elems = t.elements()
        return Type(kind, elem=_from_torch_type(elems[0]) if elems else None)
    return Type(kind)


def _known_dtype(t: Type) -> torch.dtype | None:
    """A tensor's dtype, or a list's item dtype."""
    if t.kind() in ("ListType", "TupleType"):
        return t._elem.dtype() if t._elem is not None else None
    return t.dtype()


class Value:
    """A value of the graph: a graph input, a node output, or a deferred constant/list."""

    __slots__ = ("name", "_type", "producer", "index", "const", "graph", "_materialize", "meta")

    def __init__(self, graph: Graph | None, name: str = "", type_: Type | None = None,
                 producer: Node | None = None, index: int = 0) -> None:
        self.graph = graph
        self.name = name
        self._type = type_ or Type()
        self.producer = producer
        self.index = index
        self.const: Any = _NO_CONST
        self._materialize: Callable[[Graph], Value] | None = None
        self.meta: dict[str, Any] | None = None

    # -- torch._C.Value surface --------------------------------------------
    def type(self) -> Type:
        return self._type

    def setType(self, t: Any) -> Value:  # noqa: N802
        self._type = Type.of(t) if not isinstance(t, Type) else t
        return self

    def inferTypeFrom(self, tensor: torch.Tensor) -> Value:  # noqa: N802
        self._type = Type.of(tensor)
        return self

    def node(self) -> Node:
        if self.producer is None:
            return Node("prim", "Param", [], [self])
        return self.producer

    def debugName(self) -> str:  # noqa: N802
        return self.name

    def setDebugName(self, name: str) -> Value:  # noqa: N802
        self.name = name
        return self

    def isCompleteTensor(self) -> bool:  # noqa: N802
        return self._type.isCompleteTensor()

    def requires_grad(self) -> bool:
        return self._type.requires_grad()

    def requiresGrad(self) -> bool:  # noqa: N802
        return self._type.requires_grad()

    def toIValue(self) -> Any:  # noqa: N802
        return self.const if self.is_const else None

    def unique(self) -> int:
        return id(self)

    def offset(self) -> int:
        return self.index

    # -- oxport ------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return self.const is not _NO_CONST

    @property
    def is_deferred(self) -> bool:
        return self._materialize is not None

    @property
    def is_parameter(self) -> bool:
        """Whether this value is a model parameter or buffer (an initializer from the model)."""
        return bool(self.meta and self.meta.get("parameter"))

    @property
    def is_omitted(self) -> bool:
        """Whether this is an optional node output nothing reads, written with an empty
        name (the runtime then neither computes nor allocates it): :meth:`omit`."""
        return bool(self.meta and self.meta.get("omitted"))

    def omit(self) -> None:
        """Mark this optional node output as unread: the file names it ``""``."""
        self.meta = {**(self.meta or {}), "omitted": True}

    @property
    def dtype(self) -> torch.dtype | None:
        return self._type.dtype()

    @property
    def shape(self) -> tuple[int | str | None, ...] | None:
        return self._type.shape

    def __repr__(self) -> str:
        return f"%{self.name} : {self._type}"


class Node:
    """An ONNX node (or, for deferred values, the TorchScript node they stand for)."""

    __slots__ = ("domain", "op_type", "input_values", "output_values", "attrs", "source", "scope",
                 "calls", "provenance", "origin", "step", "doc_string", "name")

    def __init__(self, domain: str, op_type: str, inputs: list[Value | None],
                 outputs: list[Value], attrs: dict[str, tuple[str, Any]] | None = None) -> None:
        self.domain = domain
        self.op_type = op_type
        #: The node's inputs and outputs: lists that passes edit in place.
        self.input_values = inputs
        self.output_values = outputs
        self.attrs = attrs or {}
        self.source = ""
        self.scope = ""
        #: The module calls the node was made in, outermost first (``("layers.0",
        #: "layers.0.attn")``; a module's second call is ``"act#1"``); top-level nodes only.
        self.calls: tuple[str, ...] = ()
        self.provenance: Any = None
        self.origin = ""
        #: Which source node's conversion made it (a number per source node; None for a
        #: node a graph pass made).
        self.step: int | None = None
        self.doc_string = ""
        self.name = ""

    # -- torch._C.Node surface ----------------------------------------------
    def kind(self) -> str:
        return f"{self.domain or 'onnx'}::{self.op_type}"

    def inputs(self) -> list[Value | None]:
        return list(self.input_values)

    def outputs(self) -> list[Value]:
        return list(self.output_values)

    def input(self, index: int = 0) -> Value | None:
        return self.input_values[index]

    def inputsAt(self, index: int) -> Value | None:  # noqa: N802
        return self.input_values[index]

    def inputsSize(self) -> int:  # noqa: N802
        return len(self.input_values)

    def output(self, index: int = 0) -> Value:
        return self.output_values[index]

    def outputsSize(self) -> int:  # noqa: N802
        return len(self.output_values)

    def attributeNames(self) -> list[str]:  # noqa: N802
        return list(self.attrs)

    def hasAttribute(self, name: str) -> bool:  # noqa: N802
        return name in self.attrs

    def hasAttributes(self) -> bool:  # noqa: N802
        return bool(self.attrs)

    def kindOf(self, name: str) -> str:  # noqa: N802
        return self.attrs[name][0]

    def __getitem__(self, name: str) -> Any:
        return self.attrs[name][1]

    def t(self, name: str) -> Any:
        return self.attrs[name][1]

    def i(self, name: str) -> int:
        return self.attrs[name][1]

    def f(self, name: str) -> float:
        return self.attrs[name][1]

    def s(self, name: str) -> str:
        return self.attrs[name][1]

    def g(self, name: str) -> Any:
        return self.attrs[name][1]

    def ts(self, name: str) -> list[Any]:
        return self.attrs[name][1]

    def is_(self, name: str) -> list[int]:
        return self.attrs[name][1]

    def fs(self, name: str) -> list[float]:
        return self.attrs[name][1]

    def ss(self, name: str) -> list[str]:
        return self.attrs[name][1]

    def sourceRange(self) -> str:  # noqa: N802
        return self.source

    def scopeName(self) -> str:  # noqa: N802
        return self.scope

    def __repr__(self) -> str:
        return f"<Node {self.kind()}>"


class Graph:
    """An ONNX graph under construction; subgraphs (If/Loop bodies) have a parent."""

    def __init__(self, name: str = "main_graph", parent: Graph | None = None) -> None:
        self.name = name
        self.parent = parent
        self.nodes: list[Node] = []
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        #: name -> Value whose ``const`` is the tensor (torch or numpy); root graph only.
        self.initializers: dict[str, Value] = {}
        #: id(deferred value) -> (that value, its real value). The deferred value is kept
        #: alive here so that its id cannot be reused by another value.
        self._materialized: dict[int, tuple[Value, Value]] = {}
        #: Small constants already emitted in this graph, by (dtype, shape, bytes).
        self.constant_cache: dict[tuple[Any, ...], Value] = {}
        if parent is None:
            self.opset_imports: dict[str, int] = {}
            self.functions: list[Any] = []
            self._counter = itertools.count()
            self.metadata: dict[str, str] = {}
            #: Names of the user inputs dropped because nothing reads them.
            self.dropped_inputs: list[str] = []

    @property
    def root(self) -> Graph:
        graph = self
        while graph.parent is not None:
            graph = graph.parent
        return graph

    def fresh_name(self, hint: str = "v") -> str:
        return f"{hint}_{next(self.root._counter)}"

    # -- building ----------------------------------------------------------
    def add_input(self, name: str, type_: Type | None = None) -> Value:
        value = Value(self, name, type_)
        self.inputs.append(value)
        return value

    def add_node(self, domain: str, op_type: str, inputs: Iterable[Value | None],
                 num_outputs: int = 1, attrs: dict[str, tuple[str, Any]] | None = None) -> Node:
        real_inputs = [self.materialize(v) if v is not None else None for v in inputs]
        node = Node(domain, op_type, real_inputs, [], attrs)
        hint = self.fresh_name(op_type)
        node.output_values = [Value(self, hint if i == 0 else f"{hint}.{i}", None, node, i)
                         for i in range(num_outputs)]
        self.nodes.append(node)
        return node

    def deferred(self, type_: Type, materialize: Callable[[Graph], Value], *,
                 const: Any = _NO_CONST, producer: Node | None = None) -> Value:
        """A value that becomes real only if a node consumes it."""
        value = Value(self, self.fresh_name("deferred"), type_, producer)
        value.const = const
        value._materialize = materialize
        return value

    def materialize(self, value: Value) -> Value:
        """The real value for ``value`` in this graph (materializing deferred values once)."""
        if value._materialize is None:
            return value
        graph: Graph | None = self
        while graph is not None:
            found = graph._materialized.get(id(value))
            if found is not None:
                return found[1]
            graph = graph.parent
        real = value._materialize(self)
        real = self.materialize(real)
        if _known_dtype(real.type()) is None:
            real.setType(value.type())
        self._materialized[id(value)] = (value, real)
        return real

    def add_initializer(self, name: str, tensor: Any, type_: Type | None = None, *,
                        parameter: bool = False) -> Value:
        """Add a weight to the root graph; the tensor is kept by reference, not copied.

        ``parameter=True`` marks a model parameter or buffer (what ``export_params=False``
        turns into graph inputs and ``input_names`` may name); other initializers are
        constants the conversion made.
        """
        root = self.root
        base, n = name, 1
        while name in root.initializers:  # e.g. a parameter called like a fresh constant
            name = f"{base}.{n}"
            n += 1
        if type_ is None:
            type_ = Type.of(tensor) if isinstance(tensor, torch.Tensor) else Type()
        value = Value(root, name, type_)
        value.const = tensor
        if parameter:
            value.meta = {"parameter": True}
        root.initializers[name] = value
        return value

    def use_domain(self, domain: str, version: int | None = None) -> None:
        imports = self.root.opset_imports
        if domain not in imports or (version is not None and imports[domain] < version):
            imports[domain] = version if version is not None else imports.get(domain, 0)

    def walk(self) -> Iterable[Node]:
        """Every node, subgraphs included, in order."""
        for node in self.nodes:
            yield node
            for kind, value in node.attrs.values():
                if kind == "g":
                    yield from value.walk()
                elif kind == "gs":
                    for sub in value:
                        yield from sub.walk()

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.nodes)} nodes>"
