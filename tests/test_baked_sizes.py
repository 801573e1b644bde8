"""A size of a dynamic axis that the model's Python code turns into a number or a decision
is a constant in the trace: the export warns, naming the axis and the line."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

import oxport


class ViewWithInt(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = int(x.size(0)) * 2  # baked
        return x.view(rows, -1)


class SumOverRange(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = x[:, 0]
        for i in range(1, x.size(1)):  # baked
            total = total + x[:, i]
        return total


class MeanOverFloat(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(0) / float(x.shape[0])  # baked


class PadToLonger(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if x.shape[1] < y.shape[1]:  # baked
            x = nn.functional.pad(x, (0, y.shape[1] - x.shape[1]))
        return x + y


class FineDynamic(nn.Module):
    """Sizes kept as tensors (traced), given to torch ops, sliced with, compared with
    constants or for equality, and a Python loop over a static axis."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        batch, seq = x.shape
        out = x.view(batch * 2, -1).reshape(batch, seq)[:, : seq - 1]
        out = out + torch.zeros(x.shape[0], 1) + torch.arange(seq - 1)
        out = out + torch.hann_window(seq)[: seq - 1]  # an int argument: torch records it
        if seq > 1 and x.shape[0] == y.shape[0]:
            out = out * 2
        for row in range(y.size(1)):
            out = out + y[:, row : row + 1]
        return torch.cat([out, x[:, min(seq, 1000) - 1 :]], dim=1)


def _line(cls: type, marker: str = "# baked") -> int:
    lines, first = __import__("inspect").getsourcelines(cls)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _export(model: nn.Module, args: tuple[torch.Tensor, ...], axes: dict) -> tuple[bytes, list]:
    buffer = io.BytesIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        oxport.export(model, args, buffer, input_names=list(axes), dynamic_axes=axes)
    return buffer.getvalue(), [w for w in caught if str(w.message).startswith("oxport:")]


@pytest.mark.parametrize(("model", "args", "axes", "axis", "second"), [
    (ViewWithInt(), (torch.randn(3, 4),), {"x": {0: "batch"}}, "batch", (torch.randn(5, 4),)),
    (SumOverRange(), (torch.randn(2, 3),), {"x": {1: "seq"}}, "seq", (torch.randn(2, 5),)),
    (MeanOverFloat(), (torch.randn(3, 4),), {"x": {0: "batch"}}, "batch", (torch.randn(5, 4),)),
    (PadToLonger(), (torch.randn(2, 5), torch.randn(2, 5)), {"x": {1: "short"}, "y": {1: "long"}},
     "long, short", (torch.randn(2, 3), torch.randn(2, 5))),
], ids=lambda item: type(item).__name__ if isinstance(item, nn.Module) else None)
def test_a_size_of_a_dynamic_axis_turned_into_a_python_value_warns(model, args, axes, axis,
                                                                    second):
    data, said = _export(model, args, axes)
    assert len(said) == 1, [str(w.message) for w in said]
    message = str(said[0].message)
    assert f"({axis})" in message
    assert f"{__file__}({_line(type(model))})" in message
    assert said[0].filename == __file__  # attributed to the export call
    # The warning is right: the file is wrong at another size (an error or other values).
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    feeds = {name: value.numpy() for name, value in zip(axes, second)}
    with torch.no_grad():
        expected = model(*second).numpy()
    try:
        got = session.run(None, feeds)[0]
    except Exception:  # noqa: BLE001 - ONNX Runtime refuses the baked shape
        return
    assert got.shape != expected.shape or not np.allclose(got, expected, atol=1e-5)


