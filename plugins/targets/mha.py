"""Attention that ``GroupQueryAttention`` does not take — an encoder's self-attention (BERT),
a decoder without rotary (GPT-2), with or without a KV cache whose heads are not repeated —
as ONNX Runtime's ``com.microsoft::MultiHeadAttention``.

From each ``Softmax`` the pass walks to the scores ``MatMul`` (under the scalings and the
mask) and the ``MatMul`` with the values; each of query, key and value must be a
``[batch, sequence, heads * head_size]`` projection reshaped to heads and transposed (the
keys and values after a concatenation with a past graph input into a present graph output,
when there is a cache). The mask becomes the kernel's additive ``attention_bias``
(``[batch or 1, 1, sequence, total]``): a boolean mask ``Where(mask, scores, fill)`` turns
into ``Where(mask, 0, fill)``, the fill kept finite (the lowest number of the dtype for
``-inf``), so a row the mask empties entirely averages the values where the unfused file
gives zeros; a float mask added to the scores is the bias itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from oxport.ir import Graph, Node, Value
from oxport.plugins.targets.attention import (
    cache_concats,
    past_safe_softmax,
    single_reader,
    walk_scalars,
)
from oxport.plugins.targets.patterns import (
    Index,
    attr,
    const,
    initializer,
    insert_before,
    last_dim,
    producer,
    rank,
    replace_later_uses,
    replace_value,
    scalar,
)

MSFT = "com.microsoft"


@dataclasses.dataclass
class Heads:
    """A ``[batch, heads, sequence, head_size]`` operand: the projection it comes from, the
    heads count, and for keys and values the cache concatenation it passes through."""

    projection: Value
    heads: int
    cache: Node | None = None
    #: The ``com.microsoft::RotaryEmbedding`` of the heads (ort.rotary's), if any.
    rotary: Node | None = None


@dataclasses.dataclass
class MaskBias:
    """How the scores are masked: by ``Where(condition, ...)`` (the scores kept where it
    is ``keep``, else ``fill``), or by adding a float ``bias``."""

    condition: Value | None = None
    keep: bool = True
    fill: float = 0.0
    bias: Value | None = None


def fuse_multi_head_attention(graph: Graph, context: Any) -> int:
    """Every matched attention as ``MultiHeadAttention`` (ort, ONNX Runtime 1.20+: the
    ``attention_bias`` input)."""
    if context.target.name == "onnx" or not context.runtime_at_least("1.20"):
        return 0
    index = Index(graph)
    anchors = cache_concats(graph, index)
    biases: dict[tuple[int, bool, float], Value] = {}
    count = 0
    for node in list(graph.nodes):
        if (node.domain, node.op_type) == ("", "Softmax") and attr(node, "axis", -1) in (-1, 3):
            count += _fuse_one(graph, index, anchors, node, biases, context.opset)
    if count:
        graph.use_domain(MSFT, 1)
    return count


def _fuse_one(graph: Graph, index: Index, anchors: dict[int, Node], softmax: Node,
              biases: dict[tuple[int, bool, float], Value], opset: int) -> bool:
    weights = past_safe_softmax(index, softmax.output_values[0])
    pv = single_reader(index, weights)
    if pv is None or pv.op_type != "MatMul" or pv.domain or pv.input_values[0] is not weights:
        return False
    scores, scale, mask = _scores(softmax.input_values[0])
    if scores is None or mask is None:
        return False
    q_side, q_scale = walk_scalars(scores.input_values[0])
    k_side, k_scale = walk_scalars(scores.input_values[1])
    query = _heads(q_side)
    key = _transposed_heads(k_side, anchors)
    value = _cached_heads(pv.input_values[1], anchors)
    output = _merged_output(index, pv)
    if None in (query, key, value, output) or not index.readers(output) \
            or (key.cache is None) != (value.cache is None) \
            or len({query.heads, key.heads, value.heads}) != 1:
        return False
    dtype = query.projection.dtype
    if dtype not in (torch.float32, torch.float16):
        return False
    unmasked = mask.condition is None and mask.bias is None
    bias = None if unmasked else _attention_bias(graph, pv, mask, dtype, biases, opset)
    if bias is None and not unmasked:
        return False
    past = [key.cache.input_values[0], value.cache.input_values[0]] if key.cache else []
    *projections, packed_bias = _split_biases(graph, index, [query, key, value])
    projections = [_rotated(graph, operand, projection, pv)
                   for operand, projection in zip((query, key, value), projections)]
    fused = graph.add_node(MSFT, "MultiHeadAttention", [
        *projections, packed_bias, None, bias, *past],
        3 if past else 1, attrs={"num_heads": ("i", query.heads),
                                 "scale": ("f", scale * q_scale * k_scale)})
    insert_before(graph, output.producer, [fused])
    replace_value(graph, output, fused.output_values[0])
    _read_shape_of(index, pv.output_values[0], q_side)  # [B, N, S, H] both: the batch size
    if past:
        replace_later_uses(graph, fused, key.cache.output_values[0], fused.output_values[1])
        replace_later_uses(graph, fused, value.cache.output_values[0], fused.output_values[2])
    return True


def _split_biases(graph: Graph, index: Index, operands: list[Heads]) -> list[Value | None]:
    """The query, key and value projections before their constant ``[D]`` biases, and the
    biases concatenated (MultiHeadAttention's ``bias`` input, zeros where one has none);
    the projections as they are (and no bias) when none has one."""
    found = []
    for operand in operands:
        add, width = producer(operand.projection, "Add"), last_dim(operand.projection)
        split = (operand.projection, None)
        if add is not None and width is not None and operand.rotary is None and \
                single_reader(index, operand.projection) is not None:
            for x, bias in (add.input_values, add.input_values[::-1]):
                data = const(bias)
                if x is not None and not x.is_const and data is not None \
                        and data.shape == (width,):
                    split = (x, data)
                    _read_shape_of(index, operand.projection, x)
                    break
        found.append(split)
    if all(bias is None for _, bias in found):
        return [value for value, _ in found] + [None]
    widths = [last_dim(operand.projection) for operand in operands]
    dtype = next(bias.dtype for _, bias in found if bias is not None)
    packed = np.concatenate([bias if bias is not None else np.zeros(width, dtype)
                             for (_, bias), width in zip(found, widths)])
    return [value for value, _ in found] + [initializer(graph, "qkv_bias", packed)]


def _rotated(graph: Graph, operand: Heads, projection: Value, anchor: Node) -> Value:
    """``projection``, rotated as ``operand``'s heads are: the same RotaryEmbedding on the
    ``[B, S, heads * size]`` tensor (its ``num_heads`` set)."""
    if operand.rotary is None:
        return projection
    rotary = graph.add_node(MSFT, "RotaryEmbedding", [
        projection, *operand.rotary.input_values[1:]], attrs={
        **operand.rotary.attrs, "num_heads": ("i", operand.heads)})
    insert_before(graph, anchor, [rotary])
    return rotary.output_values[0]


def _read_shape_of(index: Index, value: Value, same_shape: Value) -> None:
    """The ``Shape`` nodes reading ``value`` read ``same_shape`` instead."""
    for reader in index.readers(value):
        if reader is not None and reader.op_type == "Shape" and not reader.domain:
            reader.input_values = [same_shape if v is value else v
                                   for v in reader.input_values]


def _scores(value: Value | None) -> tuple[Node | None, float, MaskBias | None]:
    """The scores ``MatMul`` under the mask and the scalings, their factor and the mask."""
    mask = MaskBias()
    if (where := producer(value, "Where")) is not None:
        condition, a, b = where.input_values
        if scalar(b) is not None:
            mask, value = MaskBias(condition, True, scalar(b)), a
        elif scalar(a) is not None:
            mask, value = MaskBias(condition, False, scalar(a)), b
        else:
            return None, 1.0, None
    elif (add := producer(value, "Add")) is not None:
        first, second = add.input_values
        if producer(second, "MatMul", "Mul", "Div") and not producer(first, "MatMul"):
            first, second = second, first
        mask, value = MaskBias(bias=second), first
    value, factor = walk_scalars(value)
    return producer(value, "MatMul"), factor, mask


def _heads(value: Value | None) -> Heads | None:
    """``Transpose(0, 2, 1, 3)`` of a projection reshaped to ``[B, S, heads, size]``, or
    the rotary embedding of that."""
    rotary = producer(value, "RotaryEmbedding", domain=MSFT)
    if rotary is not None:
        found = _heads(rotary.input_values[0])
        return dataclasses.replace(found, rotary=rotary) if found and not found.rotary \
            else None
    transpose = producer(value, "Transpose")
    if transpose is None or attr(transpose, "perm") != [0, 2, 1, 3]:
        return None
    return _reshaped(transpose.input_values[0])


def _reshaped(value: Value | None) -> Heads | None:
    reshape = producer(value, "Reshape")
    if reshape is None or rank(reshape.input_values[0]) != 3:
        return None
    shape = const(reshape.input_values[1])
    sizes = [int(s) for s in shape.reshape(-1)] if shape is not None else \
        list(value.type().shape or ())
    width = last_dim(reshape.input_values[0])
    if len(sizes) != 4 or width is None:
        return None
    heads, size = sizes[2:]
    if not (isinstance(heads, int) and heads > 0) and isinstance(size, int) and size > 0:
        heads = width // size  # [0, 0, -1, size]
    if not isinstance(heads, int) or heads <= 0 or width % heads:
        return None
    return Heads(reshape.input_values[0], heads)


def _cached_heads(value: Value | None, anchors: dict[int, Node]) -> Heads | None:
    """Heads, or a present: ``Concat(past, heads)`` on the sequence axis."""
    node = value.producer if value is not None else None
    if node is not None and id(node) in anchors:
        found = _heads(node.input_values[1])
        return dataclasses.replace(found, cache=node) if found is not None else None
    return _heads(value)


def _transposed_heads(value: Value | None, anchors: dict[int, Node]) -> Heads | None:
    """The keys transposed for the scores: ``Transpose(0, 2, 3, 1)`` of the reshaped
    projection, or ``Transpose(0, 1, 3, 2)`` of (cached) heads."""
    transpose = producer(value, "Transpose")
    if transpose is None:
        return None
    if attr(transpose, "perm") == [0, 2, 3, 1]:
        return _reshaped(transpose.input_values[0])
    if attr(transpose, "perm") == [0, 1, 3, 2]:
        return _cached_heads(transpose.input_values[0], anchors)
    return None


def _merged_output(index: Index, pv: Node) -> Value | None:
    """The ``[B, S, heads * size]`` value the heads ``pv`` computes merge into: after
    ``Transpose(0, 2, 1, 3)`` (and Reshapes), the first Reshape of rank 3; or the
    transposed heads, when a Reshape with no copied axis (``[-1, D]``) reads them."""
    value, transposed = pv.output_values[0], False
    while (reader := single_reader(index, value)) is not None and not reader.domain \
            and reader.op_type in ("Reshape", "Transpose"):
        if reader.op_type == "Transpose":
            if transposed or attr(reader, "perm") != [0, 2, 1, 3]:
                return None
            transposed = True
        target = const(reader.input_values[1]) if reader.op_type == "Reshape" else None
        if transposed and reader.op_type == "Reshape":
            if rank(reader.output_values[0]) == 3 or (target is not None and target.size == 3):
                return reader.output_values[0]
            if target is not None and 0 not in target:  # [-1, D] for a Gemm: reads [B, S, D]
                return value
            return None
        value = reader.output_values[0]
    return None


def _attention_bias(graph: Graph, anchor: Node, mask: MaskBias, dtype: torch.dtype,
                    cache: dict[tuple[int, bool, float], Value], opset: int) -> Value | None:
    """The additive ``[B or 1, N or 1, S, T]`` bias of ``mask`` (made once per mask): a
    float mask as it is, a boolean one as ``Where(mask, 0, fill)``; a mask of rank 2 or 3
    unsqueezed to rank 4. None for a mask that broadcasts over the queries or keys."""
    source = mask.bias if mask.bias is not None else mask.condition
    shape = source.type().shape
    if shape is None or not 2 <= len(shape) <= 4 or 1 in shape[-2:] or source.dtype != (
            dtype if mask.bias is not None else torch.bool):
        return None
    key = (id(source), mask.keep, mask.fill)
    if key not in cache:
        nodes = []
        value = source
        if mask.bias is None:
            numpy_dtype = np.float16 if dtype == torch.float16 else np.float32
            fill = mask.fill if np.isfinite(mask.fill) else np.finfo(numpy_dtype).min
            zero = initializer(graph, "bias_zero", np.zeros((), numpy_dtype))
            filled = initializer(graph, "bias_fill", np.array(fill, numpy_dtype))
            nodes.append(graph.add_node("", "Where", [value, *(
                (zero, filled) if mask.keep else (filled, zero))]))
            value = nodes[-1].output_values[0]
        if len(shape) < 4:
            axes = list(range(4 - len(shape)))
            nodes.append(graph.add_node("", "Unsqueeze", [value], attrs={"axes": ("is", axes)})
                         if opset < 13 else graph.add_node("", "Unsqueeze", [
                             value, initializer(graph, "bias_axes", np.array(axes, np.int64))]))
            value = nodes[-1].output_values[0]
        if nodes:
            insert_before(graph, anchor, nodes)
        cache[key] = value
    return cache[key]
