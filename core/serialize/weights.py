"""Weights: tensor bytes, and how they are laid out in the model file or beside it.

A weight's bytes are never copied into a ``ModelProto`` on the way to a file: the model
is serialized without them, then each weight is appended as protobuf bytes written
straight from tensor memory (repeated embedded messages merge when parsed). With
external data, the weights go to one file beside the model (or a file each), aligned,
and small ones stay inline. Nothing here opens files: the writers take open handles.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from oxport.errors import OnnxExporterError
from oxport.types import JitScalarType, onnx_shape

if TYPE_CHECKING:
    from oxport.serialize.proto import Serialized

PROTOBUF_LIMIT = 2**31 - 1
#: Leave room for the graph itself below the protobuf limit.
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**26
EXTERNAL_ALIGNMENT = 64
#: With external data, weights smaller than this stay inline in the model file: ONNX
#: Runtime reads shape operands (a Reshape's target, Unsqueeze axes) only from inline
#: data, and a file or an aligned slot per tiny tensor buys nothing.
EXTERNAL_MIN_BYTES = 1024
#: Integer initializers up to this many elements keep their values in weightless copies:
#: they are shape operands (axes, sizes) that shape inference must read.
WEIGHTLESS_MAX_ELEMENTS = 64
#: ``progress(bytes_written, total_bytes)``, called by the writers after each weight.
Progress = Callable[[int, int], None]


class LazyTensor:
    """A weight computed only when its bytes are written, e.g. a convolution with a batch
    norm folded in. ``rows(start, stop, out)`` computes rows ``start:stop`` of its first
    dimension into ``out`` (contiguous, of those rows' shape and the weight's dtype), so
    the writer computes every chunk into one buffer of at most :attr:`chunk_bytes`
    (:data:`CHUNK_BYTES`)."""

    #: The largest chunk of rows the writer asks for at once (None: :data:`CHUNK_BYTES`).
    chunk_bytes: int | None = None

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

    def fold(self, op_type: str, fold: Callable[..., Any], consts: Sequence[Any],
             attrs: dict[str, Any], opset: int) -> Any:
        """Constant folding's result for op ``op_type`` of ``consts`` (this tensor among
        them), computed by ``fold(arrays, attrs, opset)``, without computing the weight;
        None (here: always) leaves the node in the graph."""
        return None

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


# -- one tensor -----------------------------------------------------------------------
def onnx_elem_type(dtype: torch.dtype) -> int:
    """The ONNX element type (``TensorProto.FLOAT``, ...) of a torch dtype."""
    return JitScalarType.from_dtype(dtype).onnx_type()


def tensor_header(name: str, tensor: Any) -> TensorProto:
    """A TensorProto with name, dims and type but no data."""
    proto = TensorProto()
    proto.name = name
    if isinstance(tensor, (torch.Tensor, LazyTensor)):
        proto.dims.extend(onnx_shape(tensor.dtype, list(tensor.shape)))
        proto.data_type = onnx_elem_type(tensor.dtype)
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


def weightless(model: onnx.ModelProto, weights: Sequence[Weight]) -> onnx.ModelProto:
    """A copy of ``model`` (which holds no weight bytes) with the weights as typed inputs
    (small integer initializers, the shape operands, keep their values)."""
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


# -- writing weights' bytes ------------------------------------------------------------
#: Computed weights (:class:`LazyTensor`) are written rows at a time, at most this many
#: bytes at once, each chunk computed into the same buffer: a new tensor per chunk, of
#: varying sizes, leaves the heap fragmented. Small chunks keep the peak low for a little
#: more compute per chunk.
CHUNK_BYTES = 1 << 18
#: Weights stored strided (a folded transpose is a view) are gathered rows at a time, at
#: most this many bytes at once, and each band a tile of :data:`GATHER_COLUMNS` columns at
#: a time, which keeps a transpose's reads and writes in cache.
GATHER_BYTES = 4 << 20
GATHER_COLUMNS = 512
#: A weight stored as the transpose of a contiguous matrix (a Linear's weight read by
#: MatMul) is gathered in bands of at most this many bytes, each transposed whole by
#: torch's blocked kernel (about three times the rate of tile by tile): the whole weight at
#: once when it fits, else each band's columns copied contiguous first.
TRANSPOSE_BYTES = 16 << 20


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


def _transposed(tensor: Any) -> bool:
    """Whether ``tensor`` is a gathered weight that is the transpose of a contiguous matrix."""
    return _gathered(tensor) and tensor.dim() == 2 and tensor.stride() == (1, tensor.shape[0])


def _transpose_band(tensor: Any) -> int:
    """The rows of each band a transposed weight is gathered in (all of them if it fits)."""
    row_bytes = tensor.shape[1] * tensor.element_size()
    return max(1, min(tensor.shape[0], TRANSPOSE_BYTES // row_bytes))


def _chunk_bytes(tensor: Any) -> int:
    """The largest chunk of ``tensor`` the writer puts in its scratch buffer (0: none)."""
    if _transposed(tensor):  # a band, and its columns when it is not the whole weight
        rows = _transpose_band(tensor)
        band = rows * tensor.shape[1] * tensor.element_size()
        return band if rows == tensor.shape[0] else 2 * band
    if isinstance(tensor, LazyTensor):
        limit = tensor.chunk_bytes or CHUNK_BYTES
    elif _gathered(tensor):
        limit = GATHER_BYTES
    else:
        return 0
    if not tensor.numel():
        return 0
    step = next(_row_chunks(tensor, limit))
    return (step[1] - step[0]) * (tensor.numel() // tensor.shape[0]) * tensor.element_size()


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread while the block runs: gathering and converting a band is bound
    by memory, not by the cores, and on a busy machine torch's threads waiting for each
    other made writing the weights four times slower."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class Writer:
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

    def _transpose(self, handle: IO[bytes], tensor: torch.Tensor) -> int:
        """Write ``tensor``, the transpose of a contiguous matrix, band by band; returns
        its bytes."""
        matrix = tensor.t()
        rows, step = tensor.shape[0], _transpose_band(tensor)
        for start in range(0, rows, step):
            stop = min(start + step, rows)
            band = self._buffer(tensor, stop - start)
            if step == rows:
                band.copy_(tensor)
            else:  # the band's columns of the matrix, contiguous: then a whole transpose
                size = band.numel() * band.element_size()
                columns = self._scratch[size:2 * size].view(tensor.dtype).view(
                    matrix.shape[0], stop - start)
                columns.copy_(matrix[:, start:stop])
                band.copy_(columns.t())
            handle.write(raw_bytes(band))
        return tensor.numel() * tensor.element_size()

    def weight(self, handle: IO[bytes], weight: Weight) -> int:
        """Write ``weight``'s bytes; returns how many (``weight.nbytes``)."""
        with one_thread():
            return self._weight(handle, weight)

    def _weight(self, handle: IO[bytes], weight: Weight) -> int:
        tensor = weight.tensor
        if isinstance(tensor, LazyTensor):
            written = 0
            for start, stop in _row_chunks(tensor, tensor.chunk_bytes or CHUNK_BYTES):
                out = self._buffer(tensor, stop - start)
                tensor.rows(start, stop, out)
                data = raw_bytes(out)
                handle.write(data)
                written += len(data)
        elif _transposed(tensor):
            written = self._transpose(handle, tensor.detach())
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


