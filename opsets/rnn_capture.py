"""Capture kernels for the recurrent layers: while torch.export captures a model, they stand
in for ``aten::lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` (their ``.input`` overloads),
giving only the outputs' shapes, so each layer stays one node with its sequence axis
dynamic instead of being unrolled over the example's steps. The rnn pack converts them.

A plugin of its own, loaded with every export (kernels must be in place before the
capture), so that the rnn pack itself loads only when a model has such a layer.
"""

from __future__ import annotations

import torch

from oxport import OpPack

pack = OpPack("oxport.rnn-capture")


def _layer_outputs(input: torch.Tensor, hidden: torch.Tensor, bidirectional: bool
                   ) -> torch.Tensor:
    """A whole layer's output, empty: the input's shape with the last size one hidden state
    per direction (an LSTM's projection size, if it has one)."""
    sizes = list(input.shape)
    sizes[-1] = hidden.size(2) * (2 if bidirectional else 1)
    return input.new_empty(sizes)


@pack.capture_kernel("aten::lstm.input")
def lstm_capture(input: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor],
                 has_biases: bool, num_layers: int, dropout: float, train: bool,
                 bidirectional: bool, batch_first: bool
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """torch.export keeps the LSTM whole, its sequence axis dynamic, instead of unrolling it
    over the example's steps."""
    h0, c0 = hx
    return _layer_outputs(input, h0, bidirectional), torch.empty_like(h0), torch.empty_like(c0)


def _single_state_capture(input: torch.Tensor, hx: torch.Tensor, params: list[torch.Tensor],
                          has_biases: bool, num_layers: int, dropout: float, train: bool,
                          bidirectional: bool, batch_first: bool
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """GRU and RNN kept whole, as :func:`lstm_capture` keeps the LSTM."""
    return _layer_outputs(input, hx, bidirectional), torch.empty_like(hx)


for _name in ("gru", "rnn_tanh", "rnn_relu"):
    pack.capture_kernel(f"aten::{_name}.input")(_single_state_capture)
