"""Names for the output dims a trace leaves open: the dynamic axes they equal, where that is
certain.

ONNX shape inference (with data propagation) names an output dim after an input axis only
through the ops it can follow symbolically; a traced model computes sizes at run time
(``Shape`` -> ``Gather`` -> ``Concat`` -> ``Reshape``, ``Range(0, seq, 1)``, ``Expand``) or
folds them into shapes with ``0`` and ``-1``, where it gives up (``unk__0``). Here those
size computations are followed on symbols: a 1-D integer value is known as its items (a
size or an axis name), and each op that makes a shape from such a value (``Reshape``, its
``-1`` by exact division of the input's dims, ``Expand``, ``Range``, ``ConstantOfShape``,
``Slice``) types its output; ONNX's inference then carries the names on. A dim is named
only where the symbols say so exactly (``batch*2*seq*4 / (batch*8)`` is ``seq``; a
product of two axes stays open)."""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping, Sequence
from typing import Any

import onnx
from onnx import numpy_helper

from oxport import serialize
from oxport.serialize.weights import weightless

#: A dim: a size, an axis's name (or ONNX's ``unk__N``), or None (unknown).
Dim = Any
_ROUNDS = 8


def name_open_output_dims(serialized: serialize.Serialized) -> None:
    """Name the output dims of ``serialized`` that shape inference left open after the
    input axes they equal, where that is certain (in place)."""
    outputs = serialized.model.graph.output
    if None not in (dim for value in outputs for dim in dims_of(value)):
        return
    probe = weightless(serialized.model, serialized.weights)
    shapes: dict[str, list[Dim]] = {}
    for _ in range(_ROUNDS):
        try:
            inferred = onnx.shape_inference.infer_shapes(probe, strict_mode=False,
                                                         data_prop=True)
        except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError,
                RuntimeError):
            return
        shapes = {t.name: list(t.dims) for t in inferred.graph.initializer}
        shapes.update((v.name, dims_of(v)) for v in (*inferred.graph.input,
                                                     *inferred.graph.value_info,
                                                     *inferred.graph.output))
        refined = _refined(inferred.graph, shapes)
        if not refined:
            break
        kept = [v for v in probe.graph.value_info if v.name not in refined]
        del probe.graph.value_info[:]
        probe.graph.value_info.extend(kept)
        probe.graph.value_info.extend(
            onnx.helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, dims)
            for name, dims in refined.items())
    for output in outputs:
        derived = shapes.get(output.name)
        if derived is None or len(derived) != len(output.type.tensor_type.shape.dim):
            continue
        for dim, found in zip(output.type.tensor_type.shape.dim, derived):
            if not dim.HasField("dim_value") and not dim.dim_param and _named(found):
                dim.dim_param = found


def dims_of(value: onnx.ValueInfoProto) -> list[Dim]:
    """A value's dims: a size, a symbol's name, or None."""
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return []
    return [dim.dim_value if dim.HasField("dim_value") else dim.dim_param or None
            for dim in value.type.tensor_type.shape.dim]


def _named(dim: Dim) -> bool:
    """Whether ``dim`` is an input axis's name (not a size, unknown, or ONNX's own)."""
    return isinstance(dim, str) and not dim.startswith("unk__")


def _refined(graph: onnx.GraphProto, shapes: Mapping[str, list[Dim]]
             ) -> dict[str, list[Dim]]:
    """Value name -> dims, for each shape-making op's output whose dims the symbols name
    better than inference did."""
    values = _initial_values(graph)
    refined: dict[str, list[Dim]] = {}
    for node in graph.node:
        known = _value_of(node, values, shapes)
        if known is not None:
            values[node.output[0]] = known
        made = _shape_made(node, values, shapes)
        current = shapes.get(node.output[0]) if node.output else None
        if made is None or current is None or len(made) != len(current):
            continue
        better = [new if (_named(new) or isinstance(new, int)) and not _named(old)
                  and not isinstance(old, int) else old for old, new in zip(current, made)]
        if better != current:
            refined[node.output[0]] = better
    return refined


def _initial_values(graph: onnx.GraphProto) -> dict[str, list[Dim]]:
    """The graph's integer constants of at most one dim (initializers and ``Constant``
    nodes), as lists (a scalar as one item)."""
    tensors = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    tensors[node.output[0]] = attribute.t
    integers = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
    return {name: numpy_helper.to_array(t).reshape(-1).tolist() for name, t in tensors.items()
            if t.data_type in integers and len(t.dims) <= 1}


