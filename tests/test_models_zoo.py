"""The seeds' model list, exported at opsets 13, 17, 20 and 26.

DCGAN, DenseNet-121, Inception v3 (with its auxiliary head), ResNet-50,
SuperResolution, VGG-16 (and -BN) and word_language_model (LSTM, GRU, RNN_TANH;
two layers; a bidirectional variant), written in ``tests/models`` since torchvision
is not available. Each export has a dynamic batch axis; it passes the full ONNX
checker and ONNX Runtime matches eager PyTorch at the traced batch size and at a
second one (rtol 1e-3, atol 1e-4 unless a spec says otherwise).

Inputs are small to keep CI fast; batch norm running statistics are calibrated on
the test input, so activations keep a realistic scale through deep networks.
"""

from __future__ import annotations

import dataclasses
import functools
import io
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import oxport
from tests.models.dcgan import Discriminator, Generator
from tests.models.densenet import densenet121
from tests.models.inception import InceptionAux, inception_v3, init_weights
from tests.models.resnet import resnet50
from tests.models.super_resolution import SuperResolutionNet
from tests.models.vgg import vgg16
from tests.models.word_language_model import RNNModel

OPSETS = (13, 17, 20, 26)
BATCHES = (1, 2)  # traced, then the second size the dynamic axis runs at
CALIBRATION_BATCH = 16


@dataclasses.dataclass(frozen=True)
class Spec:
    """A model, its inputs at a given batch size, and how its axes are named."""

    build: Callable[[], nn.Module]
    inputs: Callable[[int], tuple[torch.Tensor, ...]]
    input_names: tuple[str, ...] = ("x",)
    output_names: tuple[str, ...] = ("y",)
    #: ``dynamic_axes``; None names axis 0 of every input and output "batch"
    axes: dict[str, dict[int, str]] | None = None
    rtol: float = 1e-3
    atol: float = 1e-4

    def dynamic_axes(self) -> dict[str, dict[int, str]]:
        if self.axes is not None:
            return self.axes
        return {name: {0: "batch"} for name in self.input_names + self.output_names}


def _images(*shape: int) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda batch: (torch.randn(batch, *shape),)


def _inception_aux() -> nn.Module:
    """Inception v3's auxiliary classifier, for its real 17x17x768 grid."""
    head = InceptionAux(768, 1000)
    init_weights(head)
    return head


def _word_lm(rnn_type: str, bidirectional: bool = False,
             tie_weights: bool = False) -> Callable[[], nn.Module]:
    return lambda: RNNModel(rnn_type, ntoken=50, ninp=16, nhid=16, nlayers=2,
                            tie_weights=tie_weights, bidirectional=bidirectional)


def _word_lm_inputs(lstm: bool, directions: int = 1) -> Callable[[int], tuple]:
    def inputs(batch: int) -> tuple:
        tokens = torch.randint(0, 50, (5, batch))
        states = tuple(torch.randn(2 * directions, batch, 16) for _ in range(2 if lstm else 1))
        return (tokens, states if lstm else states[0])
    return inputs


# The states are (layers * directions, batch, hidden); the log-probabilities are flattened
# to (seq * batch, ntoken).
_LM_AXES = {"tokens": {1: "batch"}, "h0": {1: "batch"}, "c0": {1: "batch"},
            "log_probs": {0: "seq_x_batch"}, "hn": {1: "batch"}, "cn": {1: "batch"}}
_GRU_AXES = {k: v for k, v in _LM_AXES.items() if k not in ("c0", "cn")}