# -- the layouts -----------------------------------------------------------------------
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


class _Progress:
    """Counts the bytes written and reports them to ``progress`` (if any)."""

    def __init__(self, serialized: Serialized, progress: Progress | None) -> None:
        self.done, self.total, self.progress = 0, serialized.weight_bytes, progress

    def add(self, length: int) -> None:
        self.done += length
        if self.progress is not None:
            self.progress(self.done, self.total)


def stream(serialized: Serialized, handle: IO[bytes], progress: Progress | None = None) -> None:
    """Write the model, then each weight as a merged ``graph { initializer {...} }``."""
    handle.write(serialized.model.SerializeToString())
    counter = _Progress(serialized, progress)
    writer = Writer(serialized.weights)
    for weight in serialized.weights:
        length = weight.nbytes
        header = tensor_header(weight.name, weight.tensor).SerializeToString()
        tensor_len = len(header) + 1 + len(_varint(length)) + length
        graph_len = 1 + len(_varint(tensor_len)) + tensor_len
        handle.write(_MODEL_GRAPH_TAG + _varint(graph_len) + _GRAPH_INITIALIZER_TAG
                     + _varint(tensor_len) + header + _TENSOR_RAW_DATA_TAG
                     + _varint(length))
        counter.add(writer.weight(handle, weight))


