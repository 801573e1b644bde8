"""The front-end-neutral view of a source graph, which the walker and every symbolic read.

A front end hands the walker a graph whose nodes and values answer the questions
TorchScript's answer (the surface symbolics written for torch.onnx already use):

- a graph: ``inputs()`` (user inputs, then one per parameter), ``nodes()`` in order,
  ``outputs()``;
- a node: ``kind()`` as ``namespace::name``, ``schema()`` (the overload is the part of
  its name after the dot, ``aten::add.Tensor(...)``; ``"(no schema)"`` without one),
  ``inputs()`` / ``inputsAt(i)`` / ``inputsSize()``, ``outputs()`` / ``output()`` /
  ``outputsSize()``, ``attributeNames()`` with ``kindOf(name)`` and the getter named by
  that kind, ``blocks()`` (subgraphs, each with ``inputs()``, ``nodes()``,
  ``outputs()``), ``sourceRange()`` (the stack, innermost user frame first) and
  ``scopeName()`` (the module calls, ``__module.model.a/__module.model.a.b``);
- a value: ``unique()`` (an id), ``type()`` (dtype and shape; a dim is an int, a symbol
  name for a symbolic dim, or None), ``debugName()``, ``uses()`` (each with ``user``, the
  node, and ``offset``, the input's position), ``node()``, for a constant ``toIValue()``,
  and ``traced_sizes()``: the sizes of the example the front end ran (a symbolic dim's
  example size), which TorchScript's traced types give as their ``varyingSizes()`` (read
  through :func:`oxport.symbolic_helper.traced_sizes`).

Constant arguments are inputs too, made by ``prim::Constant`` nodes (a list containing
values computed in the graph is a ``prim::ListConstruct``), and every argument of the
schema is there, defaults included: a symbolic sees the same inputs from every front end.

TorchScript's own ``torch._C`` graphs are this view as they are (the TorchScript front
end adds nothing to them, so it costs nothing). :class:`SourceGraph`,
:class:`SourceNode` and :class:`SourceValue` implement it in Python, for front ends
that read another graph kind (torch.export's FX graphs).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from oxport.ir import Type


class Use(NamedTuple):
    """One use of a value, as TorchScript's ``Value.uses()`` gives it."""

    user: SourceNode
    offset: int


class SourceValue:
    """A value of a source graph: a graph input, a node output, or a block input."""

    __slots__ = ("_type", "_name", "_node", "_offset", "_uses", "_constant", "_traced_sizes")

    def __init__(self, name: str, type_: Type, node: SourceNode | None = None,
                 offset: int = 0) -> None:
        self._type = type_
        self._name = name
        self._node = node
        self._offset = offset
        self._uses: list[Use] = []
        self._constant: Any = None
        self._traced_sizes: list[int | None] | None = None

    def unique(self) -> int:
        return id(self)

    def type(self) -> Type:
        return self._type

    def setType(self, type_: Type) -> SourceValue:  # noqa: N802 - TorchScript's name
        self._type = type_
        return self

    def debugName(self) -> str:  # noqa: N802
        return self._name

    def uses(self) -> list[Use]:
        return list(self._uses)

    def node(self) -> SourceNode:
        """The node that makes this value; a graph or block input's is ``prim::Param``."""
        return self._node if self._node is not None else _PARAM

    def offset(self) -> int:
        return self._offset

    def traced_sizes(self) -> list[int | None] | None:
        """The example's sizes (symbolic dims at their example size); the type's static sizes
        when the front end recorded none."""
        if self._traced_sizes is not None:
            return list(self._traced_sizes)
        return self._type.varyingSizes() if self._type.kind() == "TensorType" else None

    def set_traced_sizes(self, sizes: Sequence[int | None]) -> None:
        self._traced_sizes = list(sizes)

    def toIValue(self) -> Any:  # noqa: N802
        """The Python value of a ``prim::Constant``'s output (None for other values)."""
        return self._constant

    def __repr__(self) -> str:
        return f"%{self._name} : {self._type}"


