"""The random-model fuzzer, a fixed-seed run through each front end (about a minute).

Each model either raises a clear oxport error or gives a file that passes the full
checker, runs in ONNX Runtime and matches eager at the export size and at a second size
of its dynamic axes (see ``tests/fuzz``). The TorchScript front end (``dynamo=False``)
runs :data:`MODELS` models, the torch.export one (``dynamo=True``, slower to capture)
:data:`DYNAMO_MODELS`. The long run is a command, documented in ``docs/fuzzing.md``:
``python -m tests.fuzz --models 10000 --front-end both``. The regression tests below
are the smallest models of defects the fuzzer found.
"""

from __future__ import annotations

import collections
import io
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

import oxport
from tests.fuzz.generator import generate
from tests.fuzz.runner import DEFECTS, check

MODELS = 300
DYNAMO_MODELS = 150
OPSETS = (13, 17, 20)
#: Models per front end.
RUNS = {"trace": MODELS, "dynamo": DYNAMO_MODELS}


@pytest.fixture(scope="module", params=list(RUNS))
def outcomes(request):
    front_end = request.param
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [check(generate(f"ci-{i}"), OPSETS[i % len(OPSETS)], front_end)
                for i in range(RUNS[front_end])]


def test_no_silent_wrong_output_invalid_model_or_crash(outcomes):
    defects = [o for o in outcomes if o.kind in DEFECTS]
    assert not defects, "\n\n".join(o.report() for o in defects)


def test_the_run_exercises_exports_and_dynamic_axes(outcomes):
    models = len(outcomes)
    kinds = collections.Counter(o.kind for o in outcomes)
    assert kinds["ok"] >= 0.9 * models, kinds
    checked_twice = [o for o in outcomes if o.kind == "ok" and o.case.second_inputs is not None]
    assert len(checked_twice) >= models // 3
    dtypes = {t.dtype for o in outcomes for t in o.case.inputs}
    assert len(dtypes) == 9, dtypes  # float16/32/64, int8-int64, uint8, bool
    assert any(t.dim() == 0 for o in outcomes for t in o.case.inputs)


def test_a_model_is_its_seed():
    first, again = generate("ci-7"), generate("ci-7")
    assert first.source == again.source and first.dynamic_axes == again.dynamic_axes
    assert all((a == b).all() for a, b in zip(first.inputs, again.inputs))


# -- what the fuzzer found ------------------------------------------------------------------
def _matches_eager_in_ort(model: torch.nn.Module, example: torch.Tensor, opset: int,
                          *others: torch.Tensor, **options: object) -> None:
    """Export ``model`` at ``example`` through dynamo=True; ONNX Runtime must give eager's
    outputs at ``example`` and at each of ``others``."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oxport.export(model, (example,), buffer, dynamo=True, opset_version=opset,
                      input_names=["x"], **options)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for x in (example, *others):
        got = session.run(None, {"x": x.numpy()})
        want = model(x)
        want = list(want) if isinstance(want, tuple) else [want]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.dtype == b.numpy().dtype and a.shape == tuple(b.shape), (a, b)
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-6)


class _MaskThenNarrow(torch.nn.Module):
    """A mask's data-dependent length, then narrow: torch.export asserts ``u0 >= 1 and
    u0 + 1 >= 0`` with ``operator.and_`` on SymBools (export-181, export-244)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[x > 0].narrow(0, 1, 1)


@pytest.mark.parametrize("opset", [13, 17, 20])
def test_runtime_asserts_joined_with_and_are_dropped(opset: int) -> None:
    torch.manual_seed(0)
    x = torch.tensor([[0.5, -1.0, 2.0], [3.0, -0.5, 1.5]])
    again = torch.tensor([[-1.0, 4.0, 5.0], [-2.0, -3.0, 0.25]])  # 3 kept, not 4
    _matches_eager_in_ort(_MaskThenNarrow(), x, opset, again)


class _FlattenThenUnbind(torch.nn.Module):
    """``reshape(n, -1)`` of an ``(n, 1)`` input, then ``unbind(1)``: torch.export proves
    the last size is 1, the Reshape's output leaves it unknown (export-424)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.reshape(x.size(0), -1)
        return flat.unbind(1)[0], flat


@pytest.mark.parametrize("opset", [13, 20])
def test_sizes_torch_export_proved_fill_what_a_symbolic_left_unknown(opset: int) -> None:
    torch.manual_seed(0)
    _matches_eager_in_ort(_FlattenThenUnbind(), torch.randn(3, 1), opset, torch.randn(5, 1),
                          dynamic_axes={"x": [0]})


class _EmptyFlatten(torch.nn.Module):
    """An empty slice, flattened: torch.export writes ``view(…, [2, 0, 3])``, whose 0 a
    Reshape without ``allowzero`` reads as "copy the input's dim" (ONNX shape inference:
    ``Reshape: Invalid position of 0`` at opset 13; a wrong shape elsewhere)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        empty = x[:, 5:]
        return empty.unsqueeze(0).flatten(0, 1), empty.flatten(0, 1)


@pytest.mark.parametrize("opset", [9, 13, 17, 20])
@pytest.mark.parametrize("dynamo", [False, True])
def test_an_empty_dim_survives_view_and_flatten(opset: int, dynamo: bool) -> None:
    model, x = _EmptyFlatten(), torch.randn(2, 3, 3)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oxport.export(model, (x,), buffer, dynamo=dynamo, opset_version=opset,
                      input_names=["x"], dynamic_axes={"x": [0]})
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for inputs in (x, torch.randn(4, 3, 3)):
        feeds = {i.name: inputs.numpy() for i in session.get_inputs()}
        got = session.run(None, feeds)
        assert [a.shape for a in got] == [tuple(t.shape) for t in model(inputs)]


class _SplitByARunTimeSize(torch.nn.Module):
    """A split size computed from a dynamic axis, as torch.export may write a chunk along
    one (``split(ceil(n / 3))``, export-1183)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.split((x.shape[0] + 2) // 3)[-1] * 2


@pytest.mark.parametrize("opset", [13, 17, 20])
def test_a_split_size_computed_at_run_time_is_read_at_run_time(opset: int) -> None:
    torch.manual_seed(0)
    # 4 and 2 rows both give two pieces (of 2 and of 1 rows).
    _matches_eager_in_ort(_SplitByARunTimeSize(), torch.randn(4, 3), opset,
                          torch.randn(2, 3), dynamic_axes={"x": [0]})


class _FirstPieceOfOne(torch.nn.Module):
    """``split(4)`` of an axis of size 2: one piece when captured, eager's first 4 at
    size 5 (export-264)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.split(x, 4, 1)[0] * 2


@pytest.mark.parametrize("opset", [9, 13, 20])
@pytest.mark.parametrize("dynamo", [False, True])
def test_a_split_of_one_piece_is_eager_s_first_piece_at_any_size(opset: int,
                                                                  dynamo: bool) -> None:
    torch.manual_seed(0)
    model, x = _FirstPieceOfOne(), torch.randn(3, 2)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oxport.export(model, (x,), buffer, dynamo=dynamo, opset_version=opset,
                      input_names=["x"], dynamic_axes={"x": [1]})
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for inputs in (x, torch.randn(3, 5), torch.randn(3, 1)):
        np.testing.assert_allclose(session.run(None, {"x": inputs.numpy()})[0],
                                   model(inputs).numpy(), rtol=1e-6)
