"""What an export produced: :class:`ExportResult` (the graph, the serialized model, what
converted it) and :class:`ExportWarning`."""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import IO, Any

import onnx
import torch

from oxport import serialize
from oxport.exporter import progress
from oxport.frontends import arguments
from oxport.ir import Graph
from oxport.registry import SymbolicEntry
from oxport.walk import FallbackUse


@dataclasses.dataclass(frozen=True)
class ExportWarning:
    """A warning raised while tracing the model (a ``TracerWarning`` from its code, ...):
    ``str()`` gives ``file:line: Category: message``."""

    category: type[Warning]
    message: str
    filename: str
    lineno: int

    @classmethod
    def of(cls, caught: warnings.WarningMessage) -> ExportWarning:
        return cls(caught.category, str(caught.message), caught.filename, caught.lineno)

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}: {self.category.__name__}: {self.message}"


@dataclasses.dataclass
class ExportResult:
    """What a conversion produced, before or after it was written."""

    graph: Graph
    serialized: serialize.Serialized
    opset: int
    used: dict[SymbolicEntry, int]
    fallback_uses: list[FallbackUse]
    warnings: list[ExportWarning]
    output_notes: list[str]
    timings: dict[str, float]

    def __repr__(self) -> str:
        graph = self.serialized.model.graph
        return (f"<ExportResult opset {self.opset}: {_count(len(graph.node), 'node')}, inputs "
                f"{', '.join(v.name for v in graph.input) or 'none'}, outputs "
                f"{', '.join(v.name for v in graph.output)}, "
                f"{_count(len(self.serialized.weights), 'weight')} "
                f"({progress.size(self.serialized.weight_bytes)}), "
                f"{_count(len(self.warnings), 'warning')}>")

    def model_proto(self) -> onnx.ModelProto:
        """The complete ModelProto, weights included (copies them)."""
        return self.serialized.to_model_proto()

    def save(self, f: str | os.PathLike[str] | IO[bytes],
             external_data: bool | str | None = None) -> None:
        """Write the model atomically to a path, or to a binary file object
        (``external_data`` as for :func:`oxport.export`)."""
        with progress.phase("write", self.timings) as advance:
            serialize.write(self.serialized, f, external_data=external_data, progress=advance)

    def to_bytes(self) -> bytes:
        return serialize.to_bytes(self.serialized)

    def report(self, model: Any = None) -> Any:
        """An :class:`oxport.diagnose.report.ExportReport` of this export (pass ``model`` to
        also scan its ``forward`` code for tracing pitfalls)."""
        from oxport.diagnose.report import build_report
        return build_report(self, model)

    def provenance(self, node_name: str | None = None) -> Any:
        """Where ONNX node ``node_name`` came from (TorchScript op, source line, plugin), or
        the table of every node: see :func:`oxport.diagnose.report.node_origins`."""
        from oxport.diagnose.report import node_origins
        table = node_origins(self)
        return table if node_name is None else table[node_name]

    def input_leaves(self) -> list[int] | None:
        """For each ONNX graph input (user inputs, in order), the index of the leaf of
        the flattened ``args`` it comes from (``pytree.tree_leaves`` of the (positional,
        named) arguments, as :func:`oxport.frontends.arguments.normalize_args` splits
        them); None when the front end did not say (then the inputs are the args' tensors,
        in order)."""
        return input_leaves(self.graph)

    def feeds(self, args: Any) -> dict[str, Any]:
        """ONNX Runtime feeds (name -> numpy array) for ``args`` given in export's form."""
        from torch.utils import _pytree as pytree

        leaves = pytree.tree_leaves(arguments.normalize_args(args))
        slots = self.input_leaves()
        if slots is None:  # the args' tensors in order, a list of tensors one (Sequence) feed
            leaves = pytree.tree_leaves(
                arguments.normalize_args(args),
                is_leaf=lambda a: arguments.is_tensor_list(a) or arguments.is_int_list(a))
            slots = _fed_leaves(leaves, self.graph.inputs)
        inputs = self.serialized.model.graph.input
        parts = [(value.meta or {}).get("arg_part") for value in self.graph.inputs]
        return {i.name: _as_input_dtype(arguments.feed_array(leaves[leaf], part), i, leaves[leaf])
                for i, leaf, part in zip(inputs, slots, parts)}

    def plugins_used(self) -> dict[str, int]:
        """How many TorchScript nodes each plugin converted."""
        counts: dict[str, int] = {}
        for entry, count in self.used.items():
            key = str(entry.provenance)
            counts[key] = counts.get(key, 0) + count
        for use in self.fallback_uses:
            key = f"fallback:{use.fallback}"
            counts[key] = counts.get(key, 0) + 1
        return counts


def _fed_leaves(leaves: list[Any], inputs: list[Any]) -> list[int]:
    """For each graph input in order, the index of the next leaf that can feed it: a tensor
    a tensor input, a list of tensors or of ints a Sequence input (a list of ints that
    feeds none was hard-coded)."""
    slots: list[int] = []
    cursor = 0
    for value in inputs:
        sequence = value.type().kind() == "ListType"
        while cursor < len(leaves) and not _feeds(leaves[cursor], sequence):
            cursor += 1
        slots.append(cursor)
        cursor += 1
    return slots


def _feeds(leaf: Any, sequence: bool) -> bool:
    if sequence:
        return arguments.is_tensor_list(leaf) or arguments.is_int_list(leaf)
    return isinstance(leaf, torch.Tensor)


def _count(number: int, noun: str) -> str:
    """``number`` and ``noun``, plural unless it is one: ``3 nodes``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def input_leaves(graph: Graph) -> list[int] | None:
    """For each input of the converted ``graph``, the index of the args leaf it comes
    from; None when the front end did not say."""
    leaves = [(value.meta or {}).get("arg_leaf") for value in graph.inputs]
    return None if None in leaves else leaves  # type: ignore[return-value]


def _as_input_dtype(array: Any, graph_input: Any, leaf: Any) -> Any:
    """A Python number's feed in its input's dtype (a scripted ``float`` parameter given an
    int is a float64 input)."""
    if not isinstance(leaf, (bool, int, float)):
        return array
    return array.astype(onnx.helper.tensor_dtype_to_np_dtype(
        graph_input.type.tensor_type.elem_type))
