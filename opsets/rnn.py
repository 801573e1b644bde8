"""Recurrent layers: LSTM, GRU and RNN (tanh, relu), whole layers and single cells.

Each PyTorch layer becomes one ONNX LSTM/GRU/RNN node per layer, both directions in one
node. PyTorch and ONNX order the gates differently (LSTM i,f,g,o vs i,o,f,c; GRU r,z,n vs
z,r,h), so the weights are reordered and stacked per direction: on the tensors at export
time when the weights are constants, with Split/Concat nodes when they are run-time values
(weights passed as inputs, ``export_params=False``, ``keep_initializers_as_inputs``).

Packed sequences never exist in the ONNX graph: ``aten::_pack_padded_sequence`` hands on
the padded, time-major batch in place of the packed data and the lengths (int32) in place
of the batch sizes; a layer over them passes the lengths as the ONNX node's
``sequence_lens`` (ONNX Runtime stops each sequence at its length and leaves zeros after
it), and ``aten::_pad_packed_sequence`` turns the padded output back into PyTorch's.
"""

from __future__ import annotations

import dataclasses

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value

pack = OpPack("oxport.rnn", cases="oxport.opsets.cases.rnn")


@dataclasses.dataclass(frozen=True)
class _Kind:
    """One recurrent operator: its ONNX op, PyTorch's gate chunks in ONNX order, and for
    RNN its activation."""

    op: str
    order: tuple[int, ...]
    activation: str | None = None

    @property
    def gates(self) -> int:
        return len(self.order)

    @property
    def outputs(self) -> int:
        return 3 if self.op == "LSTM" else 2


_LSTM = _Kind("LSTM", (0, 3, 1, 2))
_GRU = _Kind("GRU", (1, 0, 2))
_RNN_TANH = _Kind("RNN", (0,), "Tanh")
_RNN_RELU = _Kind("RNN", (0,), "Relu")


# -- weights ------------------------------------------------------------------------------
def _stack_weights(g, kind: _Kind, directions: list[list[Value | None]]
                   ) -> tuple[Value, Value, Value | None]:
    """ONNX W, R and B (None without biases) from ``[w_ih, w_hh, b_ih, b_hh]`` per direction."""
    has_bias = any(not sh._is_none(b) for d in directions for b in d[2:])
    tensors = [[sh.bakeable_tensor(g, v) for v in d[:4 if has_bias else 2]] for d in directions]
    if all(t is not None for d in tensors for t in d):
        w = torch.stack([_reorder(d[0], kind) for d in tensors])
        r = torch.stack([_reorder(d[1], kind) for d in tensors])
        if not has_bias:
            return g.constant(w), g.constant(r), None
        b = torch.stack([torch.cat([_reorder(d[2], kind), _reorder(d[3], kind)])
                         for d in tensors])
        return g.constant(w), g.constant(r), g.constant(b)
    w = _stack(g, [_reorder_op(g, d[0], kind) for d in directions])
    r = _stack(g, [_reorder_op(g, d[1], kind) for d in directions])
    if not has_bias:
        return w, r, None
    b = _stack(g, [g.op("Concat", _reorder_op(g, d[2], kind), _reorder_op(g, d[3], kind),
                        axis_i=0) for d in directions])
    return w, r, b


def _reorder(tensor: torch.Tensor, kind: _Kind) -> torch.Tensor:
    if kind.gates == 1:
        return tensor
    chunks = tensor.chunk(kind.gates)
    return torch.cat([chunks[i] for i in kind.order])


def _reorder_op(g, value: Value, kind: _Kind) -> Value:
    if kind.gates == 1:
        return value
    if g.opset >= 18:
        chunks = g.op("Split", value, axis_i=0, num_outputs_i=kind.gates, outputs=kind.gates)
    else:
        chunks = g.op("Split", value, axis_i=0, outputs=kind.gates)
    return g.op("Concat", *[chunks[i] for i in kind.order], axis_i=0)


