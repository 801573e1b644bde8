"""Attention with a KV cache, as transformers' decoders compute it (projections reshaped
to heads, rotary embedding by ``rotate_half``, the past concatenated along the sequence,
KV heads repeated, ``softmax(q k^T * scale + mask) v``), as ONNX Runtime's
``com.microsoft::GroupQueryAttention`` with the rotary embedding inside.

Anchors: a graph input (the past keys) concatenated along axis 2 into a graph output (the
present keys), the same for values. From the scores ``MatMul`` reading them the pass walks
the chain to the ``Softmax``, the ``MatMul`` with the values and the ``Transpose`` /
``Reshape`` back to ``[batch, sequence, heads * head_size]``; on the query and key sides, the
rotary pattern and the head reshape of the projections. The rotary tables come from the
model's rotary embedding module (called once on every position, so scaled variants such as
Llama 3's are exact); a model without one, or with a length-dependent rotary (dynamic NTK,
LongRoPE), is left unfused.

GroupQueryAttention is causal and reads the valid lengths from ``attention_mask`` (its sum
per row): like the files ONNX Runtime GenAI's builder writes, the fused file is for masks
that mark a prefix of each row (no left padding); a file without fusion serves any mask.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from oxport.ir import Graph, Node, Type, Value
from oxport.plugins.targets.patterns import (
    Index,
    attr,
    const,
    initializer,
    insert_before,
    producer,
    replace_later_uses,
    replace_value,
    scalar,
    weight_data,
)
from oxport.serialize import streamed
from oxport.serialize.weights import LazyTensor

MSFT = "com.microsoft"
#: Rotary types whose tables do not depend on the sequence length.
_STATIC_ROPE = ("default", "linear", "llama3")


@dataclasses.dataclass
class Attention:
    """A matched attention: projections, caches, scale, and the values it replaces."""

    query: Value
    key: Value
    value: Value
    past_key: Value
    past_value: Value
    present_key: Node
    present_value: Node
    output: Value
    scale: float
    anchor: Node


def single_reader(index: Index, value: Value) -> Node | None:
    """The one node reading ``value`` besides ``Shape`` nodes (which read its shape only,
    for a Reshape's target)."""
    readers = [r for r in index.readers(value) if r is None or r.op_type != "Shape"]
    return readers[0] if len(readers) == 1 and readers[0] is not None else None


def walk_scalars(value: Value | None, ops: tuple[str, ...] = ("Mul", "Div")
                  ) -> tuple[Value | None, float]:
    """Up through multiplications and divisions by constant scalars: the value before
    them and the factor they apply."""
    factor = 1.0
    while (node := producer(value, *ops)) is not None:
        a, b = node.input_values
        if scalar(b) is not None:
            factor *= scalar(b) if node.op_type == "Mul" else 1.0 / scalar(b)
            value = a
        elif node.op_type == "Mul" and scalar(a) is not None:
            factor *= scalar(a)
            value = b
        else:
            break
    return value, factor


def _up_to(value: Value | None, anchors: dict[int, Node], through: tuple[str, ...]
           ) -> Node | None:
    """The anchor (a present's Concat) reached from ``value`` up through ``through`` ops
    (on their first input)."""
    while value is not None:
        if value.producer is not None and id(value.producer) in anchors:
            return value.producer
        node = producer(value, *through)
        value = node.input_values[0] if node is not None else None
    return None


def _heads_of(value: Value | None) -> Value | None:
    """The projection ``[B, S, heads * head_size]`` that ``value`` (``[B, heads, S,
    head_size]``) reshapes and transposes."""
    transpose = producer(value, "Transpose")
    if transpose is None or attr(transpose, "perm") != [0, 2, 1, 3]:
        return None
    reshape = producer(transpose.input_values[0], "Reshape")
    return reshape.input_values[0] if reshape is not None else None


def _rotated(value: Value | None) -> Value | None:
    """``x`` when ``value`` is ``x * cos + rotate_half(x) * sin``."""
    add = producer(value, "Add")
    if add is None:
        return None
    for plain, turned in (add.input_values, add.input_values[::-1]):
        mul_cos, mul_sin = producer(plain, "Mul"), producer(turned, "Mul")
        if mul_cos is None or mul_sin is None:
            continue
        for x in mul_cos.input_values:
            if any(_is_rotate_half(t, x) for t in mul_sin.input_values):
                return x
    return None


def _is_rotate_half(value: Value | None, x: Value | None) -> bool:
    concat = producer(value, "Concat")
    if concat is None or len(concat.input_values) != 2:
        return False
    neg = producer(concat.input_values[0], "Neg")
    first = producer(neg.input_values[0] if neg else None, "Slice")
    second = producer(concat.input_values[1], "Slice")
    return first is not None and second is not None and first.input_values[0] is x \
        and second.input_values[0] is x


def _output_of(index: Index, node: Node) -> Value | None:
    """The ``[B, S, heads * head_size]`` result of the heads ``node`` computes: after a
    chain of Reshape/Transpose with one ``Transpose(0, 2, 1, 3)``, ending in a Reshape."""
    value, transposes, last = node.output_values[0], 0, None
    while (reader := single_reader(index, value)) is not None and \
            reader.op_type in ("Reshape", "Transpose") and not reader.domain:
        if reader.op_type == "Transpose":
            if attr(reader, "perm") != [0, 2, 1, 3]:
                return None
            transposes += 1
        last, value = reader, reader.output_values[0]
    return value if transposes == 1 and last is not None and last.op_type == "Reshape" \
        else None


def cache_concats(graph: Graph, index: Index) -> dict[int, Node]:
    """The ``Concat``s of a past input with new keys or values along the sequence axis
    whose result is a graph output (a present), by id."""
    inputs = {id(v) for v in graph.inputs}
    return {id(n): n for n in graph.nodes
            if n.op_type == "Concat" and not n.domain and attr(n, "axis") in (2, -2)
            and len(n.input_values) == 2 and id(n.input_values[0]) in inputs
            and id(n.output_values[0]) in index.outputs}


def match_attentions(graph: Graph) -> list[Attention]:
    """Every attention over a KV cache the pass can fuse."""
    index = Index(graph)
    anchors = cache_concats(graph, index)
    found = []
    for node in graph.nodes:
        if node.op_type == "Softmax" and not node.domain and attr(node, "axis", -1) in (-1, 3):
            match = _match_from_softmax(node, index, anchors)
            if match is not None:
                found.append(match)
    return found


def _match_from_softmax(softmax: Node, index: Index, anchors: dict[int, Node]
                        ) -> Attention | None:
    weights = past_safe_softmax(index, softmax.output_values[0])
    pv = single_reader(index, weights)
    if pv is None or pv.op_type != "MatMul" or pv.input_values[0] is not weights:
        return None
    present_value = _up_to(pv.input_values[1], anchors, ("Reshape", "Expand", "Unsqueeze"))
    scores, scale = _scores(softmax.input_values[0])
    if present_value is None or scores is None:
        return None
    q_side, q_scale = walk_scalars(scores.input_values[0])
    k_side, k_scale = walk_scalars(scores.input_values[1])
    transpose = producer(k_side, "Transpose")
    if transpose is None or attr(transpose, "perm") != [0, 1, 3, 2]:
        return None
    present_key = _up_to(transpose.input_values[0], anchors, ("Reshape", "Expand", "Unsqueeze"))
    if present_key is None or present_key is present_value:
        return None
    query = _heads_of(_rotated(q_side))
    key = _heads_of(_rotated(present_key.input_values[1]))
    value = _heads_of(present_value.input_values[1])
    output = _output_of(index, pv)
    if None in (query, key, value, output):
        return None
    return Attention(query, key, value, present_key.input_values[0],
                     present_value.input_values[0], present_key, present_value, output,
                     scale * q_scale * k_scale, pv)


def past_safe_softmax(index: Index, weights: Value) -> Value:
    """The attention weights after the zeroing of rows the mask empties, when there is one
    (``Where(empty_row, 0, Softmax(...))``, as PyTorch's safe softmax): the fused kernels
    take the prefix masks the file layout gives, which never empty a row."""
    where = single_reader(index, weights)
    if where is not None and where.op_type == "Where" and not where.domain \
            and where.input_values[2] is weights and scalar(where.input_values[1]) == 0:
        return where.output_values[0]
    return weights


def _scores(value: Value | None) -> tuple[Node | None, float]:
    """The ``MatMul`` of the scores under the mask and the scalings, and their factor."""
    where = producer(value, "Where")
    if where is not None:  # Where(mask, scores, fill) or, from masked_fill, (mask, fill, scores)
        value = where.input_values[2] if scalar(where.input_values[1]) is not None \
            else where.input_values[1]
    elif (add := producer(value, "Add")) is not None:
        value = next((v for v in add.input_values if producer(v, "MatMul", "Mul", "Div")),
                     None)
    value, factor = walk_scalars(value)
    return producer(value, "MatMul"), factor


def rotary_tables(model: Any, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """The model's cos and sin tables ``[max_positions, head_size / 2]`` (None without
    a single static rotary embedding module)."""
    modules = [m for m in getattr(model, "modules", list)()
               if type(m).__name__.endswith("RotaryEmbedding") and hasattr(m, "inv_freq")]
    if not modules or getattr(modules[0], "rope_type", "default") not in _STATIC_ROPE:
        return None
    rotary = modules[0]
    config = getattr(model, "config", None)
    positions = int(getattr(config, "max_position_embeddings", 0) or 4096)
    with torch.no_grad():
        probe = torch.zeros(1, dtype=torch.float32)
        cos, sin = rotary(probe, torch.arange(positions)[None])
    half = cos.shape[-1] // 2
    if not torch.equal(cos[..., :half], cos[..., half:]):
        return None  # not the rotate_half layout
    return (cos[0, :, :half].to(dtype).numpy(), sin[0, :, :half].to(dtype).numpy())


def fuse_group_query_attention(graph: Graph, context: Any) -> int:
    """Every matched attention as ``GroupQueryAttention`` (ort, ONNX Runtime 1.18+)."""
    if context.target.name == "onnx" or not context.runtime_at_least("1.18"):
        return 0
    attentions = match_attentions(graph)
    if not attentions:
        return 0
    dtype = attentions[0].query.dtype or torch.float32
    if dtype not in (torch.float32, torch.float16):  # ONNX Runtime's kernel takes these
        return 0
    tables = rotary_tables(getattr(context, "model", None), dtype)
    if tables is None:
        return 0
    head_size = tables[0].shape[1] * 2
    if head_size % 16:  # ONNX Runtime's kernel takes multiples of 16 only
        return 0
    cos, sin = (initializer(graph, name, t) for name, t in zip(("cos_cache", "sin_cache"),
                                                               tables))
    lengths = _lengths(graph, attentions[0])
    for attention in attentions:
        _replace(graph, attention, head_size, lengths, cos, sin)
    graph.use_domain(MSFT, 1)
    return len(attentions)


def _projection_width(value: Value) -> int | None:
    matmul = producer(value, "MatMul")
    weight = weight_data(matmul.input_values[1]) if matmul is not None else None
    return int(weight.shape[-1]) if weight is not None and len(weight.shape) else None


def _packed_projection(graph: Graph, attention: Attention) -> Value | None:
    """One ``MatMul`` by the concatenated query, key and value weights, when the three
    projections are MatMuls of one input by constant weights (the packed QKV input of
    GroupQueryAttention); None otherwise."""
    matmuls = [producer(v, "MatMul") for v in (attention.query, attention.key,
                                               attention.value)]
    if None in matmuls or len({id(m.input_values[0]) for m in matmuls}) != 1:
        return None
    weights = [m.input_values[1] for m in matmuls]
    arrays = [weight_data(w) for w in weights]
    if any(a is None or len(a.shape) != 2 for a in arrays):
        return None
    tensor = streamed.concatenated([a if isinstance(a, LazyTensor) else w.const
                                    for a, w in zip(arrays, weights)], axis=1)
    if tensor is None:
        return None
    packed = graph.add_node("", "MatMul", [matmuls[0].input_values[0],
                                           initializer(graph, "qkv_weight", tensor)])
    insert_before(graph, matmuls[0], [packed])
    packed.output_values[0].setType(Type.tensor(attention.query.dtype))
    return packed.output_values[0]


def _lengths(graph: Graph, first: Attention) -> tuple[Value, Value]:
    """``seqlens_k`` (valid length - 1 per row, int32) and ``total_sequence_length``
    (int32 scalar), from ``attention_mask`` when the graph takes one, else from the past
    and the query lengths."""
    mask = next((v for v in graph.inputs if v.name == "attention_mask"), None)
    nodes = []

    def op(kind: str, inputs: list[Value], **attrs: Any) -> Value:
        node = graph.add_node("", kind, inputs, attrs={
            k: (("i", v) if isinstance(v, int) else ("is", v)) for k, v in attrs.items()})
        nodes.append(node)
        return node.output_values[0]

    one = initializer(graph, "one", np.array([1], np.int64))
    if mask is not None:
        total = op("Cast", [op("Gather", [op("Shape", [mask]), one], axis=0)], to=6)
        summed = op("ReduceSum", [mask, one], keepdims=0)
        seqlens = op("Cast", [op("Sub", [summed, one])], to=6)
    else:
        two = initializer(graph, "two", np.array([2], np.int64))
        zero = initializer(graph, "zero", np.array([0], np.int64))
        past = op("Gather", [op("Shape", [first.past_key]), two], axis=0)
        new = op("Gather", [op("Shape", [first.query]), one], axis=0)
        batch = op("Gather", [op("Shape", [first.query]), zero], axis=0)
        total64 = op("Add", [past, new])
        total = op("Cast", [total64], to=6)
        seqlens = op("Cast", [op("Expand", [op("Sub", [total64, one]), batch])], to=6)
    total = op("Squeeze", [total])
    for value, dtype in ((seqlens, torch.int32), (total, torch.int32)):
        value.setType(Type.tensor(dtype))
    insert_before(graph, first.output.producer, nodes)
    return seqlens, total


def _replace(graph: Graph, attention: Attention, head_size: int,
             lengths: tuple[Value, Value], cos: Value, sin: Value) -> None:
    heads = (_projection_width(attention.query) or 0) // head_size
    kv_heads = (_projection_width(attention.key) or 0) // head_size
    if not heads or not kv_heads:
        return
    scale = attention.scale if not math.isclose(attention.scale, head_size ** -0.5,
                                                rel_tol=1e-6) else 0.0
    packed = _packed_projection(graph, attention)
    qkv = [packed, None, None] if packed is not None else \
        [attention.query, attention.key, attention.value]
    fused = graph.add_node(MSFT, "GroupQueryAttention", [
        *qkv, attention.past_key, attention.past_value, *lengths, cos, sin], 3, attrs={
        "num_heads": ("i", heads), "kv_num_heads": ("i", kv_heads), "do_rotary": ("i", 1),
        "rotary_interleaved": ("i", 0), **({"scale": ("f", scale)} if scale else {})})
    anchor = attention.output.producer
    insert_before(graph, anchor, [fused])
    replace_value(graph, attention.output, fused.output_values[0])
    replace_later_uses(graph, fused, attention.present_key.output_values[0],
                       fused.output_values[1])
    replace_later_uses(graph, fused, attention.present_value.output_values[0],
                       fused.output_values[2])


def fuse_attention_with_cache(graph: Graph, context: Any) -> int:
    """onnx, opset 23+: an ``Attention`` of the repeated present keys and values becomes
    one that takes the new keys and values with the past ones (``past_key``,
    ``past_value``) and returns the presents, its KV heads not repeated."""
    if context.target.name != "onnx" or context.opset < 23:
        return 0
    index = Index(graph)
    anchors = cache_concats(graph, index)
    count = 0
    for node in list(graph.nodes):
        if (node.domain, node.op_type) != ("", "Attention") or len(node.input_values) > 4 \
                or len(node.output_values) != 1:
            continue
        through = ("Reshape", "Expand", "Unsqueeze")
        present_key = _up_to(node.input_values[1], anchors, through)
        present_value = _up_to(node.input_values[2], anchors, through)
        if present_key is None or present_value is None or present_key is present_value:
            continue
        mask = node.input_values[3] if len(node.input_values) > 3 else None
        fused = graph.add_node("", "Attention", [
            node.input_values[0], present_key.input_values[1], present_value.input_values[1],
            mask, present_key.input_values[0], present_value.input_values[0]], 3,
            attrs=dict(node.attrs))
        insert_before(graph, node, [fused])
        replace_value(graph, node.output_values[0], fused.output_values[0])
        replace_later_uses(graph, fused, present_key.output_values[0], fused.output_values[1])
        replace_later_uses(graph, fused, present_value.output_values[0],
                           fused.output_values[2])
        count += 1
    return count


def fuse_rotary_embedding(graph: Graph, context: Any) -> int:
    """onnx, opset 23+: ``x * cos + rotate_half(x) * sin`` of a ``[batch, heads, sequence,
    head_size]`` tensor, ``cos``/``sin`` ``[batch, sequence, head_size]`` unsqueezed on
    axis 1, becomes ``RotaryEmbedding`` (the tables' first halves)."""
    if context.target.name != "onnx" or context.opset < 23:
        return 0
    halves: dict[int, Value] = {}
    count = 0
    for node in list(graph.nodes):
        found = rotary_parts(node)
        if found is None:
            continue
        x, cos, sin = found
        tables = [_first_half(graph, node, t, halves) for t in (cos, sin)]
        fused = graph.add_node("", "RotaryEmbedding", [x, *tables],
                               attrs={"interleaved": ("i", 0)})
        insert_before(graph, node, [fused])
        replace_value(graph, node.output_values[0], fused.output_values[0])
        count += 1
    return count


def rotary_parts(add: Node) -> tuple[Value, Value, Value] | None:
    """``(x, cos, sin)`` (the tables before their Unsqueeze) of a rotary ``Add``."""
    if (add.domain, add.op_type) != ("", "Add"):
        return None
    x = _rotated(add.output_values[0])
    if x is None:
        return None
    tables = []
    for product in add.input_values:
        mul = producer(product, "Mul")
        table = next((v for v in mul.input_values if v is not x and producer(v, "Concat")
                      is None), None)
        unsqueeze = producer(table, "Unsqueeze")
        axes = const(unsqueeze.input_values[1]) if unsqueeze is not None and \
            len(unsqueeze.input_values) > 1 else None
        if axes is None or axes.reshape(-1).tolist() != [1]:
            return None
        tables.append((mul, unsqueeze.input_values[0]))
    cos = next(t for m, t in tables if x in m.input_values)
    sin = next(t for m, t in tables if x not in m.input_values)
    return x, cos, sin


def _first_half(graph: Graph, anchor: Node, table: Value, cache: dict[int, Value]) -> Value:
    """``table[..., :head_size / 2]``, made once per table."""
    if id(table) not in cache:
        half = graph.add_node("", "Split", [table], 2, attrs={"axis": ("i", -1),
                                                              "num_outputs": ("i", 2)})
        insert_before(graph, anchor, [half])
        cache[id(table)] = half.output_values[0]
    return cache[id(table)]
