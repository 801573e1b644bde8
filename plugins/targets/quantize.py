"""Weight-only quantization of ``MatMul`` weights (``quantize="int4"|"int8"``), in blocks of
``quantize_block_size`` along the reduced axis, asymmetric (a scale and a zero point per
block, as ONNX Runtime's own quantizer makes them):

* ``ort``: ``com.microsoft::MatMulNBits`` (the weight packed as ONNX Runtime reads it);
* ``onnx``: a blocked ``DequantizeLinear`` (opset 21+) of a ``uint4``/``uint8`` constant
  feeding the ``MatMul``.

The language-model head (a ``MatMul`` whose result is a graph output) is quantized unless
``quantize_lm_head=False``; embeddings (a ``Gather`` of a weight) only with
``quantize_embeddings=True``, as a blocked ``DequantizeLinear`` feeding the ``Gather``.

A weight computed when written (a :class:`~oxport.serialize.weights.LazyTensor`, such as a
weight streamed from a checkpoint) is quantized the same way: for ``MatMulNBits`` its
packed codes, scales and zero points are computed a band of rows at a time as they are
written (:class:`BlockQuantized`), so the file holds the bytes the in-memory export writes.
The ``DequantizeLinear`` rewrite keeps its codes in ``Constant`` nodes, so there the weight
is computed whole when quantized (one weight at a time).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import torch

from oxport.errors import InvalidExportArgumentError
from oxport.ir import Graph, Node, Type
from oxport.passes import folding
from oxport.plugins.targets.patterns import (
    Index,
    as_array,
    initializer,
    insert_before,
    replace_value,
    weight_data,
)
from oxport.serialize.weights import LazyTensor

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


def _matmul_weight(node: Node, index: Index, lm_head: bool) -> np.ndarray | LazyTensor | None:
    """The constant 2-D float weight [K, N] of a ``MatMul``, in float32 (a weight computed
    when written as it is); None if it has none, or it is the head and ``lm_head`` is off."""
    if (node.domain, node.op_type) != ("", "MatMul"):
        return None
    weight = node.input_values[1]
    if weight is None or weight.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    data = _float32(weight)
    if data is None or len(data.shape) != 2:
        return None
    if not lm_head and any(id(o) in index.outputs for o in node.output_values):
        return None
    return data


def _float32(value: Any) -> np.ndarray | LazyTensor | None:
    """A constant's values in float32 (as numpy), or the weight computed when written."""
    data = weight_data(value)
    return data if data is None or isinstance(data, LazyTensor) else data.astype(np.float32)


def _whole(data: np.ndarray | LazyTensor) -> np.ndarray:
    """``data``'s values in float32, a weight computed when written computed now (as
    :func:`~oxport.plugins.targets.patterns.const` reads a tensor)."""
    if not isinstance(data, LazyTensor):
        return data
    return as_array(data.compute()).astype(np.float32)


def _embedding(node: Node) -> np.ndarray | LazyTensor | None:
    if (node.domain, node.op_type) != ("", "Gather") or node.attrs.get("axis", ("i", 0))[1]:
        return None
    data = _float32(node.input_values[0])
    return data if data is not None and len(data.shape) == 2 else None


def _float_like(value: Any, data: np.ndarray) -> torch.Tensor:
    """``data`` as a tensor of ``value``'s float dtype."""
    return torch.from_numpy(np.ascontiguousarray(data)).to(value.dtype or torch.float32)


def _to_matmul_nbits(graph: Graph, node: Node, weight: np.ndarray | LazyTensor, bits: int,
                     block: int) -> None:
    """``MatMul(a, W)`` -> ``MatMulNBits(a, B, scales, zero_points)``."""
    k, n = weight.shape
    a = node.input_values[0]
    if isinstance(weight, LazyTensor):
        quantized = BlockQuantized(weight, bits, block, a.dtype or torch.float32)
        packed, scales, zeros = quantized.codes, quantized.scales, quantized.zero_points
    else:
        codes, scale, zero = quantize_blocks(weight.T, bits, block)
        packed = pack_nibbles(codes) if bits == 4 else codes
        zeros = pack_nibbles(zero).reshape(-1) if bits == 4 else zero.reshape(-1)
        scales = _float_like(a, scale.reshape(-1))
    inputs = [a, initializer(graph, "nbits_weight", packed),
              initializer(graph, "nbits_scales", scales),
              initializer(graph, "nbits_zero_points", zeros)]
    fused = graph.add_node(MSFT, "MatMulNBits", inputs, attrs={
        "K": ("i", k), "N": ("i", n), "bits": ("i", bits), "block_size": ("i", block),
        "accuracy_level": ("i", 4 if bits == 4 else 0)})
    graph.use_domain(MSFT, 1)
    insert_before(graph, node, [fused])
    replace_value(graph, node.output_values[0], fused.output_values[0])


