"""Recurrent layers: LSTM, GRU and RNN."""

from __future__ import annotations

from oxport import OpPack

pack = OpPack("oxport.rnn")