def _stack(g, values: list[Value]) -> Value:
    parts = [sh._unsqueeze_helper(g, v, [0]) for v in values]
    return parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis_i=0)


def _fill_bias(g, directions: list[list[Value | None]], kind: _Kind, hidden: int,
               dtype: torch.dtype) -> list[list[Value | None]]:
    """Give a lone bias (b_ih without b_hh or the reverse) a zero partner."""
    zeros = g.constant(torch.zeros(kind.gates * hidden, dtype=dtype))
    filled = []
    for d in directions:
        biases = d[2:]
        if any(not sh._is_none(b) for b in biases):
            biases = [zeros if sh._is_none(b) else b for b in biases]
        filled.append([*d[:2], *biases])
    return filled


def _hidden_size(op: str, w_hh: Value) -> int:
    size = sh._get_tensor_dim_size(w_hh, 1)
    if size is None:
        sh._unimplemented(op, "the hidden size is unknown (w_hh has no static shape)")
    return size


# -- layers ---------------------------------------------------------------------------------
def _layer(g, kind: _Kind, x: Value, weights: tuple[Value, Value, Value | None],
           states: list[Value | None], hidden: int, bidirectional: bool,
           lengths: Value | None = None) -> tuple[Value, ...]:
    """One ONNX recurrent node: (Y [seq, dirs, batch, hidden], Y_h[, Y_c]); ``states`` are
    the initial [h0] or [h0, c0] (None: zeros), ``lengths`` the int32 sequence lengths."""
    inputs = [x, *weights, lengths, *states]
    while inputs[-1] is None:
        inputs.pop()
    attrs = {}
    if kind.op == "GRU":  # PyTorch applies the reset gate after the recurrent product
        attrs["linear_before_reset_i"] = 1
    if kind.activation:
        attrs["activations_s"] = [kind.activation] * (2 if bidirectional else 1)
    return g.op(kind.op, *inputs, hidden_size_i=hidden, outputs=kind.outputs,
                direction_s="bidirectional" if bidirectional else "forward", **attrs)


def _merge_directions(g, y: Value, num_directions: int) -> Value:
    """[seq, dirs, batch, hidden] -> [seq, batch, dirs * hidden]."""
    if num_directions == 1:
        return sh._squeeze_helper(g, y, [1])
    y = g.op("Transpose", y, perm_i=[0, 2, 1, 3])
    return sh._reshape_helper(g, y, g.constant(torch.tensor([0, 0, -1])))


def _is_zeros(ts_value) -> bool:
    """Whether the TorchScript value is a fresh zeros tensor (PyTorch's default state)."""
    return ts_value.node().kind() in ("aten::zeros", "aten::zeros_like", "aten::new_zeros")


def _initial_states(g, kind: _Kind, hx: Value, position: int) -> list[Value | None]:
    """[h0] or [h0, c0] (input ``position`` of the node); None stands for zeros (ONNX's
    default initial state)."""
    ts_hx = g.original_node.inputsAt(position)
    if kind.op == "LSTM":
        states, ts_states = sh._unpack_list(hx), list(ts_hx.node().inputs())
    else:
        states, ts_states = [hx], [ts_hx]
    return [None if _is_zeros(ts) else v for v, ts in zip(states, ts_states)]


