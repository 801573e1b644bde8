"""Enums and scalar-type tables shared by the API and symbolic functions."""

from __future__ import annotations

import enum
from typing import Any

import torch
from onnx import TensorProto

from oxport.errors import OnnxExporterError

# The opset range, re-exported: ``oxport.types`` is where callers have always found it.
from oxport.opset_versions import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET  # noqa: F401


class _TorchCompatible(enum.IntEnum):
    """An enum that also takes torch.onnx's member of the same name (torch's
    ``TrainingMode`` and ``OperatorExportTypes`` are C++ enums, not Python ints), and
    compares equal to it."""

    @classmethod
    def _missing_(cls, value: object) -> _TorchCompatible | None:
        if type(value).__name__ == cls.__name__:
            return cls.__members__.get(getattr(value, "name", None))  # type: ignore[arg-type]
        return None

    def __eq__(self, other: object) -> bool:
        if type(other).__name__ == type(self).__name__ and not isinstance(other, enum.Enum):
            return self.name == getattr(other, "name", None)
        return int.__eq__(self, other)  # type: ignore[operator]

    __hash__ = int.__hash__


class TrainingMode(_TorchCompatible):
    """How the model's training flag is set while exporting."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(_TorchCompatible):
    """The seed's export modes; every mode but ONNX enables a fallback plugin."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class JitScalarType(enum.IntEnum):
    """Scalar types as TorchScript numbers them, convertible to torch and ONNX."""

    UINT8 = 0
    INT8 = 1
    INT16 = 2
    INT = 3
    INT64 = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    COMPLEX32 = 8
    COMPLEX64 = 9
    COMPLEX128 = 10
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    FLOAT8E5M2 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E5M2FNUZ = 18
    FLOAT8E4M3FNUZ = 19
    UNDEFINED = 20
    FLOAT4E2M1FN_X2 = 45  # c10's code: TorchScript has none

    @classmethod
    def _missing_(cls, value: object) -> JitScalarType | None:
        """A ScalarType argument holds c10's code, which is this enum's number up to
        BFLOAT16 (15) only: c10's codes of the float8 types (23-26) map to their members
        (float4_e2m1fn_x2's, 45, is its member's number)."""
        if value in _C10_CODES:
            return cls[_C10_CODES[value]]  # type: ignore[index]
        return None

    @classmethod
    def from_dtype(cls, dtype: torch.dtype | None) -> JitScalarType:
        """The scalar type of a ``torch.dtype``."""
        if dtype not in _FROM_DTYPE:
            raise OnnxExporterError(f"Unknown dtype {dtype!r}: it has no JitScalarType.")
        return _FROM_DTYPE[dtype]

    @classmethod
    def from_onnx_type(cls, onnx_type: int) -> JitScalarType:
        """The scalar type of an ONNX ``TensorProto.DataType``."""
        for member, row in _TABLE.items():
            if row[3] == onnx_type:
                return member
        raise OnnxExporterError(f"Unknown ONNX data type {onnx_type}.")

    @classmethod
    def from_value(cls, value: Any, default: JitScalarType | None = None) -> JitScalarType:
        """The scalar type of a graph value, or ``default`` when it is unknown."""
        dtype = None
        if isinstance(value, torch.Tensor):
            dtype = value.dtype
        elif value is not None and hasattr(value, "type"):
            type_ = value.type()
            scalar = type_.scalarType() if hasattr(type_, "scalarType") else None
            if scalar is not None:
                return cls._from_name(scalar)
        if dtype is not None:
            return cls.from_dtype(dtype)
        if default is not None:
            return default
        raise OnnxExporterError(
            f"Cannot determine the scalar type of {value!r}; pass a default or set its type."
        )

    @classmethod
    def _from_name(cls, name: str) -> JitScalarType:
        for member, row in _TABLE.items():
            if row[1] == name or row[2] == name:
                return member
        raise OnnxExporterError(f"Unknown scalar type name {name!r}.")

    def scalar_name(self) -> str:
        """TorchScript's name, e.g. ``"Float"``."""
        return _TABLE[self][1]

    def torch_name(self) -> str:
        """torch's name, e.g. ``"float"``."""
        return _TABLE[self][2]

    def dtype(self) -> torch.dtype:
        """The ``torch.dtype``."""
        return _TABLE[self][0]

    def onnx_type(self) -> int:
        """The ONNX ``TensorProto.DataType``."""
        onnx_type = _TABLE[self][3]
        if onnx_type == TensorProto.UNDEFINED:
            raise OnnxExporterError(f"Scalar type {self.name} has no ONNX equivalent.")
        return onnx_type

    def onnx_compatible(self) -> bool:
        """Whether ONNX has a tensor type for it."""
        return _TABLE[self][3] != TensorProto.UNDEFINED and self not in (
            JitScalarType.COMPLEX32,
            JitScalarType.COMPLEX64,
            JitScalarType.COMPLEX128,
        )


