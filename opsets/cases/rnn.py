"""Test cases of the ``oxport.rnn`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.rnn import pack


class _WithStates(torch.nn.Module):
    """Calls a recurrent layer with flat initial states: (x, h0) or (x, h0, c0)."""

    def __init__(self, rnn: torch.nn.RNNBase) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor, *states: torch.Tensor):
        return self.rnn(x, tuple(states) if len(states) == 2 else states[0])


class _CellOnParameters(torch.nn.Module):
    """A cell op on an nn cell's parameters: constant weights in a scripted graph (scripting
    the nn cells themselves adds their input checks and unbatched-input branches)."""

    def __init__(self, cell: torch.nn.RNNCellBase) -> None:
        super().__init__()
        self.cell = cell


class _LSTMCell(_CellOnParameters):
    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        cell = self.cell
        return torch.lstm_cell(x, [h, c], cell.weight_ih, cell.weight_hh, cell.bias_ih,
                               cell.bias_hh)


class _GRUCell(_CellOnParameters):
    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        cell = self.cell
        return torch.gru_cell(x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)


class _TanhCell(_CellOnParameters):
    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        cell = self.cell
        return torch.rnn_tanh_cell(x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                   cell.bias_hh)


def _lstm_cell(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w_ih: torch.Tensor,
               w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor):
    return torch.lstm_cell(x, [h, c], w_ih, w_hh, b_ih, b_hh)


def _gru_cell_one_bias(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor,
                       w_hh: torch.Tensor, b_ih: torch.Tensor) -> torch.Tensor:
    return torch.gru_cell(x, h, w_ih, w_hh, b_ih)


def _rnn_relu_cell(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor,
                   w_hh: torch.Tensor) -> torch.Tensor:
    return torch.rnn_relu_cell(x, h, w_ih, w_hh)


# Cases without initial states start from aten::zeros of a run-time batch size, which
# needs ConstantOfShape (opset 9); below 9 the walker leaves it out, as nothing reads it.
pack.case("aten::lstm", _WithStates(torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)),
          (5, 2, 3), (4, 2, 4), (4, 2, 4), name="states_2layers_bidirectional")
pack.case("aten::lstm", torch.nn.LSTM(3, 4, bias=False, batch_first=True), (2, 5, 3),
          name="batch_first_no_bias_no_states")
pack.case("aten::lstm", _WithStates(torch.nn.LSTM(3, 4, num_layers=2)), (5, 2, 3), (2, 2, 4),
          (2, 2, 4), name="weights_as_inputs", min_opset=9,
          export_kwargs={"keep_initializers_as_inputs": True})
pack.case("aten::lstm", torch.nn.LSTM(3, 4, num_layers=2, dropout=0.5), (5, 2, 3),
          name="training_dropout", training=True, check="shape", min_opset=12)
pack.case("aten::gru", _WithStates(torch.nn.GRU(3, 4, num_layers=2, bidirectional=True)),
          (5, 2, 3), (4, 2, 4), name="states_2layers_bidirectional")
pack.case("aten::gru", torch.nn.GRU(3, 4, bias=False, batch_first=True), (2, 5, 3),
          name="batch_first_no_bias_no_states")
pack.case("aten::rnn_tanh", _WithStates(torch.nn.RNN(3, 4, num_layers=2)), (5, 2, 3),
          (2, 2, 4), name="states_2layers")
pack.case("aten::rnn_tanh", torch.nn.RNN(3, 4, bidirectional=True, batch_first=True),
          (2, 5, 3), name="batch_first_bidirectional_no_states")
pack.case("aten::rnn_relu", _WithStates(torch.nn.RNN(3, 4, nonlinearity="relu", bias=False,
                                                     bidirectional=True)),
          (5, 2, 3), (2, 2, 4), name="states_bidirectional_no_bias")
pack.case("aten::rnn_relu", torch.nn.RNN(3, 4, num_layers=2, nonlinearity="relu"), (5, 2, 3),
          name="2layers_no_states")
pack.case("aten::lstm_cell", _lstm_cell, (2, 3), (2, 4), (2, 4), (16, 3), (16, 4), (16,), (16,),
          script=True, name="weights_as_inputs")
pack.case("aten::lstm_cell", _LSTMCell(torch.nn.LSTMCell(3, 4)), (2, 3), (2, 4), (2, 4),
          script=True, name="parameters")
pack.case("aten::gru_cell", _GRUCell(torch.nn.GRUCell(3, 4)), (2, 3), (2, 4), script=True,
          name="parameters")
pack.case("aten::gru_cell", _gru_cell_one_bias, (2, 3), (2, 4), (12, 3), (12, 4), (12,),
          script=True, name="one_bias")
pack.case("aten::rnn_tanh_cell", _TanhCell(torch.nn.RNNCell(3, 4)), (2, 3), (2, 4),
          script=True, name="parameters")
pack.case("aten::rnn_relu_cell", _rnn_relu_cell, (2, 3), (2, 4), (4, 3), (4, 4), script=True,
          name="no_bias")


class Packed(torch.nn.Module):
    """A recurrent layer over ``pack_padded_sequence(x, lengths)``, padded back after;
    returns the padded output, the lengths and the final states. ``*states`` are h0 (and
    c0 for an LSTM); none: PyTorch's zeros."""

    def __init__(self, rnn: torch.nn.RNNBase, enforce_sorted: bool = True,
                 padding_value: float = 0.0, total_length: int | None = None) -> None:
        super().__init__()
        self.rnn, self.enforce_sorted = rnn, enforce_sorted
        self.padding_value, self.total_length = padding_value, total_length

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, *states: torch.Tensor):
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        batch_first = self.rnn.batch_first
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first,
                                      enforce_sorted=self.enforce_sorted)
        hx = (states if len(states) == 2 else states[0]) if states else None
        output, final = self.rnn(packed, hx)
        padded, out_lengths = pad_packed_sequence(
            output, batch_first=batch_first, padding_value=self.padding_value,
            total_length=self.total_length)
        return padded, out_lengths, final