def _rnn(g, kind: _Kind, input: Value, hx: Value, params: Value, has_biases: bool,
         num_layers: int, dropout: float, train: bool, bidirectional: bool,
         batch_first: bool, lengths: Value | None = None) -> tuple[Value, ...]:
    """A whole (multi-layer, maybe bidirectional) recurrent layer; returns
    (output, h_n[, c_n]) as PyTorch does. With ``lengths`` (a packed sequence), the input
    is the padded time-major batch and each sequence stops at its length."""
    op = g.original_node.kind()
    params = sh._unpack_list(params)
    num_directions = 2 if bidirectional else 1
    stride = 4 if has_biases else 2
    if len(params) != num_layers * num_directions * stride:
        if kind.op == "LSTM" and len(params) == num_layers * num_directions * (stride + 1):
            sh._unimplemented(op, "LSTM with proj_size > 0: ONNX LSTM has no projection")
        sh._unimplemented(op, f"{len(params)} weights do not match {num_layers} layers, "
                              f"{num_directions} directions and has_biases={has_biases}")
    training_dropout = train and dropout > 0 and num_layers > 1
    if training_dropout and g.opset < 12:
        sh._onnx_opset_unsupported(f"{op} with dropout in training mode", g.opset, 12)
    states = _initial_states(g, kind, hx, 1 if lengths is None else 2)
    hidden = _hidden_size(op, params[1])
    x = g.op("Transpose", input, perm_i=[1, 0, 2]) if batch_first else input
    finals: list[list[Value]] = [[] for _ in range(kind.outputs - 1)]
    for layer in range(num_layers):
        start = layer * num_directions
        directions = [params[i * stride:(i + 1) * stride] + [None] * (4 - stride)
                      for i in range(start, start + num_directions)]
        weights = _stack_weights(g, kind, directions)
        layer_states = [s if s is None or num_layers == 1 else
                        sh._slice_helper(g, s, [0], [start], [start + num_directions])
                        for s in states]
        y, *last = _layer(g, kind, x, weights, layer_states, hidden, bidirectional, lengths)
        x = _merge_directions(g, y, num_directions)
        if training_dropout and layer < num_layers - 1:
            x, _mask = g.op("Dropout", x, g.constant(torch.tensor(dropout, dtype=torch.float32)),
                            g.constant(torch.tensor(True)), outputs=2)
        for final, state in zip(finals, last):
            final.append(state)
    output = g.op("Transpose", x, perm_i=[1, 0, 2]) if batch_first else x
    if lengths is not None:  # the padded stand-in for the packed data
        output.setType(Type.tensor(x.type().dtype(), [None, None, num_directions * hidden]))
    return (output, *[f[0] if len(f) == 1 else g.op("Concat", *f, axis_i=0) for f in finals])


def _rnn_symbolic(kind: _Kind, name: str):
    @sh.parse_args("v", "v", "v", "b", "i", "f", "b", "b", "b")
    def padded(g, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
               batch_first):
        return _rnn(g, kind, input, hx, params, has_biases, num_layers, dropout, train,
                    bidirectional, batch_first)

    @sh.parse_args("v", "v", "v", "v", "b", "i", "f", "b", "b")
    def packed(g, data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
               bidirectional):
        _check_packed_by_us(g, f"aten::{name}", 1)
        return _rnn(g, kind, data, hx, params, has_biases, num_layers, dropout, train,
                    bidirectional, batch_first=False, lengths=batch_sizes)

    def symbolic(g, *args: Value) -> tuple[Value, ...]:
        # The ``.data`` overload (data, batch_sizes, hx, params, ...) of packed sequences
        # has the weights where the ``.input`` overload has has_biases.
        if len(args) > 3 and sh._is_packed_list(args[3]):
            return packed(g, *args)
        return padded(g, *args)
    symbolic.__name__ = name
    hx, out = (("Tensor[] hx", "(Tensor, Tensor, Tensor)") if name == "lstm"
               else ("Tensor hx", "(Tensor, Tensor)"))
    symbolic.__doc__ = (f"{name}.input(Tensor input, {hx}, Tensor[] params, bool has_biases, "
                        "int num_layers, float dropout, bool train, bool bidirectional, "
                        f"bool batch_first) -> {out}\n"
                        f"{name}.data(Tensor data, Tensor batch_sizes, {hx}, Tensor[] params, "
                        "bool has_biases, int num_layers, float dropout, bool train, "
                        f"bool bidirectional) -> {out}\n\n"
                        f"One ONNX {kind.op} per layer; over a packed sequence (``.data``), "
                        "with the lengths as ``sequence_lens``.")
    return symbolic


