"""From the IR to an ONNX file: names, value infos, the checker, and the write.

Weights are never copied into a ``ModelProto`` on the way to a file: the graph
is serialized without them, then each weight is appended as protobuf bytes
written straight from tensor memory (repeated embedded messages merge when
parsed). Past 2 GB the weights go to one external-data file beside the model.
Every file is written under a temporary name and renamed into place, the model
last: a failed export never leaves a partial file behind, and the next export
to a folder cleans up after a writer that was killed (see :func:`_commit`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import socket
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from oxport.errors import (
    CheckerError,
    DynamicAxesWarning,
    InvalidExportArgumentError,
    OnnxExporterError,
    how_to_set,
    spelled,
)
from oxport.ir import Graph, Node, Type, Value
from oxport.passes import infer
from oxport.types import JitScalarType

PROTOBUF_LIMIT = 2**31 - 1
#: Leave room for the graph itself below the protobuf limit.
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**26
EXTERNAL_ALIGNMENT = 64
#: With external data, weights smaller than this stay inline in the model file: ONNX
#: Runtime reads shape operands (a Reshape's target, Unsqueeze axes) only from inline
#: data, and a file or an aligned slot per tiny tensor buys nothing.
EXTERNAL_MIN_BYTES = 1024
#: ``progress(bytes_written, total_bytes)``, called by :func:`write` after each weight.
Progress = Callable[[int, int], None]


class LazyTensor:
    """A weight computed only when its bytes are written, e.g. a convolution with a batch
    norm folded in. ``rows(start, stop, out)`` computes rows ``start:stop`` of its first
    dimension into ``out`` (contiguous, of those rows' shape and the weight's dtype), so
    the writer computes every chunk into one buffer of at most :data:`CHUNK_BYTES`."""

    def __init__(self, shape: Sequence[int], dtype: torch.dtype,
                 rows: Callable[[int, int, torch.Tensor], None]) -> None:
        if not shape:
            raise ValueError("A LazyTensor has at least one dimension (computed rows at a time).")
        self.shape = torch.Size(shape)
        self.dtype = dtype
        self.rows = rows

    def compute(self) -> torch.Tensor:
        """The whole tensor."""
        whole = torch.empty(self.shape, dtype=self.dtype)
        self.rows(0, self.shape[0], whole)
        return whole

    def numel(self) -> int:
        return self.shape.numel()

    def element_size(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    def dim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"LazyTensor({list(self.shape)}, {self.dtype})"


@dataclasses.dataclass
class Weight:
    """An initializer: its final name and the tensor that holds its bytes."""

    name: str
    tensor: Any  # torch.Tensor, numpy.ndarray or LazyTensor

    @property
    def nbytes(self) -> int:
        if isinstance(self.tensor, (torch.Tensor, LazyTensor)):
            return self.tensor.numel() * self.tensor.element_size()
        return int(self.tensor.nbytes)


@dataclasses.dataclass
class Serialized:
    """A model ready to write: the proto without weight bytes, and the weights."""

    model: onnx.ModelProto
    weights: list[Weight]
    value_names: dict[int, str]
    #: The IR type of every named value (for the readable printout).
    types: dict[str, Type] = dataclasses.field(default_factory=dict)
    #: ONNX node name -> the IR node it was written from (its source line and plugin).
    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)

    @property
    def weight_bytes(self) -> int:
        return sum(w.nbytes for w in self.weights)

    def to_model_proto(self) -> onnx.ModelProto:
        """A complete ModelProto with the weights inside (this copies them)."""
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        model.graph.initializer.extend(tensor_proto(w.name, w.tensor) for w in self.weights)
        return model


# -- naming --------------------------------------------------------------------------
class _Namer:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: set[str] = set()

    def claim(self, value: Value, name: str) -> str:
        if name in self.used:
            raise InvalidExportArgumentError(
                f"The name {name!r} is given to two different values; names must be unique.")
        self.used.add(name)
        self.names[id(value)] = name
        return name

    def name(self, value: Value) -> str:
        found = self.names.get(id(value))
        if found is not None:
            return found
        base = _clean(value.name) or "v"
        name, n = base, 1
        while name in self.used:
            name = f"{base}.{n}"
            n += 1
        self.used.add(name)
        self.names[id(value)] = name
        return name


def _clean(name: str) -> str:
    return name.replace(" ", "_")


def _dedupe_weights(graph: Graph) -> None:
    """Point every use of a tensor that shares storage with another at one initializer."""
    seen: dict[tuple[Any, ...], Value] = {}
    replace: dict[int, Value] = {}
    for name, value in list(graph.initializers.items()):
        tensor = value.const
        if not isinstance(tensor, torch.Tensor) or tensor.numel() == 0:
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
               tuple(tensor.stride()), tensor.dtype)
        if key in seen:
            replace[id(value)] = seen[key]
            del graph.initializers[name]
        else:
            seen[key] = value
    if not replace:
        return
    for node in graph.walk():
        node.input_values = [replace.get(id(v), v) if v is not None else None for v in node.input_values]
    graph.outputs = [replace.get(id(v), v) for v in graph.outputs]


def serialize(graph: Graph, *, input_names: Sequence[str] | None = None,
              output_names: Sequence[str] | None = None,
              dynamic_axes: Mapping[str, Any] | None = None, example_sizes: bool = True,
              export_params: bool = True,
              keep_initializers_as_inputs: bool = False, param_names: Sequence[str] = (),
              verbose: bool = False, add_node_names: bool = True,
              doc_string: str = "", metadata: dict[str, str] | None = None,
              dedupe: bool = True, module_types: dict[str, str] | None = None) -> Serialized:
    """Name every value and build the ModelProto (without weight bytes).

    Parameters (initializers marked ``parameter``) follow the user inputs in
    ``param_names`` (``state_dict``) order; ``input_names`` name inputs then
    parameters. With ``export_params=False`` parameters become graph inputs and
    carry no data; constants the conversion made stay initializers. With
    ``example_sizes`` (a trace's graph), the outputs' numeric sizes are the example's:
    when there are dynamic axes they are left open for ONNX shape inference to fill.
    """
    if dedupe and not keep_initializers_as_inputs:
        _dedupe_weights(graph)
    namer = _Namer()
    order = {name: i for i, name in enumerate(param_names)}
    graph.initializers = dict(sorted(
        graph.initializers.items(),
        key=lambda item: (not item[1].is_parameter, order.get(item[0], len(order)))))
    params = [v for v in graph.initializers.values() if v.is_parameter]
    constants = [v for v in graph.initializers.values() if not v.is_parameter]
    named_inputs = list(graph.inputs) + params
    input_names = _names("input_names", input_names)
    if len(input_names) > len(named_inputs):
        raise InvalidExportArgumentError(
            f"{spelled('input_names')} has {len(input_names)} names but the model has "
            f"{len(graph.inputs)} input{'s' if len(graph.inputs) != 1 else ''} and "
            f"{len(params)} parameter{'s' if len(params) != 1 else ''}; give at most "
            f"{len(named_inputs)} names (inputs first, then parameters in state_dict order).")
    output_names = _names("output_names", output_names)
    if len(output_names) > len(graph.outputs):
        raise InvalidExportArgumentError(
            f"{spelled('output_names')} has {len(output_names)} names but the model has "
            f"{len(graph.outputs)} output{'s' if len(graph.outputs) != 1 else ''}; give at most "
            f"{len(graph.outputs)}.")
    for value, name in zip(named_inputs, input_names):
        namer.claim(value, name)
    _separate_outputs(graph)
    for value, name in zip(graph.outputs, output_names):
        namer.claim(value, name)
    for value in [*graph.inputs, *params, *constants]:
        namer.name(value)

    axes = _dynamic_axes(dynamic_axes, [namer.name(v) for v in graph.inputs],
                         [namer.name(v) for v in graph.outputs])
    types: dict[str, Type] = {}
    graph_proto = _graph_proto(graph, namer, verbose, add_node_names, types, module_types or {})
    for value in graph.inputs:
        graph_proto.input.append(_value_info(namer.name(value), value.type(), axes))
    if not export_params:
        for value in params:
            graph_proto.input.append(_value_info(namer.name(value), value.type(), {}))
    if keep_initializers_as_inputs:
        for value in (constants if not export_params else [*params, *constants]):
            graph_proto.input.append(_value_info(namer.name(value), value.type(), {}))
    for value in graph.outputs:
        graph_proto.output.append(_value_info(namer.name(value), value.type(), axes,
                                              dynamic=bool(axes) and example_sizes))
    stored = constants if not export_params else [*params, *constants]
    weights = [Weight(namer.name(v), v.const) for v in stored]
    for value in graph.inputs:
        types[namer.name(value)] = value.type()
    for value in graph.initializers.values():
        types[namer.name(value)] = value.type()

    opsets = [helper.make_opsetid(domain, version) for domain, version in
              sorted(graph.opset_imports.items())]
    model = helper.make_model(graph_proto, opset_imports=opsets, producer_name="oxport",
                              producer_version=_version(), doc_string=doc_string)
    model.functions.extend(graph.functions)
    model.ir_version = ir_version(model)
    nodes = _node_index(model.graph, graph, namer)
    if verbose:
        metadata = {**(metadata or {}), "oxport.plugins": _plugins_metadata(nodes.values())}
    for key, value in {**graph.metadata, **(metadata or {})}.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    if axes and _open_dims(model.graph.output):
        _infer_output_shapes(model, weights)
    return Serialized(model, weights, namer.names, types, nodes)


def _names(argument: str, names: Sequence[str] | None) -> list[str]:
    """``input_names`` or ``output_names`` as a list, each name a string."""
    if isinstance(names, str):
        raise InvalidExportArgumentError(
            f"{argument} is the str {names!r}, not a list of names: pass {argument}={[names]!r}.")
    names = list(names or [])
    for index, name in enumerate(names):
        if not isinstance(name, str):
            raise InvalidExportArgumentError(
                f"{argument}[{index}] is {name!r} ({type(name).__name__}), not a str: give "
                f"each name as a string, e.g. {argument}={[str(n) for n in names]!r}.")
    return names


def _node_index(proto: onnx.GraphProto, graph: Graph, namer: _Namer) -> dict[str, Node]:
    """ONNX node name -> IR node, matched by first output name (subgraphs included)."""
    by_output = {namer.names.get(id(node.output_values[0])): node
                 for node in graph.walk() if node.output_values}
    index: dict[str, Node] = {}
    pending = [proto]
    while pending:
        for node_proto in pending.pop().node:
            ir_node = by_output.get(node_proto.output[0]) if node_proto.output else None
            if node_proto.name and ir_node is not None:
                index[node_proto.name] = ir_node
            pending.extend(attr.g for attr in node_proto.attribute if attr.HasField("g"))
            pending.extend(g for attr in node_proto.attribute for g in attr.graphs)
    return index


def plugin_of(node: Node) -> str:
    """The plugin (and distribution) whose symbolic emitted ``node``, or ``""``."""
    provenance = getattr(node.provenance, "provenance", None)
    return str(provenance) if provenance is not None else ""


def _plugins_metadata(nodes: Any) -> str:
    """``{"plugin (dist version)": node count}`` as JSON, for the model's metadata."""
    counts: dict[str, int] = {}
    for node in nodes:
        key = plugin_of(node) or "(constants and passes)"
        counts[key] = counts.get(key, 0) + 1
    return json.dumps(counts, sort_keys=True)


def _open_dims(values: Sequence[onnx.ValueInfoProto]) -> bool:
    """Whether some tensor value has a dim with neither a size nor a name."""
    return any(not dim.HasField("dim_value") and not dim.dim_param
               for value in values if value.type.HasField("tensor_type")
               for dim in value.type.tensor_type.shape.dim)


def _infer_output_shapes(model: onnx.ModelProto, weights: Sequence[Weight]) -> None:
    """Replace the open output dims left by dynamic axes with what ONNX shape inference
    derives (a number, or the symbolic name of an input axis).

    One call of ``onnx.shape_inference`` on a weightless copy of the model (weights as
    typed inputs); when inference fails, the dims stay open.
    """
    probe = _weightless(model, weights)
    for output in probe.graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(probe, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError):
        return
    found = {o.name: o for o in inferred.graph.output}
    for output in model.graph.output:
        result = found.get(output.name)
        if not output.type.HasField("tensor_type") or result is None \
                or not result.type.tensor_type.HasField("shape"):
            continue
        ours = output.type.tensor_type.shape.dim
        theirs = result.type.tensor_type.shape.dim
        if len(ours) != len(theirs):
            continue
        for dim, derived in zip(ours, theirs):
            if dim.HasField("dim_value") or dim.dim_param:  # static, or named by the user
                continue
            if derived.HasField("dim_value"):
                dim.dim_value = derived.dim_value
            elif derived.dim_param and not derived.dim_param.startswith("unk__"):
                dim.dim_param = derived.dim_param


#: Integer initializers up to this many elements keep their values in weightless copies:
#: they are shape operands (axes, sizes) that shape inference must read.
WEIGHTLESS_MAX_ELEMENTS = 64


def _weightless(model: onnx.ModelProto, weights: Sequence[Weight]) -> onnx.ModelProto:
    """A copy of ``model`` (which holds no weight bytes) with the weights as typed inputs
    (small initializers keep their values)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    declared = {i.name for i in probe.graph.input}
    for weight in weights:
        if weight.name in declared:
            continue
        if _is_shape_operand(weight.tensor):
            probe.graph.initializer.append(tensor_proto(weight.name, weight.tensor))
            continue
        header = tensor_header(weight.name, weight.tensor)
        probe.graph.input.append(helper.make_tensor_value_info(
            weight.name, header.data_type, list(header.dims)))
    return probe


def _is_shape_operand(tensor: Any) -> bool:
    if isinstance(tensor, torch.Tensor):
        return tensor.numel() <= WEIGHTLESS_MAX_ELEMENTS and tensor.dtype in (torch.int64,
                                                                              torch.int32)
    if isinstance(tensor, np.ndarray):
        return tensor.size <= WEIGHTLESS_MAX_ELEMENTS and tensor.dtype in (np.int64, np.int32)
    return False


def _separate_outputs(graph: Graph) -> None:
    """Give each graph output its own value (Identity where one is an input, weight or repeat)."""
    seen: set[int] = {id(v) for v in graph.inputs} | {id(v) for v in graph.initializers.values()}
    outputs = []
    for value in graph.outputs:
        if id(value) in seen or value.producer is None or value.producer.op_type == "Constant":
            node = graph.add_node("", "Identity", [value])
            node.output_values[0].setType(value.type())
            node.output_values[0].name = value.name
            value = node.output_values[0]
        seen.add(id(value))
        outputs.append(value)
    graph.outputs = outputs


def _dynamic_axes(dynamic_axes: Mapping[str, Any] | None, inputs: list[str],
                  outputs: list[str]) -> dict[str, dict[int, str]]:
    if not dynamic_axes:
        return {}
    if not isinstance(dynamic_axes, Mapping):
        raise InvalidExportArgumentError(
            "dynamic_axes must be a dict such as {'input': {0: 'batch'}} or {'input': [0]}, "
            f"not {type(dynamic_axes).__name__}.")
    result: dict[str, dict[int, str]] = {}
    for key, spec in dynamic_axes.items():
        if key not in inputs and key not in outputs:
            warnings.warn(
                f"oxport: {spelled('dynamic_axes')} names {key!r}, which is "
                f"neither an input nor an output (inputs {inputs}, outputs {outputs}): name "
                f"them with {how_to_set('input_names')} and {how_to_set('output_names')} first. "
                "The entry is ignored, as torch.onnx does.", DynamicAxesWarning, stacklevel=2)
            continue
        if isinstance(spec, Mapping):
            pairs = list(spec.items())
        elif isinstance(spec, (list, tuple)):
            pairs = [(axis, f"{key}_dynamic_axes_{i + 1}") for i, axis in enumerate(spec)]
        else:
            raise InvalidExportArgumentError(
                f"dynamic_axes[{key!r}] must be a dict {{axis: name}} or a list of axes, "
                f"not {spec!r}.")
        for axis, name in pairs:
            if isinstance(axis, bool) or not isinstance(axis, int) or not isinstance(name, str):
                raise InvalidExportArgumentError(
                    f"dynamic_axes[{key!r}] must map int axes to str names, got "
                    f"{axis!r}: {name!r}.")
        result[key] = dict(pairs)
    return result


def _value_info(name: str, type_: Type, axes: dict[str, dict[int, str]],
                dynamic: bool = False) -> onnx.ValueInfoProto:
    if type_.kind() in ("ListType", "TupleType", "OptionalType") \
            and type_.getElementType().dtype() is not None:
        return helper.make_value_info(name, infer.type_proto(type_))
    dtype = type_.dtype()
    elem_type = _onnx_elem(dtype) if dtype is not None else TensorProto.UNDEFINED
    shape = type_.shape
    named = axes.get(name, {})
    if shape is not None:
        rank = len(shape)
        for axis in named:
            if not -rank <= axis < rank:
                raise InvalidExportArgumentError(
                    f"dynamic_axes[{name!r}] names axis {axis}, but {name!r} has rank {rank}.")
        named = {axis % rank: label for axis, label in named.items()} if rank else {}
        dims: list[Any] = []
        for axis, dim in enumerate(shape):
            if axis in named:
                dims.append(named[axis])
            elif isinstance(dim, str):  # a symbolic dim (torch.export's), by its name
                dims.append(dim)
            elif dynamic:
                dims.append(None)  # outputs follow dynamic inputs: open, then inferred
            else:
                dims.append(dim if isinstance(dim, int) else None)
        shape = dims
    return helper.make_tensor_value_info(name, elem_type, shape)


def _onnx_elem(dtype: torch.dtype) -> int:
    return JitScalarType.from_dtype(dtype).onnx_type()


def _graph_proto(graph: Graph, namer: _Namer, verbose: bool, add_node_names: bool,
                 types: dict[str, Type], module_types: dict[str, str]) -> onnx.GraphProto:
    proto = onnx.GraphProto()
    proto.name = graph.name
    counters: dict[str, int] = {}
    for node in graph.nodes:
        proto.node.append(_node_proto(node, namer, verbose, add_node_names, counters, types,
                                      module_types))
        for value in node.output_values:
            types[namer.name(value)] = value.type()
    if graph.parent is not None:
        for value in graph.inputs:
            proto.input.append(_value_info(namer.name(value), value.type(), {}))
            types[namer.name(value)] = value.type()
        for value in graph.outputs:
            proto.output.append(_value_info(namer.name(value), value.type(), {}, dynamic=True))
    return proto


def scope_text(path: str, module_types: dict[str, str]) -> str:
    """``features.0`` -> ``AlexNet/Sequential[features]/Conv2d[0]`` (torch.onnx's scope form)."""
    parts = [module_types.get("", "")] if module_types.get("") else []
    prefix = ""
    for name in path.split(".") if path else []:
        prefix = f"{prefix}.{name}" if prefix else name
        parts.append(f"{module_types[prefix]}[{name}]" if prefix in module_types else name)
    return "/".join(parts)


def _node_proto(node: Node, namer: _Namer, verbose: bool, add_node_names: bool,
                counters: dict[str, int], types: dict[str, Type],
                module_types: dict[str, str]) -> onnx.NodeProto:
    proto = onnx.NodeProto()
    proto.op_type = node.op_type
    proto.domain = node.domain
    proto.input.extend("" if v is None else namer.name(v) for v in node.input_values)
    proto.output.extend(namer.name(v) for v in node.output_values)
    if add_node_names:
        index = counters.get(node.op_type, 0)
        counters[node.op_type] = index + 1
        proto.name = node.name or f"/{node.op_type}_{index}"
    if verbose:
        scope = scope_text(node.scope, module_types)
        plugin = plugin_of(node)
        proto.doc_string = " # ".join(filter(None, [f"scope: {scope}" if scope else "",
                                                    node.source,
                                                    f"plugin: {plugin}" if plugin else ""]))
    for name, (kind, value) in sorted(node.attrs.items()):
        proto.attribute.append(_attribute_proto(name, kind, value, namer, verbose, add_node_names,
                                                types, module_types))
    return proto


def _attribute_proto(name: str, kind: str, value: Any, namer: _Namer, verbose: bool,
                     add_node_names: bool, types: dict[str, Type],
                     module_types: dict[str, str]) -> onnx.AttributeProto:
    if kind == "t":  # a TensorProto as is (e.g. a string tensor), else a torch/numpy tensor
        return helper.make_attribute(
            name, value if isinstance(value, TensorProto) else tensor_proto("", value))
    if kind == "ts":
        return helper.make_attribute(name, [tensor_proto("", v) for v in value])
    if kind == "tp":
        return helper.make_attribute(name, value)
    if kind == "g":
        return helper.make_attribute(name, _graph_proto(value, namer, verbose, add_node_names,
                                                        types, module_types))
    if kind == "gs":
        return helper.make_attribute(
            name, [_graph_proto(v, namer, verbose, add_node_names, types, module_types)
                   for v in value])
    attr_type = {"i": onnx.AttributeProto.INT, "f": onnx.AttributeProto.FLOAT,
                 "s": onnx.AttributeProto.STRING, "is": onnx.AttributeProto.INTS,
                 "fs": onnx.AttributeProto.FLOATS, "ss": onnx.AttributeProto.STRINGS}.get(kind)
    if attr_type is None:
        raise OnnxExporterError(f"Attribute {name!r} has an unsupported kind {kind!r}.")
    return helper.make_attribute(name, value, attr_type=attr_type)


def tensor_header(name: str, tensor: Any) -> TensorProto:
    """A TensorProto with name, dims and type but no data."""
    proto = TensorProto()
    proto.name = name
    if isinstance(tensor, (torch.Tensor, LazyTensor)):
        proto.dims.extend(tensor.shape)
        proto.data_type = _onnx_elem(tensor.dtype)
    else:
        array = np.asarray(tensor)
        proto.dims.extend(array.shape)
        proto.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
    return proto


def raw_bytes(tensor: Any) -> memoryview:
    """The tensor's bytes, little-endian, without copying contiguous CPU tensors."""
    if isinstance(tensor, LazyTensor):
        tensor = tensor.compute()
    if isinstance(tensor, torch.Tensor):
        tensor = tensor.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if tensor.is_quantized:
            tensor = tensor.int_repr()
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        if tensor.dtype in (torch.bfloat16, torch.float16) or tensor.dtype.is_floating_point \
                and tensor.element_size() == 1:
            tensor = tensor.view(torch.uint8 if tensor.element_size() == 1 else torch.int16)
        elif tensor.dtype == torch.bool:
            tensor = tensor.view(torch.uint8)
        array = tensor.numpy()
    else:
        array = np.ascontiguousarray(tensor)
    return memoryview(array).cast("B") if array.size else memoryview(b"")


def tensor_proto(name: str, tensor: Any) -> TensorProto:
    """A complete TensorProto (copies the bytes; for small tensors and in-memory models)."""
    proto = tensor_header(name, tensor)
    proto.raw_data = bytes(raw_bytes(tensor))
    return proto


# -- checking ------------------------------------------------------------------------
def check(serialized: Serialized, full_check: bool = True) -> None:
    """Run the ONNX checker on the model with weights as typed inputs (no bytes loaded)."""
    model = _weightless(serialized.model, serialized.weights)
    try:
        onnx.checker.check_model(model, full_check=full_check)
    except onnx.checker.ValidationError as exc:
        raise CheckerError(f"The exported model is not valid ONNX: {exc}"
                           f"{blame(serialized, str(exc))}") from exc
    except onnx.shape_inference.InferenceError as exc:
        raise CheckerError(f"ONNX shape inference rejects the exported model: {exc}"
                           f"{blame(serialized, str(exc))}") from exc


_NODE_NAME = re.compile(r"(?:Name: ?'?|node name: )([^\s')]+)")


def named_node(serialized: Serialized, message: str) -> tuple[str, Node] | None:
    """The first node of the model an error message (checker, ONNX Runtime) names."""
    for name in _NODE_NAME.findall(message):
        node = serialized.nodes.get(name)
        if node is not None:
            return name, node
    return None


def blame(serialized: Serialized, message: str) -> str:
    """For an error message that names a node of the model: a new line saying where that
    node came from, e.g. ``(node /Relu_0 was made for aten::relu at m.py(5): forward by
    the symbolic from my-pack (my-dist 1.0))``; ``""`` when no node is named."""
    found = named_node(serialized, message)
    if found is None:
        return ""
    name, node = found
    where = f" at {node.source}" if node.source else ""
    plugin = plugin_of(node)
    by = f" by the symbolic from {plugin}" if plugin else ""
    return f"\n(node {name} was made for {node.origin or 'an unknown op'}{where}{by})"


# -- writing -------------------------------------------------------------------------
#: ``external_data=PER_TENSOR``: each weight in a file of its own, named after it.
PER_TENSOR = "per_tensor"


def write(serialized: Serialized, f: str | os.PathLike[str] | IO[bytes], *,
          external_data: bool | str | None = None, location: str | None = None,
          progress: Progress | None = None) -> None:
    """Write the model to a path (atomically) or a binary file object.

    ``external_data``: None puts the weights in one file beside the model past 2 GB,
    True always, False never; ``"per_tensor"`` puts each weight in a file of its own.
    ``progress(bytes_written, total_bytes)`` is called after each weight.
    """
    if isinstance(external_data, str) and external_data != PER_TENSOR:
        raise InvalidExportArgumentError(
            f"external_data={external_data!r}: use None (automatic), True, False or "
            f"{PER_TENSOR!r} (one file per weight).")
    use_external = (serialized.weight_bytes > EXTERNAL_DATA_THRESHOLD
                    if external_data is None else external_data)
    if not use_external and serialized.weight_bytes + serialized.model.ByteSize() > PROTOBUF_LIMIT:
        raise InvalidExportArgumentError(
            f"The model holds {serialized.weight_bytes / 2**30:.2f} GiB of weights, more than one "
            "ONNX protobuf can carry (2 GiB): export to a file path with external_data=None "
            "(automatic) or True.")
    if isinstance(f, (str, os.PathLike)):
        _write_path(serialized, os.fspath(f), use_external, location, progress)
        return
    if not hasattr(f, "write"):
        raise InvalidExportArgumentError(
            f"f must be a file path or a binary file object, not {type(f).__name__}.")
    if use_external:
        raise InvalidExportArgumentError(
            "This model needs external data (its weights pass 2 GB): export to a file path, "
            "not a file object.")
    _stream(serialized, f, progress)


def _write_path(serialized: Serialized, path: str, use_external: bool | str,
                location: str | None, progress: Progress | None = None) -> None:
    """Write to temporary files beside ``path``, then rename them into place, the model last.

    On any failure the temporary files are removed and ``path`` and its weight files are
    left as they were. Temporary files a killed process left behind are removed first.
    """
    directory = os.path.dirname(os.path.abspath(path))
    check_target(path)
    _remove_stale_files(directory)
    temps: list[str] = []
    try:
        moves: list[tuple[str, str]] = []
        if use_external == PER_TENSOR:
            model, moves = _external_files(serialized, directory, os.path.basename(path), temps,
                                           progress)
        elif use_external:
            location = location or os.path.basename(path) + ".data"
            with _temp(directory, location, temps) as data_file:
                model = _external(serialized, data_file, location, progress)
            moves = [(temps[-1], os.path.join(directory, location))]
        with _temp(directory, os.path.basename(path), temps) as handle:
            if moves:
                handle.write(model.SerializeToString())
            else:
                _stream(serialized, handle, progress)
        _commit(temps[-1], path, moves)
        temps.clear()
    except OSError as exc:
        raise OnnxExporterError(
            f"Cannot write {path!r}: {exc.strerror or exc}. Check that the folder exists, is "
            "writable and has free space; nothing was written.") from exc
    finally:
        for temp in temps:
            with contextlib.suppress(OSError):
                os.unlink(temp)


# -- crash-safe renames ----------------------------------------------------------------
# The files of one write are temporary files beside the target until the model file, the
# last, is renamed into place. Replacing weight files an existing model uses is journaled:
# the journal names the model's new inode, each old weight file is kept under a backup
# name until the model is in place, and a failure (or, at the next write to the folder,
# the death of the writing process) puts the old files back.
#: Every temporary file's name: ``.<final name>.oxport-<host>-<pid>.<start>-<token>.<kind>``
#: (``<start>``: when the writing process started, so a later process that got the same pid,
#: as a restarted container's process does, is told apart; older names lack it).
_TEMP_NAME = re.compile(r"^\.(?P<final>.+)\.oxport-(?P<host>[A-Za-z0-9-]+)-(?P<pid>\d+)"
                        r"(?:\.(?P<start>\d+))?-(?P<token>[a-z0-9_]+)\.(?P<kind>tmp|bak|journal)$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (Linux: clock ticks since boot), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        return int(fields[19])  # field 22 of stat; the fields after the name start at 3
    except (OSError, IndexError, ValueError):
        return None


_PROCESS = f"{os.getpid()}.{_start_time(os.getpid()) or 0}"


def _process() -> str:
    """This process as temporary names carry it: ``<pid>.<start time>`` (re-read after a
    fork, which gives the child a pid and start time of its own)."""
    global _PROCESS
    if not _PROCESS.startswith(f"{os.getpid()}."):
        _PROCESS = f"{os.getpid()}.{_start_time(os.getpid()) or 0}"
    return _PROCESS


def _temp_prefix(name: str) -> str:
    return f".{name}.oxport-{_host()}-{_process()}-"


def _commit(model_temp: str, path: str, moves: Sequence[tuple[str, str]]) -> None:
    """Rename the weight files ``moves`` (temporary, final) into place, then the model.

    Without weight files this is one atomic rename. With them, a journal beside the model
    lists every final name, whether it existed and its backup name; existing files are
    renamed to their backup before the new one takes their name, and on failure
    :func:`_roll_back` restores them.
    """
    if not moves:
        os.replace(model_temp, path)
        return
    directory = os.path.dirname(path)
    token = os.urandom(4).hex()
    entries = [{"final": os.path.basename(final), "existed": os.path.lexists(final),
                "backup": _temp_prefix(os.path.basename(final)) + token + ".bak"}
               for _, final in moves]
    journal = {"model": os.path.basename(path), "inode": os.stat(model_temp).st_ino,
               "files": entries}
    journal_path = os.path.join(directory, _temp_prefix(os.path.basename(path)) + token
                                + ".journal")
    try:
        with open(journal_path, "x", encoding="utf-8") as handle:
            json.dump(journal, handle)
        for (temp, final), entry in zip(moves, entries):
            if entry["existed"]:
                os.replace(final, os.path.join(directory, entry["backup"]))
            os.replace(temp, final)
        os.replace(model_temp, path)
    except BaseException:
        _roll_back(directory, journal)
        with contextlib.suppress(OSError):
            os.unlink(journal_path)
        raise
    for entry in entries:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, entry["backup"]))
    with contextlib.suppress(OSError):
        os.unlink(journal_path)


def _roll_back(directory: str, journal: dict[str, Any]) -> None:
    """Undo an unfinished :func:`_commit`: old weight files back from their backups, new
    ones that replaced nothing removed. Does nothing when the model was renamed into place
    (the write finished; only the backups are left to remove)."""
    model = os.path.join(directory, journal["model"])
    with contextlib.suppress(OSError):
        if os.stat(model).st_ino == journal["inode"]:
            return
    for entry in journal["files"]:
        final = os.path.join(directory, entry["final"])
        backup = os.path.join(directory, entry["backup"])
        with contextlib.suppress(OSError):
            if os.path.lexists(backup):
                os.replace(backup, final)
            elif not entry["existed"]:
                os.unlink(final)


def _remove_stale_files(directory: str) -> None:
    """Finish what writers on this host that were killed mid-write (SIGKILL, SIGTERM) left
    in ``directory``: roll back their journaled renames, remove their temporary files.

    Files of processes still running, or of other hosts sharing the folder, are left alone.
    """
    try:
        names = [n for n in os.listdir(directory) if n.startswith(".") and ".oxport-" in n]
    except OSError:
        return
    stale = [(name, match) for name in names if (match := _TEMP_NAME.match(name))
             and match["host"] == _host() and not _alive(int(match["pid"]), match["start"])]
    stale.sort(key=lambda item: item[1]["kind"] != "journal")  # journals first
    for name, match in stale:
        path = os.path.join(directory, name)
        if match["kind"] == "journal":
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                with open(path, encoding="utf-8") as handle:
                    _roll_back(directory, json.load(handle))
        with contextlib.suppress(OSError):
            os.unlink(path)


def _alive(pid: int, start: str | None = None) -> bool:
    """Whether the process ``pid`` that started at ``start`` (if known) runs; a process
    with that pid that started at another time is a later one (on Windows, where there is
    no cheap safe probe, every process counts as running)."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        pass
    now = _start_time(pid) if start is not None and start != "0" else None
    return now is None or str(now) == start


def check_target(path: str) -> None:
    """Raise a clear error before any work when ``path`` cannot be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InvalidExportArgumentError(
            f"Cannot write {path!r}: the folder {directory!r} does not exist. Create it first.")
    if not os.access(directory, os.W_OK):
        raise InvalidExportArgumentError(
            f"Cannot write {path!r}: the folder {directory!r} is not writable. Choose another "
            "folder or fix its permissions.")
    if os.path.isdir(path):
        raise InvalidExportArgumentError(
            f"Cannot write {path!r}: it is a folder. Give a file name such as "
            f"{os.path.join(path, 'model.onnx')!r}.")


def _temp(directory: str, name: str, temps: list[str]) -> IO[bytes]:
    """A new empty file beside the target, open for writing, its path appended to ``temps``.

    It gets the permissions a plain ``open`` would give (it is renamed into place:
    mkstemp's owner-only mode would stay on the model), and it is written through the
    descriptor mkstemp opened: reopening it with truncation would make ext4 flush it to
    disk on close (its replace-via-truncate heuristic), which costs as much as the write.
    """
    fd, temp = tempfile.mkstemp(prefix=_temp_prefix(name), suffix=".tmp", dir=directory)
    temps.append(temp)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


_UMASK = os.umask(0o022)  # read once, at import (reading it means setting it)
os.umask(_UMASK)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_MODEL_GRAPH_TAG = bytes([(7 << 3) | 2])       # ModelProto.graph
_GRAPH_INITIALIZER_TAG = bytes([(5 << 3) | 2])  # GraphProto.initializer
_TENSOR_RAW_DATA_TAG = bytes([(9 << 3) | 2])    # TensorProto.raw_data


#: Computed weights (:class:`LazyTensor`) are written rows at a time, at most this many
#: bytes at once, each chunk computed into the same buffer (a new tensor per chunk, of
#: varying sizes, grew ResNet-50's export by 2-5 MB of heap the chunks left fragmented).
#: 256 KB, not 1 MB: ResNet-50's first export peaks 0.01 x its weights lower, for ~5 ms
#: more compute over its 100 MB of folded convolutions.
CHUNK_BYTES = 1 << 18
#: Weights stored strided (a folded transpose is a view) are gathered rows at a time, at
#: most this many bytes at once, and each band a tile of :data:`GATHER_COLUMNS` columns at
#: a time, which keeps a transpose's reads and writes in cache: over seven Linear shapes
#: (768 x 768 to 50257 x 768) 27 % less copy time than 1 MB bands copied whole.
GATHER_BYTES = 4 << 20
GATHER_COLUMNS = 512


def _row_chunks(tensor: Any, limit: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` row ranges of at most ``limit`` bytes (at least one row)."""
    rows = tensor.shape[0]
    row_bytes = tensor.numel() // max(rows, 1) * tensor.element_size()
    step = max(1, limit // max(row_bytes, 1))
    for start in range(0, rows, step):
        yield start, min(start + step, rows)


def _gathered(tensor: Any) -> bool:
    """Whether the writer gathers ``tensor`` (a strided CPU weight) band by band."""
    return (isinstance(tensor, torch.Tensor) and tensor.dim() >= 2
            and not tensor.is_contiguous() and tensor.device.type == "cpu"
            and not tensor.is_quantized and tensor.numel() > 0)


def _chunk_bytes(tensor: Any) -> int:
    """The largest chunk of ``tensor`` the writer puts in its scratch buffer (0: none)."""
    if isinstance(tensor, LazyTensor):
        limit = CHUNK_BYTES
    elif _gathered(tensor):
        limit = GATHER_BYTES
    else:
        return 0
    if not tensor.numel():
        return 0
    step = next(_row_chunks(tensor, limit))
    return (step[1] - step[0]) * (tensor.numel() // tensor.shape[0]) * tensor.element_size()


class _Writer:
    """Writes weights' raw bytes; owns the one scratch buffer that computed and strided
    weights pass through, allocated once at the largest chunk any of them needs (a
    buffer grown weight by weight left each smaller one behind in the heap)."""

    def __init__(self, weights: Sequence[Weight]) -> None:
        chunks = [_chunk_bytes(weight.tensor) for weight in weights]
        self._scratch = torch.empty(max(chunks, default=0), dtype=torch.uint8)

    def _buffer(self, tensor: Any, rows: int) -> torch.Tensor:
        """A contiguous tensor for ``rows`` of ``tensor``'s rows, in the scratch buffer."""
        shape = (rows, *tensor.shape[1:])
        size = torch.Size(shape).numel() * tensor.element_size()
        return self._scratch[:size].view(tensor.dtype).view(shape)

    def weight(self, handle: IO[bytes], weight: Weight) -> int:
        """Write ``weight``'s bytes; returns how many (``weight.nbytes``)."""
        tensor = weight.tensor
        if isinstance(tensor, LazyTensor):
            written = 0
            for start, stop in _row_chunks(tensor, CHUNK_BYTES):
                out = self._buffer(tensor, stop - start)
                tensor.rows(start, stop, out)
                data = raw_bytes(out)
                handle.write(data)
                written += len(data)
        elif _gathered(tensor):
            tensor = tensor.detach()
            for start, stop in _row_chunks(tensor, GATHER_BYTES):
                part = tensor[start:stop]
                band = self._buffer(tensor, stop - start)
                for column in range(0, part.shape[1], GATHER_COLUMNS):
                    band[:, column:column + GATHER_COLUMNS].copy_(
                        part[:, column:column + GATHER_COLUMNS])
                handle.write(raw_bytes(band))
            written = tensor.numel() * tensor.element_size()
        else:
            data = raw_bytes(tensor)
            handle.write(data)
            written = len(data)
        if written != weight.nbytes:
            raise OnnxExporterError(
                f"Internal error: weight {weight.name!r} wrote {written} bytes, "
                f"not {weight.nbytes}.")
        return written


def _stream(serialized: Serialized, handle: IO[bytes], progress: Progress | None = None) -> None:
    """Write the model, then each weight as a merged ``graph { initializer {...} }``."""
    handle.write(serialized.model.SerializeToString())
    done, total = 0, serialized.weight_bytes
    writer = _Writer(serialized.weights)
    for weight in serialized.weights:
        length = weight.nbytes
        header = tensor_header(weight.name, weight.tensor).SerializeToString()
        tensor_len = len(header) + 1 + len(_varint(length)) + length
        graph_len = 1 + len(_varint(tensor_len)) + tensor_len
        handle.write(_MODEL_GRAPH_TAG + _varint(graph_len) + _GRAPH_INITIALIZER_TAG
                     + _varint(tensor_len) + header + _TENSOR_RAW_DATA_TAG
                     + _varint(length))
        done += writer.weight(handle, weight)
        if progress is not None:
            progress(done, total)


def _external(serialized: Serialized, data_file: IO[bytes], location: str,
              progress: Progress | None = None) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.CopyFrom(serialized.model)
    offset, done, total = 0, 0, serialized.weight_bytes
    writer = _Writer(serialized.weights)
    for weight in serialized.weights:
        if weight.nbytes < EXTERNAL_MIN_BYTES:
            model.graph.initializer.append(tensor_proto(weight.name, weight.tensor))
            length = weight.nbytes
        else:
            pad = (-offset) % EXTERNAL_ALIGNMENT
            if pad:
                data_file.write(b"\0" * pad)
                offset += pad
            length = writer.weight(data_file, weight)
            model.graph.initializer.append(_external_header(weight, location, offset, length))
            offset += length
        done += length
        if progress is not None:
            progress(done, total)
    return model


def _external_header(weight: Weight, location: str, offset: int, length: int) -> TensorProto:
    """The initializer of a weight stored at ``offset`` in the external file ``location``."""
    header = tensor_header(weight.name, weight.tensor)
    header.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = header.external_data.add()
        entry.key, entry.value = key, value
    return header


def _external_files(serialized: Serialized, directory: str, model_name: str, temps: list[str],
                    progress: Progress | None = None
                    ) -> tuple[onnx.ModelProto, list[tuple[str, str]]]:
    """Each weight to a temporary file of its own (listed in ``temps``), to be named
    ``<model_name>.<weight name>``; returns the model pointing at the final names, and the
    (temporary, final) paths to rename."""
    model = onnx.ModelProto()
    model.CopyFrom(serialized.model)
    taken: set[str] = {"data"}  # <model_name>.data is the single-file form's name
    moves = []
    done, total = 0, serialized.weight_bytes
    writer = _Writer(serialized.weights)
    for weight in serialized.weights:
        if weight.nbytes < EXTERNAL_MIN_BYTES:
            model.graph.initializer.append(tensor_proto(weight.name, weight.tensor))
            done += weight.nbytes
            if progress is not None:
                progress(done, total)
            continue
        base = re.sub(r"[^A-Za-z0-9._-]", "_", weight.name).lstrip(".") or "tensor"
        location, n = base, 1
        while location.lower() in taken:  # unique on case-insensitive file systems too
            location, n = f"{base}.{n}", n + 1
        taken.add(location.lower())
        location = f"{model_name}.{location}"
        with _temp(directory, location, temps) as handle:
            length = writer.weight(handle, weight)
        temp = temps[-1]
        model.graph.initializer.append(_external_header(weight, location, 0, length))
        moves.append((temp, os.path.join(directory, location)))
        done += length
        if progress is not None:
            progress(done, total)
    return model, moves


def to_bytes(serialized: Serialized) -> bytes:
    buffer = io.BytesIO()
    _stream(serialized, buffer)
    return buffer.getvalue()


def ir_version(model: onnx.ModelProto) -> int:
    """The lowest IR version that carries the model's opset imports (and local functions).

    Read from ``onnx.helper.VERSION_TABLE``; the newest IR an installed onnx knows may be
    newer than a runtime accepts (ONNX Runtime 1.31 rejects IR 14), so never use it blindly.
    """
    version = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    if model.functions:
        version = max(version, 8)  # local functions came with IR 8
    return version


def _version() -> str:
    from oxport import __version__
    return __version__