_TABLE: dict[JitScalarType, tuple[Any, str, str, int]] = {
    JitScalarType.UINT8: (torch.uint8, "Byte", "uint8_t", TensorProto.UINT8),
    JitScalarType.INT8: (torch.int8, "Char", "int8_t", TensorProto.INT8),
    JitScalarType.INT16: (torch.int16, "Short", "int16_t", TensorProto.INT16),
    JitScalarType.INT: (torch.int32, "Int", "int", TensorProto.INT32),
    JitScalarType.INT64: (torch.int64, "Long", "int64_t", TensorProto.INT64),
    JitScalarType.HALF: (torch.float16, "Half", "half", TensorProto.FLOAT16),
    JitScalarType.FLOAT: (torch.float32, "Float", "float", TensorProto.FLOAT),
    JitScalarType.DOUBLE: (torch.float64, "Double", "double", TensorProto.DOUBLE),
    JitScalarType.COMPLEX32: (torch.complex32, "ComplexHalf", "complex32", TensorProto.UNDEFINED),
    JitScalarType.COMPLEX64: (torch.complex64, "ComplexFloat", "complex", TensorProto.COMPLEX64),
    JitScalarType.COMPLEX128: (torch.complex128, "ComplexDouble", "complex128", TensorProto.COMPLEX128),
    JitScalarType.BOOL: (torch.bool, "Bool", "bool", TensorProto.BOOL),
    JitScalarType.QINT8: (torch.qint8, "QInt8", "qint8", TensorProto.INT8),
    JitScalarType.QUINT8: (torch.quint8, "QUInt8", "quint8", TensorProto.UINT8),
    JitScalarType.QINT32: (torch.qint32, "QInt32", "qint32", TensorProto.INT32),
    JitScalarType.BFLOAT16: (torch.bfloat16, "BFloat16", "bfloat16", TensorProto.BFLOAT16),
    JitScalarType.FLOAT8E5M2: (torch.float8_e5m2, "Float8_e5m2", "float8_e5m2", TensorProto.FLOAT8E5M2),
    JitScalarType.FLOAT8E4M3FN: (torch.float8_e4m3fn, "Float8_e4m3fn", "float8_e4m3fn", TensorProto.FLOAT8E4M3FN),
    JitScalarType.FLOAT8E5M2FNUZ: (
        torch.float8_e5m2fnuz, "Float8_e5m2fnuz", "float8_e5m2fnuz", TensorProto.FLOAT8E5M2FNUZ),
    JitScalarType.FLOAT8E4M3FNUZ: (
        torch.float8_e4m3fnuz, "Float8_e4m3fnuz", "float8_e4m3fnuz", TensorProto.FLOAT8E4M3FNUZ),
    JitScalarType.UNDEFINED: (None, "Undefined", "undefined", TensorProto.UNDEFINED),
    JitScalarType.FLOAT4E2M1FN_X2: (
        torch.float4_e2m1fn_x2, "Float4_e2m1fn_x2", "float4_e2m1fn_x2", TensorProto.FLOAT4E2M1),
}
_FROM_DTYPE = {row[0]: member for member, row in _TABLE.items() if row[0] is not None}
#: c10's ScalarType codes past the prefix it shares with JitScalarType, by member name.
_C10_CODES = {23: "FLOAT8E5M2", 24: "FLOAT8E4M3FN", 25: "FLOAT8E5M2FNUZ", 26: "FLOAT8E4M3FNUZ"}
#: dtypes packing several numbers in each element: how many, and the first opset with their
#: ONNX type. ONNX counts each number, so its last dim is that many times torch's.
_PACKED = {torch.float4_e2m1fn_x2: (2, 23)}