class BlockQuantized:
    """``MatMulNBits``' three inputs for a weight [K, N] computed when written, each a
    :class:`LazyTensor` computed a band of rows of the weight's transpose at a time, by
    :func:`quantize_blocks` as the in-memory rewrite computes them (so the same bytes). The
    scales and zero points the codes' bands make are kept (a 25th of a float32 weight in
    blocks of 32) until both are written; written without them, each band is quantized
    again."""

    def __init__(self, weight: LazyTensor, bits: int, block: int, scale_dtype: torch.dtype
                 ) -> None:
        k, n = weight.shape
        self.weight, self.bits, self.block = weight, bits, block
        self.blocks = -(-k // block)
        self.rows_of_transpose = weight.fold("Transpose", _transpose, [weight],
                                             {"perm": [1, 0]}, 0)
        blob = block // 2 if bits == 4 else block
        zero_width = -(-self.blocks // 2) if bits == 4 else self.blocks
        self.codes = LazyTensor((n, self.blocks, blob), torch.uint8, self._codes)
        source = self.rows_of_transpose
        if source is not None and source.chunk_bytes:  # the source's bands, quantized
            row_bytes = source.numel() // max(n, 1) * source.element_size()
            self.codes.chunk_bytes = max(source.chunk_bytes // max(row_bytes, 1), 1) \
                * self.blocks * blob
        self.scales = LazyTensor((n * self.blocks,), scale_dtype, self._scales)
        self.zero_points = LazyTensor((n * zero_width,), torch.uint8, self._zero_points)
        self._kept: tuple[np.ndarray, np.ndarray] | None = None
        self._kept_rows = 0
        self._pending = {"scales", "zero_points"}
        self._computed: np.ndarray | None = None  # without a recorded transpose

    def _band(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of the weight's transpose, in float32."""
        source = self.rows_of_transpose
        if source is None:  # no recorded transpose: the weight computed whole, kept
            if self._computed is None:  # until its three inputs are written
                self._computed = np.ascontiguousarray(_whole(self.weight).T)
            return self._computed[start:stop]
        out = torch.empty((stop - start, source.shape[1]), dtype=source.dtype)
        source.rows(start, stop, out)
        return as_array(out).astype(np.float32)

    def _quantized(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return quantize_blocks(self._band(start, stop), self.bits, self.block)

    def _codes(self, start: int, stop: int, out: torch.Tensor) -> None:
        codes, scale, zero = self._quantized(start, stop)
        out.copy_(torch.from_numpy(pack_nibbles(codes) if self.bits == 4 else codes))
        if start == 0:
            n = self.codes.shape[0]
            self._kept = (np.empty((n, self.blocks), np.float32),
                          np.empty((n, self.blocks), np.uint8))
            self._kept_rows, self._pending = 0, {"scales", "zero_points"}
        if self._kept is not None and start == self._kept_rows:
            self._kept[0][start:stop], self._kept[1][start:stop] = scale, zero
            self._kept_rows = stop

    def _per_row(self, start: int, stop: int, width: int, which: int) -> np.ndarray:
        """Rows of the scales (``which`` 0) or zero points (1) covering flat elements
        ``start:stop`` of ``width`` per row, from the first of those rows."""
        first, last = start // width, -(-stop // width)
        if self._kept is not None and last <= self._kept_rows:
            return self._kept[which][first:last]
        return self._quantized(first, last)[1 + which]

    def _written(self, which: str, stop: int, total: int) -> None:
        if stop >= total:
            self._pending.discard(which)
            if not self._pending:
                self._kept, self._kept_rows, self._computed = None, 0, None

    def _scales(self, start: int, stop: int, out: torch.Tensor) -> None:
        rows = self._per_row(start, stop, self.blocks, 0)
        offset = start // self.blocks * self.blocks
        flat = np.ascontiguousarray(rows).reshape(-1)[start - offset:stop - offset]
        out.copy_(torch.from_numpy(np.ascontiguousarray(flat)).to(out.dtype))
        self._written("scales", stop, self.scales.shape[0])

    def _zero_points(self, start: int, stop: int, out: torch.Tensor) -> None:
        width = self.zero_points.shape[0] // self.codes.shape[0]
        zero = self._per_row(start, stop, width, 1)
        packed = pack_nibbles(zero) if self.bits == 4 else zero
        offset = start // width * width
        flat = np.ascontiguousarray(packed).reshape(-1)[start - offset:stop - offset]
        out.copy_(torch.from_numpy(np.ascontiguousarray(flat)))
        self._written("zero_points", stop, self.zero_points.shape[0])


def _transpose(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    return np.transpose(arrays[0], attrs["perm"])


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


def _to_dequantized_matmul(graph: Graph, node: Node, weight: np.ndarray | LazyTensor,
                           bits: int, block: int) -> None:
    """``MatMul(a, W)`` -> ``MatMul(a, DequantizeLinear(Wq, scales, zero_points))``."""
    dequantize = _dequantize(graph, node, _whole(weight), 0, bits, block,
                             node.input_values[0])
    node.input_values[1] = dequantize.output_values[0]


def _dequantize_embedding(graph: Graph, node: Node, bits: int, block: int) -> None:
    """``Gather(E, ids)`` -> ``Gather(DequantizeLinear(Eq, ...), ids)``, in blocks along
    the hidden axis."""
    table = node.input_values[0]
    dequantize = _dequantize(graph, node, _whole(_float32(table)), 1, bits, block, table)
    node.input_values[0] = dequantize.output_values[0]
