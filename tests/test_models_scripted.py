"""The model fixtures of ``tests/models``, scripted (``torch.jit.script``).

Each model TorchScript accepts is exported scripted with a dynamic batch axis: the file
passes the full ONNX checker and ONNX Runtime matches eager PyTorch at two batch sizes.
Where ``torch.onnx.export(..., dynamo=False)`` exports the scripted model too, oxport's
file has its signature (inputs and outputs: count, order, element type, rank).

CI runs each model at opset 17; ``OXPORT_TEST_SCRIPTED_MODEL_OPSETS=13,17,20`` runs the
others too (docs/scripting.md).
"""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import Tensor, nn

import oxport
from tests.models.alexnet import alexnet
from tests.models.mlp import MLP
from tests.models.quantized import dynamic_lstm, quantized_resnet
from tests.models.resnet import resnet18
from tests.models.word_language_model import RNNModel
from tests.test_models_zoo import (
    BATCHES,
    SPECS,
    Spec,
    _calibrate_batch_norm,
    _eager,
    _feeds,
    _GRU_AXES,
    _images,
    _LM_AXES,
    _word_lm_inputs,
)


def _opsets() -> tuple[int, ...]:
    """The opsets ``OXPORT_TEST_SCRIPTED_MODEL_OPSETS`` names (comma-separated); 17 alone
    by default."""
    text = os.environ.get("OXPORT_TEST_SCRIPTED_MODEL_OPSETS", "17")
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"OXPORT_TEST_SCRIPTED_MODEL_OPSETS={text!r}: name opsets as "
                         "comma-separated numbers, e.g. 13,17,20.") from None