def _lengths(*values: int):
    return lambda: torch.tensor(values)


_PACKING = ("aten::_pack_padded_sequence", "aten::_pad_packed_sequence")
#: torch.export cannot size a packed sequence: its batch sizes are data.
_DATA_SIZED = "a packed sequence's batch sizes are data, which torch.export cannot size"
# Below opset 10 the padded output keeps the input's time length (as torch.onnx's does), so
# the cases there give the longest sequence the whole length; unsorted lengths need TopK on
# integers (opset 11).
pack.case([*_PACKING, "aten::lstm"],
          Packed(torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)),
          (3, 5, 3), _lengths(5, 4, 2), (4, 3, 4), (4, 3, 4), name="packed_states",
          min_opset=9, not_exportable=_DATA_SIZED)
pack.case([*_PACKING, "aten::gru"], Packed(torch.nn.GRU(3, 4), enforce_sorted=False),
          (6, 3, 3), _lengths(2, 5, 3), name="packed_unsorted_shorter", min_opset=11,
          not_exportable=_DATA_SIZED)
pack.case([*_PACKING, "aten::rnn_tanh"],
          Packed(torch.nn.RNN(3, 4, bidirectional=True), padding_value=-1.0, total_length=7),
          (5, 3, 3), _lengths(5, 3, 1), (2, 3, 4), name="packed_padding_value_total_length",
          min_opset=11, not_exportable=_DATA_SIZED)
pack.case([*_PACKING, "aten::rnn_relu"],
          Packed(torch.nn.RNN(3, 4, num_layers=2, nonlinearity="relu", batch_first=True)),
          (2, 4, 3), _lengths(4, 2), name="packed_2layers", min_opset=9,
          not_exportable=_DATA_SIZED)
