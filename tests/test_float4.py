"""``torch.float4_e2m1fn_x2`` tensors (issue 37, item 4) exported as ONNX's FLOAT4E2M1 at
opset 23 on, as ``torch.onnx.export(..., dynamo=True)`` writes them: each element packs two
FP4 numbers, which ONNX counts one by one, so the last dim doubles; the bytes are torch's.
ONNX Runtime runs no op on FLOAT4E2M1 (and reads such an output past its bytes), so the
numbers are checked with ONNX's reference evaluator against eager's, unpacked."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx.reference import ReferenceEvaluator

import oxport
from tests.helpers import FunctionModule as _Fn

F4 = torch.float4_e2m1fn_x2


def _fp4(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator).view(F4)


def _unpacked(tensor: torch.Tensor) -> np.ndarray:
    """A float4_e2m1fn_x2 tensor as ONNX counts it: one FP4 number per item, the low
    nibble first; other tensors as they are."""
    if tensor.dtype != F4:
        return tensor.detach().numpy()
    packed = tensor.view(torch.uint8).numpy().reshape(-1)
    items = np.empty(packed.size * 2, np.uint8)
    items[0::2], items[1::2] = packed & 0x0F, packed >> 4
    return items.reshape(*tensor.shape[:-1], tensor.shape[-1] * 2).view(ml_dtypes.float4_e2m1fn)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _dims(values: Any) -> list[tuple[int, list[Any]]]:
    """Each value's element type and dims (names as names)."""
    return [(v.type.tensor_type.elem_type,
             [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
            for v in values]


def _oxport(model: torch.nn.Module, args: tuple[Any, ...], **kwargs: Any) -> onnx.ModelProto:
    with _quiet():
        proto = oxport.convert(model, args, dynamo=True, **{"opset_version": 23, **kwargs}
                               ).model_proto
    onnx.checker.check_model(proto, full_check=True)
    return proto


def _torch_onnx(model: torch.nn.Module, args: tuple[Any, ...], **kwargs: Any
                ) -> onnx.ModelProto:
    with _quiet():
        return torch.onnx.export(model, args, dynamo=True, verbose=False,
                                 **{"opset_version": 23, **kwargs}).model_proto


def _run(proto: onnx.ModelProto, args: tuple[Any, ...]) -> list[np.ndarray]:
    """The model's outputs by ONNX's reference evaluator."""
    feeds = {i.name: _unpacked(a) for i, a in zip(proto.graph.input, args)}
    return ReferenceEvaluator(proto).run(None, feeds)


def _assert_equal(expected: Any, outputs: list[np.ndarray]) -> None:
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    assert len(outputs) == len(expected)
    for want, got in zip(map(_unpacked, expected), outputs):
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


class _Buffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", _fp4(3, 4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.w, x + 1


class _Parameter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(_fp4(2, 5), requires_grad=False)

    def forward(self) -> torch.Tensor:
        return self.w


class _Clone(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


_MATCHING = {
    "buffer": (_Buffer(), (torch.randn(2),)),
    "parameter": (_Parameter(), ()),
    "input": (_Clone(), (_fp4(3, 4),)),
    "input_3d": (_Fn(lambda x: x.detach()), (_fp4(2, 3, 5, seed=1),)),
}


@pytest.mark.parametrize("case", list(_MATCHING))
def test_float4_matches_torch_onnx(case):
    """Inputs, outputs and weights: torch.onnx's element type, dims and bytes; the numbers
    eager holds, by both files."""
    model, args = _MATCHING[case]
    ours, theirs = _oxport(model, args), _torch_onnx(model, args)
    assert _dims(ours.graph.input) == _dims(theirs.graph.input)
    assert _dims(ours.graph.output) == _dims(theirs.graph.output)
    fp4 = [(list(i.dims), i.raw_data) for i in ours.graph.initializer if i.data_type == 23]
    assert fp4 == [(list(i.dims), i.raw_data) for i in theirs.graph.initializer
                   if i.data_type == 23]
    expected = model(*args)
    _assert_equal(expected, _run(ours, args))
    _assert_equal(expected, _run(theirs, args))


def test_float4_weights_are_torch_bytes_with_the_last_dim_doubled():
    ours = _oxport(_Parameter(), ())
    (weight,) = ours.graph.initializer
    assert (weight.data_type, list(weight.dims)) == (onnx.TensorProto.FLOAT4E2M1, [2, 10])
    assert weight.raw_data == _Parameter().w.view(torch.uint8).numpy().tobytes()


def test_float4_float_outputs_run_in_onnx_runtime():
    """Beside a FLOAT4E2M1 output, the float ones run in ONNX Runtime as eager gives them."""
    model, args = _MATCHING["buffer"]
    ours = _oxport(model, args)
    session = ort.InferenceSession(ours.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run([ours.graph.output[1].name],
                                           {ours.graph.input[0].name: args[0].numpy()})[0],
                               model(*args)[1].numpy())


def test_float4_dynamic_batch_dim_is_named():
    model, args = _Clone(), (_fp4(3, 4),)
    shapes = ({0: "batch"},)
    ours = _oxport(model, args, dynamic_shapes=shapes)
    theirs = _torch_onnx(model, args, dynamic_shapes=shapes)
    assert _dims(ours.graph.input) == _dims(theirs.graph.input) == [(23, ["batch", 8])]
    assert _dims(ours.graph.output) == _dims(theirs.graph.output)
    other = (_fp4(5, 4, seed=2),)
    _assert_equal(other[0], _run(ours, other))


@pytest.mark.parametrize("sizes", [(4, 3), (-1,), (2, 3, 2), (12, -1)])
def test_float4_reshape_scales_the_last_size(sizes):
    """torch.onnx reshapes to torch's sizes, which ONNX's shape inference rejects (the last
    one counts pairs; docs/differences.md); oxport doubles it and gives eager's numbers."""
    model, args = _Fn(lambda x: x.reshape(*sizes)), (_fp4(3, 4),)
    _assert_equal(model(*args), _run(_oxport(model, args), args))
    if sizes[-1] != -1:
        with pytest.raises(onnx.shape_inference.InferenceError):
            onnx.shape_inference.infer_shapes(_torch_onnx(model, args), strict_mode=True)


def test_float4_zeros_are_a_constant():
    """``torch.zeros``/``torch.empty`` of float4: a constant of zeros (torch.onnx writes
    ``empty``'s bytes, whatever they were)."""
    model = _Fn(lambda: (torch.zeros(2, 3, dtype=F4), torch.empty(1, dtype=F4)))
    ours = _oxport(model, ())
    assert _dims(ours.graph.output) == _dims(_torch_onnx(model, ()).graph.output) == [
        (23, [2, 6]), (23, [2])]
    assert all(not o.view(np.uint8).any() for o in _run(ours, ()))


@pytest.mark.parametrize("dynamo", [True, False])
def test_float4_below_opset_23_names_opset_23(dynamo):
    """torch.onnx writes FLOAT4E2M1 at any opset; ONNX has it from 23 only."""
    with pytest.raises(oxport.OnnxExporterError, match=r"float4_e2m1fn_x2.*opset_version=23"):
        oxport.convert(_Fn(lambda: torch.zeros(2, dtype=F4)), (), dynamo=dynamo,
                       opset_version=20)


def test_float4_dynamic_last_dim_fails_clearly():
    """ONNX's last dim is twice torch's there, which no dim name says (torch.onnx names it
    as torch's, so the file's shape is wrong)."""
    with pytest.raises(oxport.OnnxExporterError, match=r"last dim.*dynamic.*static"):
        _oxport(_Clone(), (_fp4(3, 4),), dynamic_shapes=({1: "n"},))


def test_float4_view_as_uint8_fails_clearly():
    """ONNX reinterprets bits only between types of one width; torch.onnx fails too."""
    model, args = _Fn(lambda x: x.view(torch.uint8)), (_fp4(3, 4),)
    with pytest.raises(oxport.OnnxExporterError, match=r"view\(torch.uint8\).*torch.uint8"):
        _oxport(model, args)
    with pytest.raises(Exception):  # noqa: B017 - whichever error torch.onnx raises
        _torch_onnx(model, args)


@pytest.mark.parametrize("fn", [lambda x: x[1:], lambda x: torch.cat([x, x])],
                         ids=["slice", "cat"])
def test_float4_ops_onnx_lacks_fail_clearly(fn):
    """ONNX's Slice and Concat take no FLOAT4E2M1: oxport names the op and the type;
    torch.onnx writes a file the checker rejects."""
    model, args = _Fn(fn), (_fp4(3, 4),)
    with pytest.raises(oxport.OnnxExporterError, match=r"float4e2m1"):
        _oxport(model, args)
    with pytest.raises((onnx.checker.ValidationError, onnx.shape_inference.InferenceError)):
        onnx.checker.check_model(_torch_onnx(model, args), full_check=True)


@pytest.mark.parametrize("case", ["buffer", "input"])
def test_float4_through_the_trace_path(case):
    """The TorchScript front end writes the same signature and numbers (torch.onnx's
    dynamo=False path fails: "ScalarType Float4_e2m1fn_x2 is an unexpected tensor scalar
    type")."""
    model, args = _MATCHING[case]
    with _quiet():
        traced = oxport.convert(model, args, dynamo=False, opset_version=23).model_proto
    onnx.checker.check_model(traced, full_check=True)
    exported = _oxport(model, args)
    assert _dims(traced.graph.input) == _dims(exported.graph.input)
    assert _dims(traced.graph.output) == _dims(exported.graph.output)
    _assert_equal(model(*args), _run(traced, args))


def test_float4_weights_as_inputs_have_onnx_dims(tmp_path):
    """Listed as graph inputs (``save(keep_initializers_as_inputs=True)``,
    ``export_params=False``), a float4 weight has its ONNX dims too."""
    model = _Parameter()
    with _quiet():
        result = oxport.convert(model, (), dynamo=True, opset_version=23)
        result.save(tmp_path / "kept.onnx", keep_initializers_as_inputs=True)
        no_params = oxport.convert(model, (), dynamo=True, opset_version=23,
                                   export_params=False).model_proto
    kept = onnx.load(tmp_path / "kept.onnx")
    assert _dims(kept.graph.input) == _dims(no_params.graph.input) == [(23, [2, 10])]
    onnx.checker.check_model(kept, full_check=True)