pack.symbolic("aten::lstm", since=7)(_rnn_symbolic(_LSTM, "lstm"))
pack.symbolic("aten::gru", since=7)(_rnn_symbolic(_GRU, "gru"))
pack.symbolic("aten::rnn_tanh", since=7)(_rnn_symbolic(_RNN_TANH, "rnn_tanh"))
pack.symbolic("aten::rnn_relu", since=7)(_rnn_symbolic(_RNN_RELU, "rnn_relu"))


# -- packed sequences -----------------------------------------------------------------------
def _check_packed_by_us(g, op: str, position: int) -> None:
    """Decline batch sizes that :func:`pack_padded_sequence` did not make (a PackedSequence
    built by hand holds truly packed data, which has no ONNX form)."""
    producer = g.original_node.inputsAt(position).node().kind()
    if producer != "aten::_pack_padded_sequence":
        sh._unimplemented(op, f"a packed sequence whose batch sizes come from {producer}; "
                              f"build it with torch.nn.utils.rnn.pack_padded_sequence (or "
                              f"pack_sequence)")


@pack.symbolic("aten::_pack_padded_sequence", since=9)
@sh.parse_args("v", "v", "b")
def _pack_padded_sequence(g, input: Value, lengths: Value, batch_first: bool
                          ) -> tuple[Value, Value]:
    """_pack_padded_sequence(Tensor input, Tensor lengths, bool batch_first) -> (Tensor, Tensor)

    The padded batch, time-major, for the packed data; the lengths as int32 for the
    batch sizes (read only by the recurrent layers and ``_pad_packed_sequence``)."""
    rank = input.type().dim()
    if rank is None or rank < 2:
        sh._unimplemented("aten::_pack_padded_sequence", "an input of unknown rank or of "
                                                         "rank < 2")
    features = list(sh._get_tensor_sizes(input) or [None] * rank)[2:]
    if batch_first:
        input = g.op("Transpose", input, perm_i=[1, 0, *range(2, rank)])
    input.setType(Type.tensor(input.type().dtype(), [None, None, *features]))
    lengths = sh.cast_to(g, lengths, torch.int32).setType(Type.tensor(torch.int32, [None]))
    return input, lengths


@pack.symbolic("aten::_pad_packed_sequence", since=9)
@sh.parse_args("v", "v", "b", "f", "v")
def _pad_packed_sequence(g, data: Value, batch_sizes: Value, batch_first: bool,
                         padding_value: float, total_length: Value) -> tuple[Value, Value]:
    """_pad_packed_sequence(Tensor data, Tensor batch_sizes, bool batch_first, Scalar padding_value, int total_length) -> (Tensor, Tensor)

    The padded output and the int64 lengths. ONNX's recurrent nodes leave zeros after
    each sequence; another ``padding_value`` fills them by a mask. The time axis keeps the
    padded input's length below opset 10 (as torch.onnx does), from 10 it is cut to the
    longest sequence, or to a constant ``total_length``."""
    op = "aten::_pad_packed_sequence"
    _check_packed_by_us(g, op, 1)
    if padding_value != 0 and g.opset < 11:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 11, "a padding_value other than 0")
    if g.opset >= 10:
        data = _cut_time(g, data, batch_sizes, total_length)
    if padding_value != 0:
        data = _fill_past_lengths(g, data, batch_sizes, padding_value)
    if batch_first:
        data = g.op("Transpose", data, perm_i=[1, 0, 2])
    return data, sh.cast_to(g, batch_sizes, torch.int64)


