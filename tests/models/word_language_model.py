"""The RNN language model of pytorch/examples ``word_language_model/model.py``.

Embedding, dropout, a multi-layer LSTM/GRU/RNN (optionally bidirectional, which the
example does not offer), dropout, a linear decoder and log-softmax over the vocabulary.
``forward(tokens, hidden)`` takes ``(seq, batch)`` token ids and the recurrent state
and returns the log-probabilities, shaped ``(seq * batch, ntoken)``, and the new state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

Hidden = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


class RNNModel(nn.Module):
    """``rnn_type`` is one of ``LSTM``, ``GRU``, ``RNN_TANH``, ``RNN_RELU``."""

    def __init__(self, rnn_type: str, ntoken: int, ninp: int, nhid: int, nlayers: int,
                 dropout: float = 0.5, tie_weights: bool = False,
                 bidirectional: bool = False) -> None:
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout,
                                             bidirectional=bidirectional)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout,
                              bidirectional=bidirectional)
        directions = 2 if bidirectional else 1
        self.decoder = nn.Linear(nhid * directions, ntoken)
        if tie_weights:
            if nhid * directions != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers
        self.directions = directions
        self.init_weights()

    def init_weights(self) -> None:
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, tokens: torch.Tensor, hidden: Hidden) -> tuple[torch.Tensor, Hidden]:
        output, hidden = self.rnn(self.embed(tokens), hidden)
        return self.decode(output), hidden

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.drop(self.encoder(tokens))

    def decode(self, output: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of the RNN's outputs, flattened to ``(seq * batch, ntoken)``."""
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1)

    def init_hidden(self, bsz: int) -> Hidden:
        """Zero states for a batch of ``bsz`` sequences."""
        weight = next(self.parameters())
        shape = (self.nlayers * self.directions, bsz, self.nhid)
        if self.rnn_type == "LSTM":
            return weight.new_zeros(shape), weight.new_zeros(shape)
        return weight.new_zeros(shape)
