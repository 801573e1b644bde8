"""Helpers the test modules share: an export into memory, loaded back as a ModelProto."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import onnx
import torch

import oxport


def export_with_result(model: Any, args: Any, **kwargs: Any
                       ) -> tuple[onnx.ModelProto, oxport.ExportResult]:
    """``oxport.export(model, args, <memory>, **kwargs)``: the file as a ModelProto, and
    the export's result."""
    buffer = io.BytesIO()
    result = oxport.export(model, args, buffer, **kwargs)
    return onnx.load_from_string(buffer.getvalue()), result


def export_proto(model: Any, args: Any, **kwargs: Any) -> onnx.ModelProto:
    """``oxport.export(model, args, <memory>, **kwargs)``, the file as a ModelProto."""
    return export_with_result(model, args, **kwargs)[0]


def load(f: str | Path | io.BytesIO) -> onnx.ModelProto:
    """The model an export wrote to ``f`` (a path or an in-memory buffer)."""
    return onnx.load_from_string(f.getvalue()) if isinstance(f, io.BytesIO) else onnx.load(f)


class FunctionModule(torch.nn.Module):
    """A module whose forward is ``fn(*args)``: a lambda or function as a model to export."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)