def test_the_tracer_warning_still_names_the_models_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        oxport.export(ViewWithInt(), (torch.randn(3, 4),), io.BytesIO(),
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    traced = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    assert traced and all(w.filename == __file__ for w in traced)
    assert traced[0].lineno == _line(ViewWithInt)


class LayersWithInt(nn.Module):
    """Three layers that run the same line converting a size (a TracerWarning each time)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = x.view(int(x.size(0)), -1) + 1  # each layer
        return x


def test_a_tracer_warning_shows_once_per_line_not_once_per_layer():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's: once per line
        oxport.export(LayersWithInt(), (torch.randn(3, 4),), io.BytesIO())
    line = _line(LayersWithInt, "# each layer")
    assert [w.lineno for w in caught
            if issubclass(w.category, torch.jit.TracerWarning)] == [line]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every one, when asked for
        oxport.export(LayersWithInt(), (torch.randn(3, 4),), io.BytesIO())
    assert [w.lineno for w in caught
            if issubclass(w.category, torch.jit.TracerWarning)] == [line] * 3


def test_sizes_kept_as_tensors_or_compared_for_edge_cases_stay_silent():
    model, x, y = FineDynamic(), torch.randn(3, 4), torch.randn(3, 2)
    data, said = _export(model, (x, y), {"x": {0: "batch", 1: "seq"}, "y": {0: "batch"}})
    assert said == []
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for batch, seq in ((3, 4), (5, 6)):
        x, y = torch.randn(batch, seq), torch.randn(batch, 2)
        np.testing.assert_allclose(session.run(None, {"x": x.numpy(), "y": y.numpy()})[0],
                                   model(x, y).numpy(), rtol=1e-5, atol=1e-5)


def test_static_axes_and_exports_without_dynamic_axes_stay_silent():
    _, said = _export(SumOverRange(), (torch.randn(2, 3),), {"x": {0: "batch"}})
    assert said == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        oxport.export(ViewWithInt(), (torch.randn(3, 4),), io.BytesIO())
    assert not [w for w in caught if str(w.message).startswith("oxport:")]


def test_tensor_conversions_are_left_as_torch_made_them_after_an_export():
    _export(ViewWithInt(), (torch.randn(3, 4),), {"x": {0: "batch"}})
    for name in ("__int__", "__index__", "__float__", "__bool__", "item"):
        assert name not in torch.Tensor.__dict__
    assert int(torch.tensor(3)) == 3 and [1, 2, 3][torch.tensor(1)] == 2


@pytest.mark.slow
def test_sews_branch_on_its_upsampled_length_warns():
    """transformers' SEW pads its upsampled frames when they are fewer than its input frames
    (an ``if`` on two sizes of the samples axis): the trace keeps the branch it took."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.SEWModel(transformers.SEWConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, squeeze_factor=2)).eval()
    # 440 samples: 43 frames, upsampled to 42, padded to 43.
    _, said = _export(model, ({"input_values": torch.randn(2, 440), "return_dict": False},),
                      {"input_values": {0: "batch", 1: "samples"}})
    assert [str(w.message).split(" (an if")[0] for w in said] == [
        f"oxport: a Python condition at {transformers.models.sew.modeling_sew.__file__}(471): "
        "forward"]


class Meeting(nn.Module):
    """A model with a dynamic-safe forward that waits twice for another thread."""

    def __init__(self, meet) -> None:
        super().__init__()
        self.meet = meet

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.meet.wait()
        self.meet.wait()
        return x.view(x.size(0) * 2, -1)


def test_another_threads_trace_is_not_recorded_into_an_export():
    """While an export traces, another thread traces a model that bakes a size with
    ``torch.jit.trace``: the export stays silent and the other trace works as without it."""
    import threading

    meet = threading.Barrier(2, timeout=60)
    said: list = []

    def export() -> None:
        said.extend(_export(Meeting(meet), (torch.randn(2, 4),), {"x": {0: "batch"}})[1])

    def baking(x: torch.Tensor) -> torch.Tensor:
        return x.view(int(x.size(0)) * 2, -1)

    thread = threading.Thread(target=export)
    thread.start()
    meet.wait()  # the export is tracing now
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(baking, torch.randn(3, 4))
    meet.wait()
    thread.join()
    assert said == []
    assert traced(torch.randn(3, 4)).shape == (6, 2)
