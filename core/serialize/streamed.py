"""Weights streamed from a checkpoint into the file, never held whole.

A model built on the meta device (shapes without values) is captured on fake tensors; its
weights are then :class:`StreamedTensor` s, each naming where its bytes are (a tensor of a
safetensors file, memory-mapped when written, or a user's loader) and the steps the export
applies to it: the dtype of the model's parameter (a bf16 checkpoint into an fp32 model),
then the constant folds of the export (a Linear weight's Transpose, a Cast). Folding records
each step on the weight (:meth:`StreamedTensor.fold`, with the fold's own function) instead of
computing it; the writer computes the result rows at a time when it writes the file
(:class:`~oxport.serialize.weights.LazyTensor`), so the file holds the bytes the in-memory
export of the same weights writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import mmap
import os
import struct
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from oxport.advice import listed
from oxport.errors import InvalidExportArgumentError, OnnxExporterError
from oxport.serialize.weights import GATHER_BYTES, LazyTensor

#: safetensors' dtype names.
SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}
INDEX_FILE = "model.safetensors.index.json"
#: Weights of at most this many elements are loaded when bound (the folds that read values,
#: such as a Mul by a one-element weight equal to 1, then see them as the in-memory export
#: does; ``onnx.reference`` folds only inputs this small).
EAGER_MAX_ELEMENTS = 1 << 12
#: ... and vectors of at most this many (a norm's weight, a bias: one value per channel,
#: a few MB in all for a 70B model), which the targets' fusions read as in memory.
EAGER_MAX_VECTOR = 1 << 20
#: A transposed weight is gathered a tile of this many columns at a time: each column of
#: the tile reads another row of the source, and more rows than the TLB maps (each a page
#: or more of the mapped file) make the gather ten times slower.
TILE_COLUMNS = 64
#: ... and in bands of at least this many rows (up to :data:`MAX_BAND_BYTES`): a band
#: reads this many columns of each row of the source, whole cache lines of it.
MIN_BAND_ROWS = 128
MAX_BAND_BYTES = 64 << 20
#: When a weight is mapped, this many bytes of the file after it are read ahead (the
#: kernel reads them while this weight is converted and written).
READ_AHEAD_BYTES = 256 << 20
#: Folds that only rearrange their input (the result is a view): recorded, applied to the
#: mapped tensor as views, and the rows gathered from it when written.
VIEW_FOLDS = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Slice"})
#: Folds computed element by element: a Cast is applied to each written chunk; the binary
#: ops (with a constant operand) to the whole weight when written. Any other fold (a Gather
#: of rows at constant indices, a Concat with a constant) is applied to the whole weight.
ELEMENTWISE_FOLDS = frozenset({"Cast", "Add", "Sub", "Mul", "Div"})


# -- where a tensor's bytes are -------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class StoredTensor:
    """A tensor of a safetensors file: its bytes at ``offset`` (``nbytes`` long)."""

    path: str
    offset: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @contextlib.contextmanager
    def opened(self) -> Iterator[torch.Tensor]:
        """The tensor, memory-mapped from the file (read-only) while the block runs."""
        if not self.nbytes:
            yield torch.empty(self.shape, dtype=self.dtype)
            return
        start = self.offset - self.offset % mmap.ALLOCATIONGRANULARITY
        with open(self.path, "rb") as handle:
            mapped = _map_read_only(handle.fileno(), self.offset + self.nbytes - start, start)
            with contextlib.suppress(AttributeError, OSError):  # the next weights, read
                os.posix_fadvise(handle.fileno(), self.offset + self.nbytes,  # while this
                                 READ_AHEAD_BYTES, os.POSIX_FADV_WILLNEED)  # one is written
        flat = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # read-only: never written
                flat = torch.frombuffer(mapped, dtype=torch.uint8, count=self.nbytes,
                                        offset=self.offset - start)
            yield flat.view(self.dtype).view(self.shape)
        finally:
            flat = None  # the buffer's last user here, before the unmapping
            with contextlib.suppress(BufferError):  # a view still held: unmapped when freed
                mapped.close()


def _map_read_only(fileno: int, length: int, offset: int) -> mmap.mmap:
    """``length`` bytes of a file from ``offset``, mapped read-only with their pages
    mapped at once where the system can (``MAP_POPULATE``: one call, where touching each
    page of a mapping faults it in on its own, which costs more than the conversion)."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate:
        return mmap.mmap(fileno, length, flags=mmap.MAP_SHARED | populate,
                         prot=mmap.PROT_READ, offset=offset)
    mapped = mmap.mmap(fileno, length, offset=offset, access=mmap.ACCESS_READ)
    with contextlib.suppress(AttributeError, OSError):
        mapped.madvise(mmap.MADV_WILLNEED)  # read ahead: the writer reads all of it
    return mapped


