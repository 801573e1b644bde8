"""From the IR to a ``ModelProto`` without weight bytes: value names, value infos, nodes,
opset imports and metadata (:func:`serialize`)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import onnx
import torch
from onnx import TensorProto, helper

from oxport.errors import (
    DynamicAxesWarning,
    InvalidExportArgumentError,
    OnnxExporterError,
    spelled,
    user_stacklevel,
)
from oxport.frontends.arguments import dynamic_axis_pairs
from oxport.ir import Graph, Node, Type, Value
from oxport.opset_versions import MAX_OPSET
from oxport.passes import folding, infer  # folding as a module: it imports serialize
from oxport.serialize.weights import (
    LazyTensor,
    Weight,
    onnx_elem_type,
    tensor_proto,
    weightless,
)
from oxport.types import check_dtype_opset, onnx_shape, packed_count


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
class Namer:
    """The ONNX names of values: those the user gives (:meth:`claim`), else each value's
    own name made unique with a ``.N`` suffix."""

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

    def name(self, value: Value, base: str = "") -> str:
        """``value``'s name: the one it has, else ``base`` (by default the value's own
        name) made unique."""
        found = self.names.get(id(value))
        if found is not None:
            return found
        base = clean_name(base or value.name) or "v"
        name, n = base, 1
        while name in self.used:
            name = f"{base}.{n}"
            n += 1
        self.used.add(name)
        self.names[id(value)] = name
        return name


def _module_path_name(value: Value) -> str:
    """An output's name after the module that made it, ``classifier/Gemm`` (as torch.onnx
    names a node ``/classifier/Gemm``); '' (its own name) when it was made at the top
    level."""
    producer = value.producer
    if producer is None or not producer.scope:
        return ""
    return f"{producer.scope}/{producer.op_type}"


def clean_name(name: str) -> str:
    """A value's name as the ONNX model spells it (no spaces)."""
    return name.replace(" ", "_")