def to_bytes(serialized: Serialized) -> bytes:
    """The model file's bytes, weights included."""
    buffer = io.BytesIO()
    stream(serialized, buffer)
    return buffer.getvalue()


def external(serialized: Serialized, data_file: IO[bytes], location: str,
             progress: Progress | None = None) -> onnx.ModelProto:
    """Write the weights to ``data_file`` (named ``location`` beside the model), each at
    an aligned offset; returns the model that points at them."""
    offset = 0

    def store(weight: Weight, writer: Writer) -> TensorProto:
        nonlocal offset
        pad = (-offset) % EXTERNAL_ALIGNMENT
        if pad:
            data_file.write(b"\0" * pad)
            offset += pad
        length = writer.weight(data_file, weight)
        header = _external_header(weight, location, offset, length)
        offset += length
        return header

    return _external_model(serialized, store, progress)


def external_files(serialized: Serialized, model_name: str,
                   open_file: Callable[[str], IO[bytes]],
                   progress: Progress | None = None) -> onnx.ModelProto:
    """Write each weight to a file of its own, ``<model_name>.<weight name>``, opened with
    ``open_file(file name)``; returns the model that points at them."""
    taken: set[str] = {"data"}  # <model_name>.data is the single-file form's name

    def store(weight: Weight, writer: Writer) -> TensorProto:
        base = re.sub(r"[^A-Za-z0-9._-]", "_", weight.name).lstrip(".") or "tensor"
        location, n = base, 1
        while location.lower() in taken:  # unique on case-insensitive file systems too
            location, n = f"{base}.{n}", n + 1
        taken.add(location.lower())
        location = f"{model_name}.{location}"
        with open_file(location) as handle:
            length = writer.weight(handle, weight)
        return _external_header(weight, location, 0, length)

    return _external_model(serialized, store, progress)


def _external_model(serialized: Serialized, store: Callable[[Weight, Writer], TensorProto],
                    progress: Progress | None) -> onnx.ModelProto:
    """The model with its weights of at least :data:`EXTERNAL_MIN_BYTES` written by
    ``store(weight, writer)``, which returns the initializer that points at them; smaller
    weights are inline."""
    model = onnx.ModelProto()
    model.CopyFrom(serialized.model)
    counter = _Progress(serialized, progress)
    writer = Writer(serialized.weights)
    for weight in serialized.weights:
        if weight.nbytes < EXTERNAL_MIN_BYTES:
            model.graph.initializer.append(tensor_proto(weight.name, weight.tensor))
        else:
            model.graph.initializer.append(store(weight, writer))
        counter.add(weight.nbytes)
    return model


def _external_header(weight: Weight, location: str, offset: int, length: int) -> TensorProto:
    """The initializer of a weight stored at ``offset`` in the external file ``location``."""
    header = tensor_header(weight.name, weight.tensor)
    header.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = header.external_data.add()
        entry.key, entry.value = key, value
    return header