def read_header(path: str) -> dict[str, StoredTensor]:
    """The tensors of one safetensors file, by name (only its header is read)."""
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise InvalidExportArgumentError(f"{path} is not a safetensors file (too short).")
        (length,) = struct.unpack("<Q", raw)
        try:
            header = json.loads(handle.read(length))
        except ValueError as exc:
            raise InvalidExportArgumentError(
                f"{path} is not a safetensors file (its header is not JSON).") from exc
    found = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise InvalidExportArgumentError(
                f"{path}: tensor {name!r} has dtype {entry.get('dtype')!r}, which oxport does "
                f"not read (it reads {', '.join(SAFETENSORS_DTYPES)}).")
        begin, end = entry["data_offsets"]
        found[name] = StoredTensor(path, 8 + length + begin, end - begin, dtype,
                                   tuple(entry["shape"]))
    return found


def checkpoint(path: str | os.PathLike[str]) -> dict[str, StoredTensor]:
    """The tensors of a safetensors checkpoint by name: a folder (sharded with
    ``model.safetensors.index.json``, else every ``*.safetensors`` file in it) or one file."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return read_header(path)
    if not os.path.isdir(path):
        raise InvalidExportArgumentError(
            f"weights={path!r}: no such folder or file. Pass the folder that holds the "
            "checkpoint's *.safetensors files (or one such file).")
    index = os.path.join(path, INDEX_FILE)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as handle:
            shards = sorted(set(json.load(handle)["weight_map"].values()))
    else:
        shards = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not shards:
        raise InvalidExportArgumentError(
            f"weights={path!r} holds no *.safetensors file: save the model with "
            "save_pretrained(..., safe_serialization=True) or pass a state-dict loader.")
    found: dict[str, StoredTensor] = {}
    for shard in shards:
        found.update(read_header(os.path.join(path, shard)))
    return found


@dataclasses.dataclass(frozen=True)
class LoadedTensor:
    """A tensor a user's loader gives (a tensor, or a function returning one when the
    weight is written)."""

    load: Callable[[], torch.Tensor]
    dtype: torch.dtype | None = None
    shape: tuple[int, ...] | None = None

    @contextlib.contextmanager
    def opened(self) -> Iterator[torch.Tensor]:
        tensor = self.load()
        if not isinstance(tensor, torch.Tensor):
            raise OnnxExporterError(
                f"The weights loader returned a {type(tensor).__name__}, not a tensor.")
        yield tensor.detach().to("cpu")


Source = StoredTensor | LoadedTensor
#: What ``weights=`` accepts: a safetensors folder or file, or a mapping from parameter
#: names to tensors or to functions returning them.
Weights = str | os.PathLike[str] | Mapping[str, Any]


def sources(weights: Weights) -> Mapping[str, Source]:
    """``weights=`` as each tensor's source, by name."""
    if isinstance(weights, (str, os.PathLike)):
        return checkpoint(weights)
    if isinstance(weights, Mapping):
        return {name: _loaded(name, value) for name, value in weights.items()}
    raise InvalidExportArgumentError(
        f"weights= must be a safetensors folder or file, or a mapping from parameter names "
        f"to tensors (or functions returning them), not {type(weights).__name__}.")


