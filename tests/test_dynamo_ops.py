"""Ops the torch.export front end meets (issue 37, items 4 and 5): each reproducer exported
with ``oxport.export(..., dynamo=True)`` and with ``torch.onnx.export(..., dynamo=True)``,
their signatures compared (names aside) and their ONNX Runtime outputs compared with each
other and with eager PyTorch. Where torch.onnx fails or differs from eager, the test shows
it and docs/differences.md lists it."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # registers the quantized_decomposed ops
import torch.nn.functional as F

import oxport
from oxport.testing import compare, flatten_expected
from tests.helpers import FunctionModule as _Fn

_Q = torch.ops.quantized_decomposed


def _module(model: Any) -> torch.nn.Module:
    return model if isinstance(model, torch.nn.Module) else _Fn(model)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.export's and torch.onnx's warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _signature(proto: onnx.ModelProto) -> tuple[list[Any], list[Any]]:
    """Inputs and outputs as (element type, rank): the signature, names aside."""
    def of(values: Any) -> list[Any]:
        return [(v.type.tensor_type.elem_type, len(v.type.tensor_type.shape.dim))
                for v in values]
    initializers = {i.name for i in proto.graph.initializer}
    return of([v for v in proto.graph.input if v.name not in initializers]), \
        of(proto.graph.output)


def _real(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor as the ONNX files hold it: complex as its real pairs."""
    return torch.view_as_real(tensor.detach().resolve_conj()) if tensor.is_complex() \
        else tensor.detach()


def _oxport(model: torch.nn.Module, args: tuple[Any, ...], opset: int
            ) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """oxport's file (fully checked) and its ONNX Runtime outputs."""
    with _quiet(), torch.no_grad():
        result = oxport.convert(model, args, dynamo=True, opset_version=opset)
    proto = result.model_proto
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return proto, session.run(None, result.feeds(args))


def _torch_onnx(model: torch.nn.Module, args: tuple[Any, ...], opset: int
                ) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """torch.onnx's file and its ONNX Runtime outputs (through ONNXProgram, which feeds
    complex inputs as their real pairs)."""
    with _quiet(), torch.no_grad():
        program = torch.onnx.export(model, args, dynamo=True, opset_version=opset,
                                    verbose=False)
        outputs = program(*args)
    return program.model_proto, [_real(o).numpy() for o in outputs]


def _expected(model: torch.nn.Module, args: tuple[Any, ...]) -> list[torch.Tensor]:
    with torch.no_grad():
        return [_real(t) for t in flatten_expected(model(*args))]


def _check(model: Any, args: tuple[Any, ...], *, opset: int = 20, atol: float = 1e-5,
           rtol: float = 1e-4) -> list[np.ndarray]:
    """oxport's and torch.onnx's files agree in signature; both match eager."""
    model = _module(model)
    expected = _expected(model, args)
    ours, ours_out = _oxport(model, args, opset)
    theirs, theirs_out = _torch_onnx(model, args, opset)
    assert _signature(ours) == _signature(theirs)
    compare(expected, ours_out, rtol=rtol, atol=atol, where="oxport")
    compare(expected, theirs_out, rtol=rtol, atol=atol, where="torch.onnx")
    return ours_out


