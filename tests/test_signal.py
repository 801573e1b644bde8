"""Complex tensors as real pairs: what the signal pack's symbolics accept and what the
walker declines, and STFT against torch.onnx."""

from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport import testing
from oxport.errors import UnsupportedOperatorError


def test_an_op_without_complex_support_declines_a_complex_tensor_clearly() -> None:
    def transposed(x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.view_as_complex(x).transpose(0, 1))

    with pytest.raises(UnsupportedOperatorError, match=r"aten::transpose.*no complex tensors"):
        oxport.convert(testing.as_module(transposed), (torch.randn(3, 4, 2),))


def _spectrogram(x: torch.Tensor) -> torch.Tensor:
    window = torch.hann_window(16)
    return torch.stft(x, 16, hop_length=4, window=window, center=False, return_complex=False)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("opset", [17, 20])
def test_stft_matches_torch_onnx_and_eager(opset: int) -> None:
    """The real-pairs STFT (return_complex=False) as torch.onnx exports it, at a second
    signal length."""
    module = testing.as_module(_spectrogram)
    x = torch.randn(2, 64)
    files = []
    for export in (oxport.export, torch.onnx.export):
        buffer = io.BytesIO()
        extra = {} if export is oxport.export else {"dynamo": False}
        export(module, (x,), buffer, opset_version=opset, input_names=["x"],
               dynamic_axes={"x": {0: "batch", 1: "samples"}}, **extra)
        files.append(buffer.getvalue())
    for signal in (x, torch.randn(3, 100)):
        expected = _spectrogram(signal).numpy()
        for data in files:
            session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
            got = session.run(None, {"x": signal.numpy()})[0]
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_complex_output_is_its_real_pairs_where_torch_onnx_refuses() -> None:
    """``stft(..., return_complex=True)`` returned as it is: torch.onnx refuses the export
    (a SymbolicValueError, which the corpus's test_stft_wrong_return_complex expects);
    oxport's file gives eager's ``view_as_real`` of it (docs/differences.md)."""
    def spectrum(x: torch.Tensor) -> torch.Tensor:
        return torch.stft(x, 16, window=torch.ones(16), center=False, return_complex=True)

    module, x = testing.as_module(spectrum), torch.randn(1, 32)
    with pytest.raises(torch.onnx.errors.SymbolicValueError):
        torch.onnx.export(module, (x,), io.BytesIO(), opset_version=17, dynamo=False)
    result = oxport.convert(module, (x,), opset_version=17)
    session = ort.InferenceSession(result.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, result.feeds((x,)))[0]
    np.testing.assert_allclose(got, torch.view_as_real(spectrum(x)).numpy(), rtol=1e-4,
                               atol=1e-4)
