"""An unconvertible node fails the export only if the export needs it.

The walker gives a declined node deferred outputs that collect it when materialized: a
value no symbolic reads (the zeros initial state nn.LSTM passes when called without one,
which the rnn symbolic replaces by ONNX's default) is left out. What is needed (used by an
emitted node, a graph output, what fed another needed unconvertible node) and every node
that mutates an input is still reported, all at once.
"""

from __future__ import annotations

import pytest
import torch

import oxport
from oxport import testing
from oxport.errors import UnsupportedOperatorError


def _kinds(model, inputs, opset: int) -> list[str]:
    with pytest.raises(UnsupportedOperatorError) as info:
        oxport.convert(testing.as_module(model), inputs, opset_version=opset)
    return [op.kind for op in info.value.ops]


@pytest.mark.parametrize("opset", [7, 8])
def test_lstm_without_initial_states_below_opset_9(opset: int) -> None:
    """aten::zeros of the run-time batch size needs opset 9, but the LSTM never reads it."""
    import onnxruntime as ort

    torch.manual_seed(0)
    model, x = torch.nn.LSTM(4, 5, num_layers=2).eval(), torch.randn(3, 2, 4)
    session = ort.InferenceSession(testing.roundtrip_bytes(model, (x,), opset_version=opset),
                                   providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = model(x)
    testing.compare(expected, session.run(None, {session.get_inputs()[0].name: x.numpy()}),
                    rtol=1e-4, atol=1e-5)
    assert oxport.unconvertible_ops(model, (x,), opset_version=opset)[1] == []


def test_an_unconvertible_value_a_node_uses_fails() -> None:
    """erf (opset 9) feeds an Add at opset 7."""
    x = torch.randn(3, 4)
    assert _kinds(lambda x: torch.erf(x) + x.sum(), (x,), 7) == ["aten::erf"]
    _, kinds = oxport.unconvertible_ops(
        testing.as_module(lambda x: torch.erf(x) * 2), (x,), opset_version=7)
    assert kinds == ["aten::erf"]


def test_an_unconvertible_graph_output_fails() -> None:
    assert _kinds(lambda x: (x * 2, torch.erf(x)), (torch.randn(3, 4),), 7) == ["aten::erf"]


def test_what_fed_a_needed_unconvertible_node_is_listed_in_walk_order() -> None:
    """cumsum (opset 11) is needed; the erf (opset 9) it reads is listed too, first."""
    kinds = _kinds(lambda x: torch.erf(x).cumsum(0), (torch.randn(3, 4),), 7)
    assert kinds == ["aten::erf", "aten::cumsum"]


def test_an_unconvertible_in_place_op_fails_though_its_output_is_unused() -> None:
    """Its effect reaches the output through the view it mutates, not through its output."""
    def model(x):
        y = x * 1
        y[0].polygamma_(1)
        return y

    assert _kinds(model, (torch.randn(3, 4),), 20) == ["aten::polygamma_"]