def _check_where_torch_onnx_fails(model: Any, args: tuple[Any, ...], *, opset: int = 20,
                                  atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """torch.onnx fails to export (docs/differences.md); oxport's file matches eager."""
    model = _module(model)
    expected = _expected(model, args)
    with pytest.raises(Exception):  # noqa: B017 - whichever error torch.onnx raises
        _torch_onnx(model, args, opset)
    compare(expected, _oxport(model, args, opset)[1], rtol=rtol, atol=atol, where="oxport")


# -- quantized_decomposed ------------------------------------------------------------------
_SCALES, _ZERO_POINTS = torch.tensor([0.05, 0.1, 0.2]), torch.tensor([0, 10, -3])


@pytest.mark.parametrize("dtype, low, high", [(torch.int8, -128, 127), (torch.int8, -10, 20),
                                              (torch.uint8, 0, 255), (torch.uint8, 5, 100)])
def test_per_channel_quantize_dequantize_on_axis_1(dtype, low, high):
    zero_points = _ZERO_POINTS.clamp(min=low) if dtype == torch.uint8 else _ZERO_POINTS

    def model(x):
        q = _Q.quantize_per_channel(x, _SCALES, zero_points, 1, low, high, dtype)
        return q, _Q.dequantize_per_channel(q, _SCALES, zero_points, 1, low, high, dtype)

    _check(model, (torch.randn(2, 3, 4) * 20,))


def _per_tensor(dtype: torch.dtype, low: int, high: int) -> Any:
    def model(x):
        q = _Q.quantize_per_tensor(x, 0.1, 12, low, high, dtype)
        return q, _Q.dequantize_per_tensor(q, 0.1, 12, low, high, dtype)
    return model


@pytest.mark.parametrize("dtype, low, high", [(torch.int8, -128, 127), (torch.uint8, 0, 255)])
def test_per_tensor_quantize_dequantize(dtype, low, high):
    _check(_per_tensor(dtype, low, high), (torch.randn(3, 5) * 20,))


def test_per_tensor_clamps_to_quant_min_max_where_torch_onnx_does_not():
    """torch.onnx saturates to uint8's range, not to (10, 200) (docs/differences.md)."""
    model, args = _module(_per_tensor(torch.uint8, 10, 200)), (torch.randn(3, 5) * 20,)
    expected = _expected(model, args)
    ours_proto, ours = _oxport(model, args, 20)
    compare(expected, ours, rtol=0, atol=0, where="oxport")
    theirs_proto, theirs = _torch_onnx(model, args, 20)
    assert _signature(ours_proto) == _signature(theirs_proto)
    assert theirs[0].min() < 10 or theirs[0].max() > 200


def test_per_tensor_tensor_overloads_where_torch_onnx_fails():
    def model(x):
        scale, zero_point = torch.tensor(0.1), torch.tensor(3)
        q = _Q.quantize_per_tensor.tensor(x, scale, zero_point, 0, 255, torch.uint8)
        return _Q.dequantize_per_tensor.tensor(q, scale, zero_point, 0, 255, torch.uint8)

    _check_where_torch_onnx_fails(model, (torch.randn(2, 3) * 20,))


# -- bincount ------------------------------------------------------------------------------
@pytest.mark.parametrize("data, minlength", [([1, 2, 2, 5], 0), ([1, 2, 2, 5], 9), ([], 3)])
def test_bincount_counts(data, minlength):
    _check(lambda x: torch.bincount(x, minlength=minlength),
           (torch.tensor(data, dtype=torch.int64),))


def test_bincount_with_weights_where_torch_onnx_fails():
    _check_where_torch_onnx_fails(lambda x, w: torch.bincount(x, w, minlength=7),
                                  (torch.tensor([1, 2, 2, 5]), torch.rand(4)))


# -- cat with an empty tensor ----------------------------------------------------------------
def test_cat_with_an_empty_tensor_promotes_over_it():
    ours = _check(lambda x: torch.cat([x, torch.empty(0)]), (torch.tensor([[1, 2], [3, 4]]),))
    assert ours[0].dtype == np.float32  # as eager: the empty float tensor promotes


def test_cat_of_mixed_dtypes_and_an_empty_tensor():
    _check(lambda x, y: torch.cat([x, y, torch.empty(0)]),
           (torch.tensor([1, 2]), torch.rand(3).half()), atol=1e-3)


# -- complex tensors -------------------------------------------------------------------------
class _ComplexNumber(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.mul(x, 2 + 3j)


class _ComplexWeights(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 2, dtype=torch.complex64))

    def forward(self, x):
        return (x + self.w) * torch.tensor([1 + 1j, 2 - 1j]) - 0.5


class _ComplexConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.randn(4, 3, 3, 3, dtype=torch.complex64)

    def forward(self, x):
        return F.conv2d(x, self.weight)


def _complex(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.complex64)


def test_complex_number_constant():
    _check(_ComplexNumber(), (_complex(2, 2),))


def test_complex_initializers_through_add_and_mul():
    _check(_ComplexWeights(), (_complex(2, 2),))


def test_conv2d_on_complex_input():
    _check(_ComplexConv(), (_complex(1, 3, 5, 5),), atol=1e-4)


def test_rfft_with_its_dft_length():
    _check(lambda x: torch.view_as_real(torch.fft.rfft(x, n=8)), (torch.randn(2, 6),),
           atol=1e-4)
    _check(lambda x: torch.view_as_real(torch.fft.rfft(x, n=4)), (torch.randn(2, 6),),
           atol=1e-4)


# -- stft with all its arguments ------------------------------------------------------------
@pytest.mark.parametrize("center", [True, False])
def test_stft_center_overload_with_every_argument(center):
    def model(x, window):
        return torch.view_as_real(torch.ops.aten.stft.center(
            x, 16, 4, 16, window, center, "reflect", False, True, True, None))

    _check(model, (torch.randn(2, 64), torch.hann_window(16)), atol=1e-4)


# -- scaled_dot_product_attention ---------------------------------------------------------
def test_sdpa_gqa_with_dropout_at_opset_23():
    """Dropout is random: with values of ones, each output is the kept weights' sum over
    1 - p, whose mean is 1 and which varies. Eager drops; oxport's file drops with ONNX
    Runtime's graph optimizations off (they remove Dropout nodes, training mode or not, and
    then it gives torch.onnx's outputs: torch.onnx leaves the dropout out, all its outputs
    are 1; docs/differences.md)."""
    def model(q, k):
        return F.scaled_dot_product_attention(q, k, torch.ones(k.shape), enable_gqa=True,
                                              dropout_p=0.2)

    args = (torch.randn(2, 4, 64, 16), torch.randn(2, 2, 64, 16))
    ours_proto, optimized = _oxport(_module(model), args, 23)
    theirs_proto, theirs = _torch_onnx(_module(model), args, 23)
    assert _signature(ours_proto) == _signature(theirs_proto)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(ours_proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    ours = session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)})
    eager = _expected(_module(model), args)[0].numpy()
    for out in (eager, ours[0]):
        assert out.shape == (2, 4, 64, 16)
        assert abs(out.mean() - 1) < 0.05 and out.std() > 0.05
    np.testing.assert_allclose(theirs[0], 1, atol=1e-5)
    np.testing.assert_allclose(optimized[0], 1, atol=1e-5)