def _loaded(name: str, value: Any) -> LoadedTensor:
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            raise InvalidExportArgumentError(
                f"weights[{name!r}] is on the meta device: the loader must give values.")
        return LoadedTensor(lambda: value, value.dtype, tuple(value.shape))
    if callable(value):
        return LoadedTensor(value)
    raise InvalidExportArgumentError(
        f"weights[{name!r}] is a {type(value).__name__}: give a tensor or a function "
        "returning one.")


# -- a weight and the steps the export applies to it ------------------------------------
@dataclasses.dataclass(frozen=True)
class Step:
    """One constant fold recorded on a weight: ``fold(arrays, attrs, opset)`` is the
    fold's function, called with the weight's array at ``position`` of ``arrays``."""

    op_type: str
    fold: Callable[[list[Any], dict[str, Any], int], Any]
    arrays: tuple[Any, ...]
    position: int
    attrs: dict[str, Any]
    opset: int

    def apply(self, array: np.ndarray) -> np.ndarray:
        arrays = list(self.arrays)
        arrays[self.position] = array
        return np.asarray(self.fold(arrays, self.attrs, self.opset))


class StreamedTensor(LazyTensor):
    """A weight whose bytes stay in their source until written: ``source`` in its stored
    dtype, converted to ``load_dtype`` (the model parameter's), then ``steps``. Written in
    bands of at least :data:`GATHER_BYTES` and :data:`MIN_BAND_ROWS` rows (a transposed
    band then reads whole cache lines of the source)."""

    def __init__(self, name: str, source: Source, load_dtype: torch.dtype,
                 load_shape: Sequence[int], steps: Sequence[Step] = (),
                 shape: Sequence[int] | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(load_shape if shape is None else shape,
                         load_dtype if dtype is None else dtype, self._rows)
        self.name, self.source = name, source
        self.load_dtype, self.load_shape = load_dtype, torch.Size(load_shape)
        self.steps = tuple(steps)
        row_bytes = self.numel() // max(self.shape[0], 1) * self.element_size()
        self.chunk_bytes = max(GATHER_BYTES, min(MIN_BAND_ROWS * row_bytes, MAX_BAND_BYTES))
        self._open: contextlib.ExitStack | None = None
        self._view: Any = None

    def __repr__(self) -> str:
        steps = "".join(f".{s.op_type}" for s in self.steps)
        return f"StreamedTensor({self.name!r}{steps}, {list(self.shape)}, {self.dtype})"

    # -- folding ------------------------------------------------------------------
    def fold(self, op_type: str, fold: Callable[..., Any], consts: Sequence[Any],
             attrs: dict[str, Any], opset: int) -> Any:
        """The result of constant fold ``fold`` (op ``op_type``) of ``consts`` (this weight
        among them; the others arrays) without computing it: a new weight with the step
        recorded, or the small array of a Shape; None where the step cannot be recorded
        (the node stays in the graph)."""
        position = next(i for i, c in enumerate(consts) if c is self)
        if any(isinstance(c, LazyTensor) for i, c in enumerate(consts) if i != position):
            return None  # two weights (their bytes meet only when written): not recorded
        np_dtype = _numpy_dtype(self.dtype)
        if np_dtype is None:
            return None
        arrays = [None if c is None else np.asarray(c) for c in consts]
        if op_type in ELEMENTWISE_FOLDS:  # one element: the result's dtype, no full copy
            arrays[position] = np.ones((1,) * len(self.shape), np_dtype)
        else:  # the weight's shape in no memory (folding bounds a copying result's size)
            arrays[position] = np.lib.stride_tricks.as_strided(
                np.zeros(1, np_dtype), tuple(self.shape), (0,) * len(self.shape))
        try:
            probe = np.asarray(fold(arrays, attrs, opset))
        except Exception:  # noqa: BLE001 - the fold refuses these inputs: the node stays
            return None
        if op_type == "Shape":
            return probe
        shape = probe.shape if op_type not in ELEMENTWISE_FOLDS else np.broadcast_shapes(
            *(tuple(self.shape) if i == position else np.shape(a)
              for i, a in enumerate(arrays) if a is not None))
        dtype = torch.from_numpy(np.empty(0, probe.dtype)).dtype
        if not shape:
            return None  # a 0-d result: LazyTensor writes rows of a first dimension
        step = Step(op_type, fold, tuple(None if i == position else a
                                         for i, a in enumerate(arrays)),
                    position, dict(attrs), opset)
        return StreamedTensor(self.name, self.source, self.load_dtype, self.load_shape,
                              (*self.steps, step), shape, dtype)

    def scaled(self, factor: np.ndarray, axis: int) -> StreamedTensor | None:
        """This weight times ``factor`` (float32, one per channel) along dimension
        ``axis``: a batch norm folded into the convolution before it, computed when written
        as the in-memory fold computes it (in float32, rounded to the weight's dtype), band
        by band. None after other steps on a dtype numpy lacks (the batch norm stays)."""
        if self.steps and _numpy_dtype(self.dtype) is None:
            return None
        shape = [1] * len(self.shape)
        shape[axis] = -1
        step = Step("BatchNormalization", _scale, (None, factor.reshape(shape)), 0,
                    {"axis": axis}, 0)
        return StreamedTensor(self.name, self.source, self.load_dtype, self.load_shape,
                              (*self.steps, step), self.shape, self.dtype)

    # -- writing ------------------------------------------------------------------
    def _rows(self, start: int, stop: int, out: torch.Tensor) -> None:
        """Rows ``start:stop`` into ``out``; the source is opened at the first rows and
        closed after the last."""
        if self._open is None:
            self._open = contextlib.ExitStack()
            try:
                self._view = self._prepare(self._open.enter_context(self.source.opened()))
            except BaseException:
                self._release()
                raise
        try:
            self._view(start, stop, out)
        except BaseException:
            self._release()  # the file is not written: a later write starts again
            raise
        if stop >= self.shape[0]:
            self._release()

    def _release(self) -> None:
        self._view = None
        if self._open is not None:
            opened, self._open = self._open, None
            opened.close()

    def _prepare(self, stored: torch.Tensor) -> Callable[[int, int, torch.Tensor], None]:
        """A function writing rows of the result, from ``stored`` (the source's tensor)."""
        if tuple(stored.shape) != tuple(self.load_shape):
            raise OnnxExporterError(
                f"Weight {self.name!r} is {list(stored.shape)} in the checkpoint but "
                f"{list(self.load_shape)} in the model: the checkpoint does not fit the model "
                "(check its config).")
        if all(s.op_type in VIEW_FOLDS or s.op_type == "Cast" for s in self.steps):
            return self._chunked(stored)
        if len(self.steps) == 1 and self.steps[0].op_type == "BatchNormalization":
            return _scaled_rows(stored.to(self.load_dtype), self.steps[0])
        whole = stored.to(self.load_dtype).numpy()
        for step in self.steps:
            whole = step.apply(whole)

        def rows(start: int, stop: int, out: torch.Tensor) -> None:
            out.copy_(torch.from_numpy(np.ascontiguousarray(whole[start:stop])))
        return rows

    def _chunked(self, stored: torch.Tensor) -> Callable[[int, int, torch.Tensor], None]:
        """Views applied to the stored tensor (no byte read), the conversion and Casts to
        each chunk of rows."""
        casts = [s for s in self.steps if s.op_type == "Cast"]
        view = stored
        views = [s for s in self.steps if s.op_type != "Cast"]
        if views:
            bits = _bits(stored.dtype)
            array = stored.view(bits).numpy() if bits is not None else stored.numpy()
            for step in views:
                array = step.apply(array)
            view = (torch.from_numpy(array) if min(array.strides, default=0) >= 0
                    else torch.from_numpy(np.ascontiguousarray(array)))
            if bits is not None:
                view = view.view(stored.dtype)

        def converted(part: torch.Tensor, into: torch.Tensor) -> torch.Tensor:
            """``part`` in the parameter's dtype (``into``: as load_state_dict converts
            it), then cast by the recorded Casts."""
            into.copy_(part)
            if not casts:
                return into
            array = into.numpy()
            for step in casts:
                array = step.apply(array)
            return torch.from_numpy(array)

        matrix = _transposed_matrix(view)
        if matrix is not None:
            return _TransposedRows(matrix, self.load_dtype, converted)

        def rows(start: int, stop: int, out: torch.Tensor) -> None:
            part = view[start:stop]
            if not casts:  # the conversion to the parameter's dtype, as load_state_dict's
                _copy_tiled(out, part)
                return
            out.copy_(converted(part, torch.empty(part.shape, dtype=self.load_dtype)))
        return rows


class Concatenated(LazyTensor):
    """2-D weights (computed when written, or tensors) concatenated along ``axis`` (0 or
    1) without computing them: each band of rows is computed from the parts' rows (the
    packed query, key and value weights of an attention). Its Transpose is recorded on
    the parts (a concatenation of their transposes along the other axis), where they
    record it."""

    def __init__(self, parts: Sequence[Any], axis: int) -> None:
        first = parts[0]
        widths = [int(p.shape[axis]) for p in parts]
        shape = [int(first.shape[0]), int(first.shape[1])]
        shape[axis] = sum(widths)
        super().__init__(shape, first.dtype, self._rows)
        self.parts, self.axis, self.widths = list(parts), axis, widths
        row_bytes = shape[1] * self.element_size()
        self.chunk_bytes = max(GATHER_BYTES, min(MIN_BAND_ROWS * row_bytes, MAX_BAND_BYTES))

    def __repr__(self) -> str:
        return f"Concatenated({self.parts!r}, axis={self.axis})"

    def fold(self, op_type: str, fold: Callable[..., Any], consts: Sequence[Any],
             attrs: dict[str, Any], opset: int) -> Any:
        """A Transpose of the matrix as the concatenation of its parts' transposes; any
        other fold is not recorded (None)."""
        if op_type != "Transpose" or len(consts) != 1 or list(attrs.get("perm") or [1, 0]) \
                != [1, 0]:
            return None
        parts = [_transposed(p, fold, attrs, opset) for p in self.parts]
        return None if any(p is None for p in parts) else Concatenated(parts, 1 - self.axis)

    def _rows(self, start: int, stop: int, out: torch.Tensor) -> None:
        offset = 0
        for part, width in zip(self.parts, self.widths):
            if self.axis == 1:
                _part_rows(part, start, stop, out[:, offset:offset + width])
            elif start < offset + width and stop > offset:
                low, high = max(start, offset), min(stop, offset + width)
                _part_rows(part, low - offset, high - offset, out[low - start:high - start])
            offset += width


def _transposed(part: Any, fold: Callable[..., Any], attrs: dict[str, Any], opset: int
                ) -> Any:
    """``part``'s transpose: recorded on a weight computed when written (None where it is
    not recorded), a view of a tensor."""
    if isinstance(part, LazyTensor):
        return part.fold("Transpose", fold, [part], attrs, opset)
    return part.t()


def _part_rows(part: Any, start: int, stop: int, out: torch.Tensor) -> None:
    """Rows ``start:stop`` of ``part`` (computed when written, or a tensor) into ``out``
    (a view of the result: computed into a buffer when it is not contiguous)."""
    if not isinstance(part, LazyTensor):
        out.copy_(part[start:stop])
        return
    if out.is_contiguous():
        part.rows(start, stop, out)
        return
    band = torch.empty(out.shape, dtype=part.dtype)
    part.rows(start, stop, band)
    out.copy_(band)


def concatenated(parts: Sequence[Any], axis: int) -> Any:
    """2-D ``parts`` (tensors, or weights computed when written) concatenated along
    ``axis``: a tensor when none is computed when written, else a :class:`Concatenated`
    (None when their dtypes differ)."""
    parts = [p if isinstance(p, LazyTensor) else torch.as_tensor(p) for p in parts]
    if not any(isinstance(p, LazyTensor) for p in parts):
        return torch.cat(parts, dim=axis)
    if len({p.dtype for p in parts}) != 1:
        return None
    return Concatenated(parts, axis)


def _transposed_matrix(view: torch.Tensor) -> torch.Tensor | None:
    """The matrix ``view`` is the transpose of, when it is one whose rows are contiguous
    (a Linear weight read through its Transpose); else None."""
    if view.dim() != 2 or view.stride(0) != 1 or view.shape[0] < 2 or view.shape[1] < 2 \
            or view.stride(1) < view.shape[0]:
        return None
    return view.t()


class _TransposedRows:
    """Rows of ``matrix.t()`` converted to ``dtype`` by ``converted(part, into)``: for rows
    ``start:stop`` (columns of ``matrix``) the columns are copied contiguous in the stored
    dtype (whole runs of each row of the mapped file), converted there (a vectorized
    copy), and transposed within one dtype (torch's blocked transpose): converting while
    gathering strided elements costs several times more. The two buffers, one band each,
    are reused from band to band (a new one each band is new pages to fault in)."""

    def __init__(self, matrix: torch.Tensor, dtype: torch.dtype,
                 converted: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        self.matrix, self.dtype, self.converted = matrix, dtype, converted
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def __call__(self, start: int, stop: int, out: torch.Tensor) -> None:
        shape = (self.matrix.shape[0], stop - start)
        if self.buffers is None or tuple(self.buffers[0].shape) != shape:  # the last band
            self.buffers = (torch.empty(shape, dtype=self.matrix.dtype),
                            torch.empty(shape, dtype=self.dtype))
        gathered, into = self.buffers
        gathered.copy_(self.matrix[:, start:stop])
        out.copy_(self.converted(gathered, into).t())


def _scaled_rows(weight: torch.Tensor, step: Step) -> Callable[[int, int, torch.Tensor], None]:
    """Rows of ``weight`` times the per-channel factor of ``step`` (a batch norm folded into
    a convolution), computed as the in-memory fold's rows are."""
    factor = torch.from_numpy(step.arrays[1])
    axis = step.attrs["axis"]

    def rows(start: int, stop: int, out: torch.Tensor) -> None:
        along = factor[start:stop] if axis == 0 else factor
        part = weight[start:stop]
        if out.dtype == part.dtype == torch.float32:
            np.multiply(part.numpy(), along.numpy(), out=out.numpy())
        else:
            out.copy_(part.float() * along)
    return rows


def _scale(arrays: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    """A weight times a per-channel factor, in float32, back in the weight's dtype."""
    weight, factor = arrays
    return (weight.astype(np.float32) * factor).astype(weight.dtype)


def _copy_tiled(out: torch.Tensor, part: torch.Tensor) -> None:
    """``out.copy_(part)``, a strided ``part`` (a transposed weight) a tile of
    :data:`TILE_COLUMNS` columns at a time, which keeps its reads in cache."""
    if part.dim() < 2 or part.is_contiguous():
        out.copy_(part)
        return
    for column in range(0, part.shape[1], TILE_COLUMNS):
        out[:, column:column + TILE_COLUMNS].copy_(part[:, column:column + TILE_COLUMNS])


def _numpy_dtype(dtype: torch.dtype) -> np.dtype | None:
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        return None  # bf16 and the 8-bit floats: the folds refuse them as well


def _bits(dtype: torch.dtype) -> torch.dtype | None:
    """The integer dtype of the same size that numpy views a dtype it lacks as."""
    if _numpy_dtype(dtype) is not None:
        return None
    return {1: torch.uint8, 2: torch.int16, 4: torch.int32}[torch.empty(0, dtype=dtype)
                                                            .element_size()]


# -- binding a captured model's weights to their sources -------------------------------
def without_values(tensor: Any) -> bool:
    """Whether ``tensor`` has a shape but no values (a meta or fake tensor)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, torch.Tensor) and (tensor.is_meta or isinstance(tensor, FakeTensor))


def bind(params: Sequence[tuple[str, Any]], weights: Weights
         ) -> list[tuple[str, Any]]:
    """``params`` (name, tensor) with each tensor without values replaced by its weight
    in ``weights``: a :class:`StreamedTensor`, or the tensor itself when it is small
    (:data:`EAGER_MAX_ELEMENTS`, or a vector of at most :data:`EAGER_MAX_VECTOR`).
    Tensors shared under several names (tied weights) stay
    one object, found under any of their names. A name the weights lack is looked up
    without its leading module names too (``model.lm_head.weight`` as ``lm_head.weight``:
    the model wrapped in another module for the export). A tensor with values (a buffer
    built with the model) that the weights hold takes their value, as ``load_state_dict``
    would give it (a batch norm's running statistics)."""
    found = sources(weights)
    names: dict[int, list[str]] = {}
    for name, tensor in params:
        names.setdefault(id(tensor), []).append(name)
    bound: dict[int, Any] = {}
    missing: list[str] = []
    result = []
    for name, tensor in params:
        if id(tensor) not in bound:
            source = next((found[key] for n in names[id(tensor)] for key in _suffixes(n)
                           if key in found), None)
            if source is None and without_values(tensor):
                missing.append(name)
                continue
            bound[id(tensor)] = tensor if source is None else _weight(name, source, tensor)
        result.append((name, bound[id(tensor)]))
    if missing:
        raise InvalidExportArgumentError(
            f"weights= holds no tensor for {listed(missing, shown=5)}, which the model has on "
            "the meta device. "
            "Pass the checkpoint this model's config comes from; a buffer the model computes "
            "when built (such as rotary frequencies) is in no checkpoint: build the model "
            "with oxport.empty_weights(), which puts only parameters on the meta device.")
    return result


def _suffixes(name: str) -> Iterator[str]:
    """``name``, then without one leading component more at a time (down to two)."""
    parts = name.split(".")
    for start in range(max(len(parts) - 1, 1)):
        yield ".".join(parts[start:])


def _weight(name: str, source: Source, like: torch.Tensor) -> Any:
    """The weight for parameter ``like`` (its dtype and shape) from ``source``."""
    stored = source.shape
    if stored is not None and tuple(stored) != tuple(like.shape):
        raise InvalidExportArgumentError(
            f"Weight {name!r} is {list(stored)} in weights= but {list(like.shape)} in the "
            "model: the checkpoint does not fit the model (check its config).")
    if like.numel() > (EAGER_MAX_VECTOR if like.dim() == 1 else EAGER_MAX_ELEMENTS):
        return StreamedTensor(name, source, like.dtype, tuple(like.shape))
    with source.opened() as tensor:
        if tuple(tensor.shape) != tuple(like.shape):
            raise InvalidExportArgumentError(
                f"Weight {name!r} is {list(tensor.shape)} in weights= but "
                f"{list(like.shape)} in the model.")
        return tensor.to(like.dtype, copy=True)


@contextlib.contextmanager
def empty_weights() -> Iterator[None]:
    """Build models with their parameters on the meta device (no memory, no init) and
    their buffers as usual, for :func:`oxport.export` with ``weights=``::

        with oxport.empty_weights():
            model = LlamaForCausalLM(config)

    Buffers keep the values the model computes when built (rotary frequencies, which no
    checkpoint holds); ``torch.device("meta")`` would leave them without values."""
    register = torch.nn.Module.register_parameter

    def register_on_meta(module: torch.nn.Module, name: str, param: Any) -> None:
        if param is not None and not param.is_meta:  # a tied parameter is already on meta
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    torch.nn.Module.register_parameter = register_on_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register  # type: ignore[method-assign]