class SourceNode:
    """One operation of a source graph."""

    __slots__ = ("_kind", "_schema", "_inputs", "_outputs", "_blocks", "_source", "_scope",
                 "_attributes")

    def __init__(self, kind: str, schema: str, inputs: Sequence[SourceValue],
                 output_types: Sequence[Type], *, names: Sequence[str] = (),
                 source: str = "", scope: str = "",
                 blocks: Sequence[SourceBlock] = (),
                 attributes: dict[str, tuple[str, Any]] | None = None) -> None:
        self._kind = kind
        self._schema = schema
        self._inputs = list(inputs)
        for offset, value in enumerate(self._inputs):
            value._uses.append(Use(self, offset))
        self._outputs = [SourceValue(names[i] if i < len(names) else f"{kind}.{i}", type_,
                                     self, i) for i, type_ in enumerate(output_types)]
        self._blocks = list(blocks)
        self._source = source
        self._scope = scope
        self._attributes = attributes or {}

    def kind(self) -> str:
        return self._kind

    def schema(self) -> str:
        return self._schema

    def inputs(self) -> list[SourceValue]:
        return list(self._inputs)

    def inputsAt(self, index: int) -> SourceValue:  # noqa: N802
        return self._inputs[index]

    def inputsSize(self) -> int:  # noqa: N802
        return len(self._inputs)

    def outputs(self) -> list[SourceValue]:
        return list(self._outputs)

    def output(self) -> SourceValue:
        return self._outputs[0]

    def outputsAt(self, index: int) -> SourceValue:  # noqa: N802
        return self._outputs[index]

    def outputsSize(self) -> int:  # noqa: N802
        return len(self._outputs)

    def blocks(self) -> Iterator[SourceBlock]:
        return iter(self._blocks)

    def attributeNames(self) -> list[str]:  # noqa: N802
        return list(self._attributes)

    def hasAttribute(self, name: str) -> bool:  # noqa: N802
        return name in self._attributes

    def kindOf(self, name: str) -> str:  # noqa: N802
        return self._attributes[name][0]

    def __getattr__(self, getter: str) -> Any:
        """The attribute getters named by kind (``node.i("dim")``, ``node.s("name")``...)."""
        if getter in ("i", "f", "s", "t", "g", "is_", "fs", "ss", "ts", "ival"):
            return lambda name: self._attributes[name][1]
        raise AttributeError(getter)

    def sourceRange(self) -> str:  # noqa: N802
        return self._source

    def scopeName(self) -> str:  # noqa: N802
        return self._scope

    def __repr__(self) -> str:
        return f"<SourceNode {self._kind}>"


class SourceBlock:
    """A subgraph (an If branch, a Loop body): block inputs, nodes and outputs."""

    def __init__(self, inputs: Sequence[SourceValue] = ()) -> None:
        self._inputs = list(inputs)
        self._nodes: list[SourceNode] = []
        self._outputs: list[SourceValue] = []

    def inputs(self) -> list[SourceValue]:
        return list(self._inputs)

    def nodes(self) -> list[SourceNode]:
        return list(self._nodes)

    def outputs(self) -> list[SourceValue]:
        return list(self._outputs)

    def append(self, node: SourceNode) -> SourceNode:
        self._nodes.append(node)
        return node

    def set_outputs(self, outputs: Sequence[SourceValue]) -> None:
        """The block's results; each counts as a use (TorchScript's return node uses them)."""
        self._outputs = list(outputs)
        for offset, value in enumerate(self._outputs):
            value._uses.append(Use(_RETURN, offset))


class SourceGraph(SourceBlock):
    """A whole source graph: its inputs are the user inputs, then the parameters."""


def constant(block: SourceBlock, value: Any, type_: Type, name: str = "") -> SourceValue:
    """A ``prim::Constant`` node in ``block`` producing ``value``."""
    node = block.append(SourceNode("prim::Constant", "(no schema)", (), [type_],
                                   names=[name or "constant"]))
    node._outputs[0]._constant = value
    return node._outputs[0]


#: What a graph input's ``node()`` is, and what uses a block's outputs, as in TorchScript.
_PARAM = SourceNode("prim::Param", "(no schema)", (), ())
_RETURN = SourceNode("prim::Return", "(no schema)", (), ())