def _empty_row_mask(dtype: torch.dtype) -> torch.Tensor:
    keep = torch.ones(4, 6, dtype=torch.bool)
    keep[1] = False
    return keep if dtype == torch.bool else torch.zeros(4, 6).masked_fill(~keep, float("-inf"))


@pytest.mark.parametrize("opset", [20, 23])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
def test_sdpa_row_the_mask_empties_is_zero_as_eager(opset, dtype):
    """Eager gives zeros for a query row its mask leaves no key (safe softmax); torch.onnx's
    decomposition fills with the dtype's lowest value, which averages the values there
    (docs/differences.md)."""
    def model(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    args = (torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8),
            _empty_row_mask(dtype))
    expected = _expected(_module(model), args)
    assert not expected[0][:, :, 1].any()
    ours_proto, ours = _oxport(_module(model), args, opset)
    compare(expected, ours, rtol=1e-4, atol=1e-5, where="oxport")
    theirs_proto, theirs = _torch_onnx(_module(model), args, opset)
    assert _signature(ours_proto) == _signature(theirs_proto)
    rows = [0, 2, 3]  # the rows a key is left in agree everywhere
    np.testing.assert_allclose(theirs[0][:, :, rows], ours[0][:, :, rows], atol=1e-5)


def test_sdpa_causal_mask_matches_torch_onnx():
    def model(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    _check(model, (torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)))


# -- scalar types ------------------------------------------------------------------------------
def test_scalar_type_arguments_hold_c10_codes():
    """A ScalarType argument's number is c10's: the same as JitScalarType's up to bfloat16,
    c10's own for the float8 types and float4_e2m1fn_x2."""
    from oxport.types import JitScalarType

    assert JitScalarType(6).dtype() == torch.float32
    assert [JitScalarType(code).dtype() for code in (23, 24, 25, 26)] == [
        torch.float8_e5m2, torch.float8_e4m3fn, torch.float8_e5m2fnuz, torch.float8_e4m3fnuz]
    assert JitScalarType(45).dtype() == torch.float4_e2m1fn_x2