def _fill_past_lengths(g, data: Value, lengths: Value, value: float) -> Value:
    """``data`` [time, batch, features] with ``value`` at every step past its sequence's
    length."""
    steps = g.op("Range", g.constant(torch.tensor(0, dtype=torch.int32)), sh.cast_to(
        g, g.op("Gather", g.op("Shape", data), g.constant(torch.tensor(0)), axis_i=0),
        torch.int32), g.constant(torch.tensor(1, dtype=torch.int32)))
    valid = g.op("Less", sh._unsqueeze_helper(g, steps, [1]),
                 sh._unsqueeze_helper(g, lengths, [0]))
    return g.op("Where", sh._unsqueeze_helper(g, valid, [2]), data, g.constant(
        torch.tensor(value, dtype=data.type().dtype() or torch.float32)))


def _cut_time(g, data: Value, lengths: Value, total_length: Value) -> Value:
    """``data``'s time axis cut to the longest sequence, or to ``total_length`` when the
    user gave one (a constant; zeros appended when the padded input is shorter)."""
    if g.original_node.inputsAt(4).node().kind() == "prim::Constant":
        total = g.constant(torch.tensor([int(sh.constant_item(total_length))]))
        zeros = g.op("ConstantOfShape", g.op("Concat", total, sh._slice_helper(
            g, g.op("Shape", data), [0], [1], [3]), axis_i=0),
            value_t=torch.zeros(1, dtype=data.type().dtype() or torch.float32))
        data, end = g.op("Concat", data, zeros, axis_i=0), total
    else:
        end = sh.cast_to(g, sh.reduce_helper(g, "ReduceMax", lengths, [0], keepdims_i=1),
                         torch.int64)
    return g.op("Slice", data, g.constant(torch.tensor([0])), end, g.constant(torch.tensor([0])))


# -- cells ----------------------------------------------------------------------------------
def _cell(g, kind: _Kind, input: Value, states: list[Value], w_ih: Value, w_hh: Value,
          b_ih: Value | None, b_hh: Value | None) -> tuple[Value, ...]:
    """One time step: an ONNX node over a sequence of length 1; returns the new states."""
    hidden = _hidden_size(g.original_node.kind(), w_hh)
    directions = _fill_bias(g, [[w_ih, w_hh, b_ih, b_hh]], kind, hidden,
                            w_hh.type().dtype() or torch.float32)
    weights = _stack_weights(g, kind, directions)
    x = sh._unsqueeze_helper(g, input, [0])
    initial = [sh._unsqueeze_helper(g, s, [0]) for s in states]
    _y, *last = _layer(g, kind, x, weights, initial, hidden, bidirectional=False)
    return tuple(sh._squeeze_helper(g, s, [0]) for s in last)


@pack.symbolic("aten::lstm_cell", since=7)
def lstm_cell(g, input: Value, hx: Value, w_ih: Value, w_hh: Value, b_ih: Value | None = None,
              b_hh: Value | None = None) -> tuple[Value, Value]:
    """lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> (Tensor, Tensor)

    ``(h, c)`` after one LSTM step."""
    return _cell(g, _LSTM, input, sh._unpack_list(hx), w_ih, w_hh, b_ih, b_hh)


def _single_state_cell(kind: _Kind, name: str):
    def symbolic(g, input: Value, hx: Value, w_ih: Value, w_hh: Value,
                 b_ih: Value | None = None, b_hh: Value | None = None) -> Value:
        (h,) = _cell(g, kind, input, [hx], w_ih, w_hh, b_ih, b_hh)
        return h
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, "
                        "Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor\n\n"
                        f"The hidden state after one step (ONNX {kind.op}).")
    return symbolic


pack.symbolic("aten::gru_cell", since=7)(_single_state_cell(_GRU, "gru_cell"))
pack.symbolic("aten::rnn_tanh_cell", since=7)(_single_state_cell(_RNN_TANH, "rnn_tanh_cell"))
pack.symbolic("aten::rnn_relu_cell", since=7)(_single_state_cell(_RNN_RELU, "rnn_relu_cell"))
