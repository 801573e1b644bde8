"""What an export produced: :class:`ExportResult` (the graph, the serialized model, what
converted it) and :class:`ExportWarning`."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import numpy as np
import onnx
import torch

from oxport import serialize
from oxport.exporter import progress
from oxport.frontends import arguments
from oxport.ir import Graph
from oxport.registry import SymbolicEntry
from oxport.serialize import proto as serialize_proto
from oxport.serialize import weights
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
    _session: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        graph = self.serialized.model.graph
        return (f"<ExportResult opset {self.opset}: {_count(len(graph.node), 'node')}, inputs "
                f"{', '.join(v.name for v in graph.input) or 'none'}, outputs "
                f"{', '.join(v.name for v in graph.output)}, "
                f"{_count(len(self.serialized.weights), 'weight')} "
                f"({progress.size(self.serialized.weight_bytes)}), "
                f"{_count(len(self.warnings), 'warning')}>")

    @property
    def model_proto(self) -> onnx.ModelProto:
        """The complete ModelProto, weights included (a new copy on each access, as
        torch.onnx's ``ONNXProgram.model_proto``)."""
        return self.serialized.to_model_proto()

    def save(self, f: str | os.PathLike[str] | IO[bytes],
             external_data: bool | str | None = None, *, include_initializers: bool = True,
             keep_initializers_as_inputs: bool = False) -> None:
        """Write the model atomically to a path, or to a binary file object
        (``external_data`` as for :func:`oxport.export`). As torch.onnx's
        ``ONNXProgram.save``: ``include_initializers=False`` leaves the weights out,
        ``keep_initializers_as_inputs=True`` lists them as graph inputs too."""
        serialized = self.serialized
        if not include_initializers or keep_initializers_as_inputs:
            serialized = _with_initializers(serialized, include_initializers,
                                            keep_initializers_as_inputs)
        with progress.phase("write", self.timings) as advance:
            serialize.write(serialized, f, external_data=external_data, progress=advance)

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run the model with ONNX Runtime on the arguments ``forward`` takes (as torch.onnx's
        ``ONNXProgram.__call__``): its outputs as torch tensors (a Sequence output as a
        list of them). The session is made on the first call; :meth:`release` drops it."""
        if self._session is None:
            self.initialize_inference_session()
        feeds = self.feeds((*args, dict(kwargs)))
        return tuple(_as_torch(out) for out in self._session.run(None, feeds))

    def initialize_inference_session(
            self, initializer: Callable[[str | bytes], Any] | None = None) -> None:
        """Make the session :meth:`__call__` runs (as torch.onnx's ``ONNXProgram``):
        ``initializer`` takes the model's bytes, or its path when the weights need external
        data, and returns an ONNX Runtime session; by default a CPU one."""
        self._session = _inference_session(self.serialized, initializer)

    def call_reference(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run the model with ONNX's reference evaluator (``onnx.reference``) on the
        arguments ``forward`` takes: its outputs as torch tensors."""
        from onnx.reference import ReferenceEvaluator

        outputs = ReferenceEvaluator(self.model_proto).run(
            None, self.feeds((*args, dict(kwargs))))
        return tuple(_as_torch(out) for out in outputs)

    def compute_values(self, value_names: Sequence[str], args: Any = (),
                       kwargs: dict[str, Any] | None = None) -> tuple[Any, ...]:
        """The values the model computes under ``value_names`` (ONNX names, intermediate
        ones too) for these arguments, by ONNX Runtime: torch tensors in that order."""
        types = self.serialized.types
        unknown = [name for name in value_names if name not in types]
        if unknown:
            raise ValueError(f"The model has no value named {', '.join(map(repr, unknown))}; "
                             "name values the ONNX graph holds (ExportResult.model_proto).")
        model = onnx.ModelProto()
        model.CopyFrom(self.serialized.model)
        del model.graph.output[:]
        model.graph.output.extend(serialize_proto.value_info(name, types[name], {})
                                  for name in value_names)
        session = _inference_session(dataclasses.replace(self.serialized, model=model), None)
        outputs = session.run(None, self.feeds((*args, dict(kwargs or {}))))
        return tuple(_as_torch(out) for out in outputs)

    def rename_axes(self, rename_mapping: Mapping[str, str]) -> None:
        """Rename the dims named as ``rename_mapping``'s keys (``{"s77": "batch"}``) on
        the graph's inputs, outputs and value infos."""
        graph = self.serialized.model.graph
        for value in [*graph.input, *graph.output, *graph.value_info]:
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in rename_mapping:
                    dim.dim_param = rename_mapping[dim.dim_param]
        self.release()

    def apply_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Replace the weights named as ``state_dict``'s keys by its tensors (a weight the
        model does not hold is skipped with a warning), as torch.onnx's ``ONNXProgram``."""
        held = {weight.name: weight for weight in self.serialized.weights}
        for name, tensor in state_dict.items():
            if name in held:
                held[name].tensor = tensor
            else:
                warnings.warn(f"oxport: the model holds no weight {name!r}; it is skipped.",
                              UserWarning, stacklevel=2)
        self.release()

    def release(self) -> None:
        """Drop the ONNX Runtime session :meth:`__call__` made."""
        self._session = None

    def optimize(self) -> None:
        """Kept for code written for torch.onnx's ``ONNXProgram``, whose ``optimize()``
        folds constants and removes redundant nodes: oxport did that while exporting
        (``do_constant_folding=True``, the default), so the model stays as it is."""

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


def _with_initializers(serialized: serialize.Serialized, include: bool, as_inputs: bool
                       ) -> serialize.Serialized:
    """``serialized`` with its weights left out (not ``include``) and/or listed as graph
    inputs (``as_inputs``), for :meth:`ExportResult.save`."""
    model = onnx.ModelProto()
    model.CopyFrom(serialized.model)
    if as_inputs:
        listed = {value.name for value in model.graph.input}
        model.graph.input.extend(_weight_input(w) for w in serialized.weights
                                 if w.name not in listed)
    return dataclasses.replace(serialized, model=model,
                               weights=list(serialized.weights) if include else [])


def _weight_input(weight: serialize.Weight) -> onnx.ValueInfoProto:
    """A graph input typed like ``weight`` (its dims as ONNX counts them)."""
    header = weights.tensor_header(weight.name, weight.tensor)
    return onnx.helper.make_tensor_value_info(weight.name, header.data_type, list(header.dims))


def _inference_session(serialized: serialize.Serialized,
                       initializer: Callable[[str | bytes], Any] | None) -> Any:
    """A session of the model made by ``initializer`` (default: an ONNX Runtime CPU one)
    from its bytes, or from a temporary folder when its weights need external data."""
    import tempfile

    if initializer is None:
        import onnxruntime

        def initializer(model: str | bytes) -> Any:
            return onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])

    if serialized.weight_bytes <= weights.EXTERNAL_DATA_THRESHOLD:
        return initializer(serialize.to_bytes(serialized))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        serialize.write(serialized, path, external_data=True)
        return initializer(path)


def _as_torch(output: Any) -> Any:
    """An ONNX Runtime output as torch gives it: a tensor, or a list of tensors."""
    if isinstance(output, list):
        return [_as_torch(item) for item in output]
    return torch.from_numpy(np.asarray(output))
