"""Weight-only quantization of ``MatMul`` weights (``quantize="int4"|"int8"``), in blocks of
``quantize_block_size`` along the reduced axis, asymmetric (a scale and a zero point per
block, as ONNX Runtime's own quantizer makes them):

* ``ort``: ``com.microsoft::MatMulNBits`` (the weight packed as ONNX Runtime reads it);
* ``onnx``: a blocked ``DequantizeLinear`` (opset 21+) of a ``uint4``/``uint8`` constant
  feeding the ``MatMul``.

The language-model head (a ``MatMul`` whose result is a graph output) is quantized unless
``quantize_lm_head=False``; embeddings (a ``Gather`` of a weight) only with
``quantize_embeddings=True``, as a blocked ``DequantizeLinear`` feeding the ``Gather``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import torch

from oxport.errors import InvalidExportArgumentError
from oxport.ir import Graph, Node, Type
from oxport.passes import folding
from oxport.plugins.targets.patterns import Index, const, initializer, insert_before, replace_value

MSFT = "com.microsoft"
_BITS = {"int4": 4, "int8": 8}


def quantize_blocks(weight: np.ndarray, bits: int, block: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``weight`` [N, K] in blocks of ``block`` along K (padded with zeros): the unsigned
    codes [N, blocks, block], scales [N, blocks] and zero points [N, blocks]."""
    n, k = weight.shape
    blocks = -(-k // block)
    padded = np.zeros((n, blocks * block), np.float32)
    padded[:, :k] = weight
    grouped = padded.reshape(n, blocks, block)
    top = (1 << bits) - 1
    low = np.minimum(grouped.min(axis=2), 0.0)
    high = np.maximum(grouped.max(axis=2), 0.0)
    scale = (high - low) / top
    scale[scale == 0] = 1.0
    zero = np.clip(np.round(-low / scale), 0, top)
    codes = np.clip(np.round(grouped / scale[..., None]) + zero[..., None], 0, top)
    return codes.astype(np.uint8), scale.astype(np.float32), zero.astype(np.uint8)


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """Pairs of 4-bit codes along the last axis in one byte each, the first in the low
    nibble (an odd count padded with a zero)."""
    if codes.shape[-1] % 2:
        codes = np.concatenate([codes, np.zeros((*codes.shape[:-1], 1), np.uint8)], axis=-1)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def quantize_weights(graph: Graph, context: Any) -> int:
    """The ``quantize`` pass both built-in targets run: which rewrite depends on the
    target (``MatMulNBits`` for ``ort``, ``DequantizeLinear`` for ``onnx``)."""
    if context.quantize is None:
        return 0
    bits, block = _BITS[context.quantize], context.request.block_size
    use_nbits = context.target.name != "onnx" and context.runtime_at_least("1.17")
    if not use_nbits and context.opset < 21:
        raise InvalidExportArgumentError(
            f"quantize={context.quantize!r} for target {context.request.label!r} writes a "
            f"blocked DequantizeLinear, which needs opset 21 (the export is at "
            f"{context.opset}): export with opset_version=21 or higher, or target 'ort' "
            "(MatMulNBits).")
    folding.eliminate_dead_code(graph)  # what fusions left behind: not worth quantizing
    index = Index(graph)
    count = 0
    for node in list(graph.nodes):
        weight = _matmul_weight(node, index, context.request.quantize_lm_head)
        if weight is not None:
            rewrite = _to_matmul_nbits if use_nbits else _to_dequantized_matmul
            rewrite(graph, node, weight, bits, block)
            count += 1
        elif context.request.quantize_embeddings and _embedding(node) is not None:
            if context.opset < 21:
                raise InvalidExportArgumentError(
                    "quantize_embeddings writes a blocked DequantizeLinear, which needs "
                    "opset 21: export with opset_version=21 or higher.")
            _dequantize_embedding(graph, node, bits, block)
            count += 1
    return count


def _matmul_weight(node: Node, index: Index, lm_head: bool) -> np.ndarray | None:
    """The constant 2-D float weight [K, N] of a ``MatMul`` (None if it has none, or it is
    the head and ``lm_head`` is off)."""
    if (node.domain, node.op_type) != ("", "MatMul"):
        return None
    weight = node.input_values[1]
    if weight is None or weight.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    data = const(weight)
    if data is None or data.ndim != 2:
        return None
    if not lm_head and any(id(o) in index.outputs for o in node.output_values):
        return None
    return data.astype(np.float32)


def _embedding(node: Node) -> np.ndarray | None:
    if (node.domain, node.op_type) != ("", "Gather") or node.attrs.get("axis", ("i", 0))[1]:
        return None
    data = const(node.input_values[0])
    return data.astype(np.float32) if data is not None and data.ndim == 2 else None


def _float_like(value: Any, data: np.ndarray) -> torch.Tensor:
    """``data`` as a tensor of ``value``'s float dtype."""
    return torch.from_numpy(np.ascontiguousarray(data)).to(value.dtype or torch.float32)


def _to_matmul_nbits(graph: Graph, node: Node, weight: np.ndarray, bits: int,
                     block: int) -> None:
    """``MatMul(a, W)`` -> ``MatMulNBits(a, B, scales, zero_points)``."""
    k, n = weight.shape
    codes, scale, zero = quantize_blocks(weight.T, bits, block)
    packed = pack_nibbles(codes) if bits == 4 else codes
    zeros = pack_nibbles(zero).reshape(-1) if bits == 4 else zero.reshape(-1)
    a = node.input_values[0]
    inputs = [a, initializer(graph, "nbits_weight", packed),
              initializer(graph, "nbits_scales", _float_like(a, scale.reshape(-1))),
              initializer(graph, "nbits_zero_points", zeros)]
    fused = graph.add_node(MSFT, "MatMulNBits", inputs, attrs={
        "K": ("i", k), "N": ("i", n), "bits": ("i", bits), "block_size": ("i", block),
        "accuracy_level": ("i", 4 if bits == 4 else 0)})
    graph.use_domain(MSFT, 1)
    insert_before(graph, node, [fused])
    replace_value(graph, node.output_values[0], fused.output_values[0])


def _blocked_constant(graph: Graph, codes: np.ndarray, bits: int) -> Node:
    """A ``Constant`` holding ``codes`` as ``uint4`` (packed) or ``uint8``."""
    kind = onnx.TensorProto.UINT4 if bits == 4 else onnx.TensorProto.UINT8
    raw = pack_nibbles(codes.reshape(-1)).tobytes() if bits == 4 else codes.tobytes()
    tensor = onnx.helper.make_tensor("", kind, list(codes.shape), raw, raw=True)
    node = graph.add_node("", "Constant", [], attrs={"value": ("t", tensor)})
    node.output_values[0].setType(Type.tensor(torch.uint8, list(codes.shape)))
    return node


def _dequantize(graph: Graph, anchor: Node, data: np.ndarray, axis: int, bits: int,
                block: int, like: Any) -> Node:
    """Nodes before ``anchor`` making the 2-D ``data`` from blocks along ``axis``."""
    rows = data.T if axis == 0 else data
    codes, scale, zero = quantize_blocks(rows, bits, block)
    codes = codes.reshape(codes.shape[0], -1)[:, :rows.shape[1]]
    if axis == 0:
        codes, scale, zero = codes.T, scale.T, zero.T
    value = _blocked_constant(graph, np.ascontiguousarray(codes), bits)
    zeros = _blocked_constant(graph, np.ascontiguousarray(zero), bits)
    dequantize = graph.add_node("", "DequantizeLinear", [
        value.output_values[0],
        initializer(graph, "dq_scales", _float_like(like, np.ascontiguousarray(scale))),
        zeros.output_values[0]], attrs={"axis": ("i", axis), "block_size": ("i", block)})
    dequantize.output_values[0].setType(Type.tensor(like.dtype or torch.float32,
                                                    list(data.shape)))
    insert_before(graph, anchor, [value, zeros, dequantize])
    return dequantize


def _to_dequantized_matmul(graph: Graph, node: Node, weight: np.ndarray, bits: int,
                           block: int) -> None:
    """``MatMul(a, W)`` -> ``MatMul(a, DequantizeLinear(Wq, scales, zero_points))``."""
    dequantize = _dequantize(graph, node, weight, 0, bits, block, node.input_values[0])
    node.input_values[1] = dequantize.output_values[0]


def _dequantize_embedding(graph: Graph, node: Node, bits: int, block: int) -> None:
    """``Gather(E, ids)`` -> ``Gather(DequantizeLinear(Eq, ...), ids)``, in blocks along
    the hidden axis."""
    table = node.input_values[0]
    dequantize = _dequantize(graph, node, const(table).astype(np.float32), 1, bits, block,
                             table)
    node.input_values[0] = dequantize.output_values[0]