class _ScriptableLSTMLM(RNNModel):
    """word_language_model with its LSTM state typed for TorchScript (the fixture's
    ``Tensor | tuple`` annotation is a Union TorchScript cannot pass to nn.LSTM)."""

    def forward(self, tokens: Tensor, hidden: tuple[Tensor, Tensor]
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        output, hidden = self.rnn(self.embed(tokens), hidden)
        return self.decode(output), hidden


class _ScriptableRNNLM(RNNModel):
    """word_language_model of a GRU or RNN, its state typed for TorchScript."""

    def forward(self, tokens: Tensor, hidden: Tensor) -> tuple[Tensor, Tensor]:
        output, hidden = self.rnn(self.embed(tokens), hidden)
        return self.decode(output), hidden


def _word_lm(cls: type[RNNModel], rnn_type: str, **options: bool):
    return lambda: cls(rnn_type, ntoken=50, ninp=16, nhid=16, nlayers=2, **options)


#: The zoo's models (word_language_model with its state typed), then the other fixtures.
MODELS: dict[str, Spec] = {
    **{name: SPECS[name] for name in ("dcgan_generator", "dcgan_discriminator",
                                      "densenet121", "inception_v3", "inception_v3_aux",
                                      "resnet50", "super_resolution", "vgg16", "vgg16_bn")},
    "word_lm_lstm": Spec(_word_lm(_ScriptableLSTMLM, "LSTM", tie_weights=True),
                         _word_lm_inputs(True), ("tokens", "h0", "c0"),
                         ("log_probs", "hn", "cn"), _LM_AXES),
    "word_lm_lstm_bidirectional": Spec(_word_lm(_ScriptableLSTMLM, "LSTM", bidirectional=True),
                                       _word_lm_inputs(True, 2), ("tokens", "h0", "c0"),
                                       ("log_probs", "hn", "cn"), _LM_AXES),
    "word_lm_gru": Spec(_word_lm(_ScriptableRNNLM, "GRU"), _word_lm_inputs(False),
                        ("tokens", "h0"), ("log_probs", "hn"), _GRU_AXES),
    "word_lm_rnn_tanh": Spec(_word_lm(_ScriptableRNNLM, "RNN_TANH"), _word_lm_inputs(False),
                             ("tokens", "h0"), ("log_probs", "hn"), _GRU_AXES),
    "alexnet": Spec(lambda: alexnet(num_classes=10), _images(3, 64, 64)),
    "mlp": Spec(lambda: MLP((32, 64, 64, 10)), lambda batch: (torch.randn(batch, 32),)),
    "resnet18": Spec(lambda: resnet18(num_classes=10, width=16), _images(3, 32, 32)),
    # Within two steps of the output's scale (0.013), as tests/test_quantized.py allows.
    "quantized_resnet": Spec(quantized_resnet, _images(3, 32, 32), rtol=0, atol=0.027),
    # torch.onnx cannot export it scripted (its packed LSTM weights are a ScriptObject).
    "dynamic_lstm": Spec(dynamic_lstm, lambda batch: (torch.randn(7, batch, 8),), ("x",),
                         ("y", "h", "c"), {name: {1: "batch"} for name in ("x", "y", "h", "c")},
                         rtol=0, atol=0.02),
}
#: Seconds, not minutes: the rest is marked slow.
_QUICK = {"dcgan_discriminator", "inception_v3_aux", "super_resolution", "word_lm_lstm",
          "word_lm_gru", "mlp", "resnet18", "dynamic_lstm"}


def _script(model: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(model)


def _export(exporter, model, args: tuple, spec: Spec, opset: int) -> bytes:
    buffer = io.BytesIO()
    exporter(model, args, buffer, opset_version=opset, input_names=list(spec.input_names),
             output_names=list(spec.output_names), dynamic_axes=spec.dynamic_axes())
    return buffer.getvalue()


def _signature(session: ort.InferenceSession) -> list[tuple[str, str, int]]:
    return [(value.name, value.type, len(value.shape))
            for value in [*session.get_inputs(), *session.get_outputs()]]


def _torch_onnx_session(model, args: tuple, spec: Spec, opset: int
                        ) -> ort.InferenceSession | None:
    """ONNX Runtime on torch.onnx's export of the scripted model; None where torch.onnx
    fails or its file does not load."""
    def export(*a, **kw):
        torch.onnx.export(*a, **kw, dynamo=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = _export(export, model, args, spec, opset)
        return ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - torch.onnx's failures: nothing to compare with
        return None


def _params(name: str) -> list:
    marks = [] if name in _QUICK else [pytest.mark.slow]
    return [pytest.param(name, opset, marks=marks, id=f"{name}-opset{opset}")
            for opset in _opsets()]


@pytest.mark.filterwarnings("ignore::UserWarning")  # nn.RNN's dropout with 2 layers, etc.
@pytest.mark.parametrize("name, opset", [p for name in MODELS for p in _params(name)])
def test_scripted_model(name: str, opset: int) -> None:
    spec = MODELS[name]
    torch.manual_seed(0)
    model = spec.build().eval()
    inputs = {batch: spec.inputs(batch) for batch in BATCHES}
    _calibrate_batch_norm(model, spec.inputs(16))
    expected = {batch: _eager(model, inputs[batch]) for batch in BATCHES}
    scripted = _script(model)
    data = _export(oxport.export, scripted, inputs[BATCHES[0]], spec, opset)
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for batch in BATCHES:
        got = session.run(None, _feeds(session, inputs[batch]))
        assert len(got) == len(expected[batch])
        for index, (g, w) in enumerate(zip(got, expected[batch])):
            np.testing.assert_allclose(g, w, rtol=spec.rtol, atol=spec.atol,
                                       err_msg=f"{name} opset {opset} batch {batch} "
                                               f"output {index}")
    theirs = _torch_onnx_session(scripted, inputs[BATCHES[0]], spec, opset)
    if theirs is not None:
        assert _signature(session) == _signature(theirs)


def test_opsets_from_the_environment(monkeypatch):
    monkeypatch.setenv("OXPORT_TEST_SCRIPTED_MODEL_OPSETS", "13, 20")
    assert _opsets() == (13, 20)
    monkeypatch.setenv("OXPORT_TEST_SCRIPTED_MODEL_OPSETS", "all")
    with pytest.raises(ValueError, match="comma-separated numbers"):
        _opsets()