def packed_count(dtype: torch.dtype | None) -> int:
    """How many numbers each element of ``dtype`` holds (2 for float4_e2m1fn_x2, else 1)."""
    return _PACKED[dtype][0] if dtype in _PACKED else 1


def tensor_items(tensor: torch.Tensor) -> list[Any]:
    """A tensor's items as Python numbers, flat; a packed dtype's as its bytes (torch reads
    no numbers out of those)."""
    flat = tensor.reshape(-1)
    return (flat.view(torch.uint8) if tensor.dtype in _PACKED else flat).tolist()


def onnx_shape(dtype: torch.dtype | None, shape: list[Any]) -> list[Any]:
    """``shape`` (torch's) as ONNX counts a tensor of ``dtype``: a packed dtype's last dim
    times the numbers each element holds; such a dim must be known."""
    if dtype not in _PACKED or not shape:
        return list(shape)
    last = shape[-1]
    if last is not None and not isinstance(last, int):
        raise OnnxExporterError(
            f"The last dim of a {dtype} tensor is dynamic ({last!r}): ONNX counts each of "
            f"the {_PACKED[dtype][0]} numbers an element packs, so its size is not torch's "
            "and no dim name can say it. Keep that dim static (leave it out of "
            "dynamic_shapes / dynamic_axes).")
    return [*shape[:-1], None if last is None else last * _PACKED[dtype][0]]


def torch_shape(dtype: torch.dtype | None, shape: list[Any]) -> list[Any]:
    """``shape`` (ONNX's) as torch counts a tensor of ``dtype``: the inverse of
    :func:`onnx_shape`, the last dim unknown where it does not divide."""
    if dtype not in _PACKED or not shape:
        return list(shape)
    last, count = shape[-1], _PACKED[dtype][0]
    known = isinstance(last, int) and last % count == 0
    return [*shape[:-1], last // count if known else None]


def check_dtype_opset(dtype: torch.dtype | None, opset: int) -> None:
    """Fail naming the opset to export with when ``dtype`` has no ONNX type at ``opset``."""
    if dtype in _PACKED and opset < _PACKED[dtype][1]:
        raise OnnxExporterError(
            f"{dtype} tensors need opset {_PACKED[dtype][1]} or later (ONNX's "
            f"{TensorProto.DataType.Name(onnx_dtype(dtype))} came then); this export "
            f"targets opset {opset}. Export with opset_version={_PACKED[dtype][1]}.")


def onnx_dtype(dtype: torch.dtype) -> int:
    """The ONNX data type of a ``torch.dtype``."""
    return JitScalarType.from_dtype(dtype).onnx_type()


def torch_dtype(onnx_type: int) -> torch.dtype:
    """The ``torch.dtype`` of an ONNX data type (the plain, non-quantized one)."""
    for member, row in _TABLE.items():
        if row[3] == onnx_type and member not in (
            JitScalarType.QINT8, JitScalarType.QUINT8, JitScalarType.QINT32):
            return row[0]
    raise OnnxExporterError(f"ONNX data type {onnx_type} has no torch dtype.")