def _dedupe_weights(graph: Graph) -> None:
    """Point every use of a tensor that shares storage with another at one initializer."""
    seen: dict[tuple[Any, ...], Value] = {}
    replace: dict[int, Value] = {}
    for name, value in list(graph.initializers.items()):
        tensor = value.const
        if isinstance(tensor, LazyTensor):  # one object under several names: a tied weight
            key: tuple[Any, ...] = ("lazy", id(tensor))
        elif not isinstance(tensor, torch.Tensor) or tensor.numel() == 0:
            continue
        else:
            key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(),
                   tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)
        if key in seen:
            replace[id(value)] = seen[key]
            del graph.initializers[name]
        else:
            seen[key] = value
    folding.replace_uses(graph, replace)


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
    namer = Namer()
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
    for value in graph.outputs:
        namer.name(value, _module_path_name(value))

    axes = _dynamic_axes(dynamic_axes, [namer.name(v) for v in graph.inputs],
                         [namer.name(v) for v in graph.outputs])
    types: dict[str, Type] = {}
    proto = graph_proto(graph, namer, verbose, add_node_names, types, module_types or {})
    for value in graph.inputs:
        proto.input.append(value_info(namer.name(value), value.type(), axes))
    if not export_params:
        for value in params:
            proto.input.append(value_info(namer.name(value), value.type(), {}))
    if keep_initializers_as_inputs:
        for value in (constants if not export_params else [*params, *constants]):
            proto.input.append(value_info(namer.name(value), value.type(), {}))
    for value in graph.outputs:
        proto.output.append(value_info(namer.name(value), value.type(), axes,
                                       dynamic=bool(axes) and example_sizes))
    stored = constants if not export_params else [*params, *constants]
    weights = [Weight(namer.name(v), v.const) for v in stored]
    for value in graph.inputs:
        types[namer.name(value)] = value.type()
    for value in graph.initializers.values():
        types[namer.name(value)] = value.type()
    for type_ in types.values():
        check_dtype_opset(type_.dtype(), graph.opset_imports.get("", MAX_OPSET))

    opsets = [helper.make_opsetid(domain, version) for domain, version in
              sorted(graph.opset_imports.items())]
    model = helper.make_model(proto, opset_imports=opsets, producer_name="oxport",
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


def _node_index(proto: onnx.GraphProto, graph: Graph, namer: Namer) -> dict[str, Node]:
    """ONNX node name -> IR node, matched by first output name (subgraphs included)."""
    by_output = {namer.names.get(id(node.output_values[0])): node
                 for node in graph.walk() if node.output_values}
    index: dict[str, Node] = {}
    pending = [proto]
    while pending:
        for made in pending.pop().node:
            ir_node = by_output.get(made.output[0]) if made.output else None
            if made.name and ir_node is not None:
                index[made.name] = ir_node
            pending.extend(attr.g for attr in made.attribute if attr.HasField("g"))
            pending.extend(g for attr in made.attribute for g in attr.graphs)
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


def inferred_outputs(model: onnx.ModelProto, weights: Sequence[Weight]
                     ) -> dict[str, onnx.ValueInfoProto]:
    """The model's outputs by name as ONNX shape inference types them, their declared
    shapes ignored; ``{}`` when inference fails.

    One call of ``onnx.shape_inference`` on a weightless copy of the model (weights as
    typed inputs).
    """
    probe = weightless(model, weights)
    for output in probe.graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(probe, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError):
        return {}
    return {output.name: output for output in inferred.graph.output}


def _infer_output_shapes(model: onnx.ModelProto, weights: Sequence[Weight]) -> None:
    """Replace the open output dims left by dynamic axes with what ONNX shape inference
    derives (a number, or the symbolic name of an input axis).

    When inference fails, the dims stay open.
    """
    found = inferred_outputs(model, weights)
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


def _separate_outputs(graph: Graph) -> None:
    """Give each graph output its own value (Identity where one is an input, weight or
    repeat). A weight of a packed dtype (float4_e2m1fn_x2) is output as itself, as
    torch.onnx does: ONNX Runtime has no Identity for it, and would then load no part of
    the model."""
    weights = {id(v) for v in graph.initializers.values()}
    seen: set[int] = {id(v) for v in graph.inputs} | weights
    outputs = []
    for value in graph.outputs:
        if id(value) in weights and packed_count(value.type().dtype()) > 1:
            weights.discard(id(value))
        elif id(value) in seen or value.producer is None or value.producer.op_type == "Constant":
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
            warnings.warn(DynamicAxesWarning(
                f"oxport: dynamic_axes names {key!r}, which is neither an input nor an output "
                f"(inputs {inputs}, outputs {outputs}): name them with input_names and "
                "output_names first. The entry is ignored, as torch.onnx does.",
                key, inputs, outputs), stacklevel=user_stacklevel())
            continue
        if isinstance(spec, (Mapping, list, tuple)):
            pairs = dynamic_axis_pairs(key, spec)
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


def value_info(name: str, type_: Type, axes: dict[str, dict[int, str]],
               dynamic: bool = False) -> onnx.ValueInfoProto:
    """The value info of ``name``: its dtype and dims, the axes ``axes[name]`` names as
    those names; with ``dynamic``, numeric dims left open (for shape inference to fill)."""
    if type_.kind() in ("ListType", "TupleType", "OptionalType") \
            and type_.getElementType().dtype() is not None:
        return helper.make_value_info(name, infer.type_proto(type_))
    dtype = type_.dtype()
    elem_type = onnx_elem_type(dtype) if dtype is not None else TensorProto.UNDEFINED
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
        shape = onnx_shape(dtype, dims)
    return helper.make_tensor_value_info(name, elem_type, shape)


def graph_proto(graph: Graph, namer: Namer, verbose: bool, add_node_names: bool,
                types: dict[str, Type], module_types: dict[str, str]) -> onnx.GraphProto:
    """``graph``'s nodes (a subgraph's inputs and outputs too) as a GraphProto; records
    the IR type of every value it names in ``types``."""
    proto = onnx.GraphProto()
    proto.name = graph.name
    counters: dict[str, int] = {}
    for node in graph.nodes:
        proto.node.append(node_proto(node, namer, verbose, add_node_names, counters, types,
                                     module_types))
        for value in node.output_values:
            if not value.is_omitted:
                types[namer.name(value)] = value.type()
    if graph.parent is not None:
        for value in graph.inputs:
            proto.input.append(value_info(namer.name(value), value.type(), {}))
            types[namer.name(value)] = value.type()
        for value in graph.outputs:
            proto.output.append(value_info(namer.name(value), value.type(), {}, dynamic=True))
    return proto


def scope_text(path: str, module_types: dict[str, str]) -> str:
    """``features.0`` -> ``AlexNet/Sequential[features]/Conv2d[0]`` (torch.onnx's scope form)."""
    parts = [module_types.get("", "")] if module_types.get("") else []
    prefix = ""
    for name in path.split(".") if path else []:
        prefix = f"{prefix}.{name}" if prefix else name
        parts.append(f"{module_types[prefix]}[{name}]" if prefix in module_types else name)
    return "/".join(parts)


def node_proto(node: Node, namer: Namer, verbose: bool, add_node_names: bool,
               counters: dict[str, int], types: dict[str, Type],
               module_types: dict[str, str]) -> onnx.NodeProto:
    """``node`` as a NodeProto; ``counters`` (op type -> nodes named so far) numbers the
    names it makes, ``verbose`` adds the scope, source line and plugin as its doc string."""
    proto = onnx.NodeProto()
    proto.op_type = node.op_type
    proto.domain = node.domain
    proto.input.extend("" if v is None else namer.name(v) for v in node.input_values)
    proto.output.extend("" if v.is_omitted else namer.name(v) for v in node.output_values)
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


def _attribute_proto(name: str, kind: str, value: Any, namer: Namer, verbose: bool,
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
        return helper.make_attribute(name, graph_proto(value, namer, verbose, add_node_names,
                                                       types, module_types))
    if kind == "gs":
        return helper.make_attribute(
            name, [graph_proto(v, namer, verbose, add_node_names, types, module_types)
                   for v in value])
    attr_type = {"i": onnx.AttributeProto.INT, "f": onnx.AttributeProto.FLOAT,
                 "s": onnx.AttributeProto.STRING, "is": onnx.AttributeProto.INTS,
                 "fs": onnx.AttributeProto.FLOATS, "ss": onnx.AttributeProto.STRINGS}.get(kind)
    if attr_type is None:
        raise OnnxExporterError(f"Attribute {name!r} has an unsupported kind {kind!r}.")
    return helper.make_attribute(name, value, attr_type=attr_type)


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