SPECS: dict[str, Spec] = {
    "dcgan_generator": Spec(Generator, _images(100, 1, 1)),
    "dcgan_discriminator": Spec(Discriminator, _images(3, 64, 64)),
    "densenet121": Spec(densenet121, _images(3, 32, 32)),
    # The seed warns Inception is sensitive to operator implementations. Its logits reach
    # ~30 here and eager float32 itself is 2.7e-3 off a float64 run, so atol is 5e-3.
    "inception_v3": Spec(lambda: inception_v3(transform_input=True), _images(3, 75, 75),
                         atol=5e-3),
    "inception_v3_aux": Spec(_inception_aux, _images(768, 17, 17)),
    # 50 random layers: eager float32 is itself 1e-4 off a float64 run, so atol is 5e-4.
    "resnet50": Spec(resnet50, _images(3, 64, 64), atol=5e-4),
    "super_resolution": Spec(SuperResolutionNet, _images(1, 32, 32)),
    # Narrow copies (width 16, hidden 256): the full classifier alone is 120M parameters.
    "vgg16": Spec(lambda: vgg16(num_classes=10, width=16, hidden=256), _images(3, 32, 32)),
    "vgg16_bn": Spec(lambda: vgg16(num_classes=10, width=16, hidden=256, batch_norm=True),
                     _images(3, 32, 32)),
    "word_lm_lstm": Spec(_word_lm("LSTM", tie_weights=True), _word_lm_inputs(True),
                         ("tokens", "h0", "c0"), ("log_probs", "hn", "cn"), _LM_AXES),
    "word_lm_gru": Spec(_word_lm("GRU"), _word_lm_inputs(False), ("tokens", "h0"),
                        ("log_probs", "hn"), _GRU_AXES),
    "word_lm_rnn_tanh": Spec(_word_lm("RNN_TANH"), _word_lm_inputs(False), ("tokens", "h0"),
                             ("log_probs", "hn"), _GRU_AXES),
    "word_lm_lstm_bidirectional": Spec(_word_lm("LSTM", bidirectional=True),
                                       _word_lm_inputs(True, 2), ("tokens", "h0", "c0"),
                                       ("log_probs", "hn", "cn"), _LM_AXES),
}


def _calibrate_batch_norm(model: nn.Module, inputs: tuple) -> None:
    """Running statistics from ``inputs`` (only the norms in training mode)."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: one batch sets the statistics
        norm.train()
    with torch.no_grad():
        model(*inputs)
    for norm in norms:
        norm.eval()


@dataclasses.dataclass
class _Fixture:
    model: nn.Module
    inputs: dict[int, tuple]  # batch size -> inputs
    expected: dict[int, list[np.ndarray]]  # batch size -> eager outputs


@functools.lru_cache(maxsize=1)  # the tests of one model run one after another
def _fixture(name: str) -> _Fixture:
    spec = SPECS[name]
    torch.manual_seed(0)
    model = spec.build().eval()
    _calibrate_batch_norm(model, spec.inputs(CALIBRATION_BATCH))
    inputs = {batch: spec.inputs(batch) for batch in BATCHES}
    return _Fixture(model, inputs, {batch: _eager(model, inputs[batch]) for batch in BATCHES})


def _feeds(session: ort.InferenceSession, inputs: tuple) -> dict[str, np.ndarray]:
    from torch.utils import _pytree as pytree

    leaves = pytree.tree_leaves(inputs)
    return {i.name: x.numpy() for i, x in zip(session.get_inputs(), leaves, strict=True)}


def _eager(model: nn.Module, inputs: tuple) -> list[np.ndarray]:
    from torch.utils import _pytree as pytree

    with torch.no_grad():
        return [y.numpy() for y in pytree.tree_leaves(model(*inputs))]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # nn.RNN's input checks
@pytest.mark.parametrize("opset", OPSETS, ids=lambda o: f"opset{o}")
@pytest.mark.parametrize("name", list(SPECS))
def test_model_zoo(name: str, opset: int) -> None:
    """One export per (model, opset): full checker, then ORT vs eager at two batch sizes."""
    spec = SPECS[name]
    fixture = _fixture(name)
    buffer = io.BytesIO()
    oxport.export(fixture.model, fixture.inputs[BATCHES[0]], buffer, opset_version=opset,
                  input_names=list(spec.input_names), output_names=list(spec.output_names),
                  dynamic_axes=spec.dynamic_axes())
    proto = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    assert proto.opset_import[0].version == opset
    for value in [*proto.graph.input, *proto.graph.output]:
        ((axis, dim_name),) = spec.dynamic_axes()[value.name].items()
        assert value.type.tensor_type.shape.dim[axis].dim_param == dim_name

    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for batch in BATCHES:
        got = session.run(None, _feeds(session, fixture.inputs[batch]))
        want = fixture.expected[batch]
        assert len(got) == len(want)
        for index, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(g, w, rtol=spec.rtol, atol=spec.atol, equal_nan=False,
                                       err_msg=f"{name} opset {opset} batch {batch} "
                                               f"output {index}")


@pytest.mark.parametrize("builder, expected", [
    (Generator, 3_576_704), (Discriminator, 2_765_568),  # pytorch/examples dcgan, defaults
    (densenet121, 7_978_856), (inception_v3, 27_161_264),  # torchvision's counts
    (vgg16, 138_357_544), (lambda: vgg16(batch_norm=True), 138_365_992),
])
def test_fixtures_follow_the_reference_architectures(builder, expected):
    """At their real widths the fixtures have exactly the reference parameter counts."""
    with torch.device("meta"):
        model = builder()
    assert sum(p.numel() for p in model.parameters()) == expected