def _attribute(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _value_of(node: onnx.NodeProto, values: Mapping[str, list[Dim]],
              shapes: Mapping[str, list[Dim]]) -> list[Dim] | None:
    """The items of a 1-D integer value that ``node`` computes from sizes and constants,
    when each is known."""
    op, inputs = node.op_type, [values.get(name) for name in node.input]
    if op == "Shape":
        dims = shapes.get(node.input[0])
        if not dims or None in dims:
            return None
        start, end = _attribute(node, "start", 0), _attribute(node, "end", len(dims))
        return list(dims[start:end])
    if op in ("Cast", "Identity", "Squeeze", "Unsqueeze") and inputs and inputs[0] is not None:
        return list(inputs[0]) if len(inputs[0]) == 1 or op in ("Cast", "Identity") else None
    if op == "Concat" and inputs and None not in inputs:
        return [item for items in inputs for item in items]  # type: ignore[union-attr]
    if op == "Gather" and len(inputs) == 2 and None not in inputs:
        data, indices = inputs
        if all(isinstance(i, int) and -len(data) <= i < len(data) for i in indices):
            return [data[i] for i in indices]
    if op == "Slice" and len(inputs) >= 3 and None not in inputs[:3]:
        steps = inputs[4] if len(inputs) > 4 else [1]
        if steps == [1] and all(isinstance(v, int) for v in (*inputs[1], *inputs[2])) \
                and len(inputs[1]) == len(inputs[2]) == 1:
            return list(inputs[0][inputs[1][0]:inputs[2][0]])
    return None


def _shape_made(node: onnx.NodeProto, values: Mapping[str, list[Dim]],
                shapes: Mapping[str, list[Dim]]) -> list[Dim] | None:
    """The dims of the output of a shape-making op, from the symbols of its operands."""
    op, inputs = node.op_type, [values.get(name) for name in node.input]
    given = shapes.get(node.input[0]) if node.input else None
    if op == "Reshape" and len(inputs) > 1 and inputs[1] is not None and given \
            and None not in given and not _attribute(node, "allowzero", 0):
        return _reshaped(given, inputs[1])
    if op == "Expand" and len(inputs) > 1 and inputs[1] is not None and given is not None:
        return _broadcast(given, inputs[1])
    if op == "ConstantOfShape" and inputs and inputs[0] is not None:
        return list(inputs[0])
    if op == "Range" and len(inputs) == 3 and inputs[0] == [0] and inputs[2] == [1] \
            and inputs[1] is not None and len(inputs[1]) == 1:
        return list(inputs[1])
    if op == "Slice" and given is not None and len(inputs) >= 3 \
            and inputs[1] is not None and inputs[2] is not None:
        return _sliced(given, inputs[1], inputs[2], inputs[3] if len(inputs) > 3 else None,
                       inputs[4] if len(inputs) > 4 else None)
    return None


def _reshaped(given: Sequence[Dim], target: Sequence[Dim]) -> list[Dim]:
    """``Reshape(given, target)``: ``0`` copies the input's dim, ``-1`` is the exact
    quotient of the input's dims by the others."""
    dims: list[Dim] = [given[i] if size == 0 and i < len(given) else size
                       for i, size in enumerate(target)]
    if dims.count(-1) == 1:
        dims[dims.index(-1)] = _quotient(given, [d for d in dims if d != -1])
    return dims


def _broadcast(given: Sequence[Dim], shape: Sequence[Dim]) -> list[Dim]:
    """``Expand(given, shape)``: numpy broadcasting, a 1 giving way to the other dim."""
    rank = max(len(given), len(shape))
    padded = [1] * (rank - len(given)) + list(given)
    wanted = [1] * (rank - len(shape)) + list(shape)
    return [a if b == 1 else b if a == 1 else a if a == b else
            a if isinstance(a, int) else b if isinstance(b, int) else None
            for a, b in zip(padded, wanted)]


def _sliced(given: Sequence[Dim], starts: Sequence[Dim], ends: Sequence[Dim],
            axes: Sequence[Dim] | None, steps: Sequence[Dim] | None) -> list[Dim] | None:
    """``Slice`` from 0 with step 1 to a named end: that many items (the model reads no
    more than it has, as ``position_ids[:, :seq]`` does); other dims as they are."""
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    dims: list[Dim] = list(given)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if not isinstance(axis, int) or not -len(dims) <= axis < len(dims):
            return None
        if start == 0 and step == 1 and _named(end):
            dims[axis] = end
        else:
            dims[axis] = None
    return dims


def _quotient(numerator: Sequence[Dim], denominator: Sequence[Dim]) -> Dim:
    """The product of ``numerator``'s dims over ``denominator``'s as one dim, when it is a
    whole number or a single symbol exactly; else None."""
    if None in numerator or None in denominator:
        return None
    symbols = collections.Counter(d for d in numerator if isinstance(d, str))
    symbols.subtract(d for d in denominator if isinstance(d, str))
    number = math.prod(d for d in numerator if isinstance(d, int))
    divisor = math.prod(d for d in denominator if isinstance(d, int))
    if divisor == 0 or number % divisor or any(count < 0 for count in symbols.values()):
        return None
    left = [name for name, count in symbols.items() for _ in range(count)]
    if not left:
        return number // divisor
    return left[0] if len(left) == 1 and number == divisor else None
