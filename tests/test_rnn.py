"""Recurrent layers end to end: the seeds' LSTM FAQ with dynamic axes, a
word_language_model-style RNNModel, packed sequences, run-time weights, and what the rnn
pack declines.

The op cases in ``opsets/rnn.py`` compare at the traced size; these export with dynamic
sequence and batch axes and run ONNX Runtime at other sizes.
"""

from __future__ import annotations

import io

import onnx
import pytest
import torch
import torch.nn.functional as F

import oxport
from oxport import testing
from oxport.errors import UnsupportedOperatorError
from oxport.opsets.cases.rnn import Packed

RTOL, ATOL = 1e-3, 1e-5


def _session(data: bytes):
    import onnxruntime as ort
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _dims(value_info: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


# -- the seeds' FAQ: "I have exported my lstm model, but its input size seems to be fixed?" --
LAYERS = 4


def _faq_model() -> torch.nn.LSTM:
    torch.manual_seed(0)
    return torch.nn.LSTM(10, 20, num_layers=LAYERS, bidirectional=True).eval()


def _faq_inputs(seq: int, batch: int) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    return (torch.randn(seq, batch, 10),
            (torch.randn(LAYERS * 2, batch, 20), torch.randn(LAYERS * 2, batch, 20)))


def _run_faq(session, model: torch.nn.LSTM, seq: int, batch: int) -> None:
    x, (h0, c0) = _faq_inputs(seq, batch)
    names = [i.name for i in session.get_inputs()]
    actual = session.run(None, dict(zip(names, (x.numpy(), h0.numpy(), c0.numpy()))))
    with torch.no_grad():
        expected = model(x, (h0, c0))
    testing.compare(expected, actual, rtol=RTOL, atol=ATOL, where=f"seq={seq} batch={batch}")


def test_faq_default_export_fixes_the_input_shape() -> None:
    model = _faq_model()
    data = testing.roundtrip_bytes(model, _faq_inputs(5, 3))
    assert _dims(onnx.load_from_string(data).graph.input[0]) == [5, 3, 10]
    _run_faq(_session(data), model, 5, 3)


def test_faq_dynamic_sequence_axis() -> None:
    """The FAQ's own dynamic_axes: only the sequence length varies."""
    model = _faq_model()
    data = testing.roundtrip_bytes(
        model, _faq_inputs(5, 3), input_names=["input", "h0", "c0"],
        output_names=["output", "hn", "cn"],
        dynamic_axes={"input": {0: "sequence"}, "output": {0: "sequence"}})
    assert _dims(onnx.load_from_string(data).graph.input[0]) == ["sequence", 3, 10]
    session = _session(data)
    for seq in (5, 9, 1):
        _run_faq(session, model, seq, 3)


@pytest.mark.parametrize("opset", [7, 13, 20, 26])
def test_faq_dynamic_sequence_and_batch(opset: int) -> None:
    model = _faq_model()
    states = {0: "layers_x_directions", 1: "batch"}
    result = oxport.convert(
        model, _faq_inputs(5, 3), opset_version=opset, input_names=["input", "h0", "c0"],
        output_names=["output", "hn", "cn"],
        dynamic_axes={"input": {0: "sequence", 1: "batch"}, "h0": states, "c0": states,
                      "output": {0: "sequence", 1: "batch"}, "hn": states, "cn": states})
    proto = result.model_proto
    onnx.checker.check_model(proto, full_check=True)
    ops = [node.op_type for node in proto.graph.node]
    assert ops.count("LSTM") == LAYERS
    if opset >= 9:  # weights reordered at export time, not by nodes at run time
        assert "Split" not in ops and "Concat" in ops  # Concat only for the final states
        assert ops.count("Concat") == 2
    session = _session(proto.SerializeToString())
    for seq, batch in ((5, 3), (8, 2), (3, 6)):
        _run_faq(session, model, seq, batch)


# -- word_language_model ------------------------------------------------------------------
class RNNModel(torch.nn.Module):
    """The PyTorch word_language_model example: encoder, recurrent module, decoder."""

    def __init__(self, rnn_type: str, ntoken: int, ninp: int, nhid: int, nlayers: int,
                 dropout: float = 0.5, tie_weights: bool = False,
                 bidirectional: bool = False) -> None:
        super().__init__()
        self.drop = torch.nn.Dropout(dropout)
        self.encoder = torch.nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(torch.nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout,
                                                   bidirectional=bidirectional)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = torch.nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity,
                                    dropout=dropout, bidirectional=bidirectional)
        directions = 2 if bidirectional else 1
        self.decoder = torch.nn.Linear(nhid * directions, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers, self.ntoken = rnn_type, nhid, nlayers, ntoken
        self.directions = directions

    def forward(self, input: torch.Tensor, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int):
        shape = (self.nlayers * self.directions, bsz, self.nhid)
        if self.rnn_type == "LSTM":
            return torch.randn(shape), torch.randn(shape)
        return torch.randn(shape)


WLM_VARIANTS = {  # name: (rnn_type, options)
    "LSTM": ("LSTM", {}),
    "GRU": ("GRU", {}),
    "RNN_TANH": ("RNN_TANH", {}),
    "RNN_RELU": ("RNN_RELU", {}),
    "LSTM_tied": ("LSTM", {"tie_weights": True}),
    "GRU_bidirectional": ("GRU", {"bidirectional": True}),
}


@pytest.mark.parametrize("opset", [13, 17, 20, 26])
@pytest.mark.parametrize("variant", sorted(WLM_VARIANTS))
def test_word_language_model(variant: str, opset: int) -> None:
    torch.manual_seed(0)
    rnn_type, options = WLM_VARIANTS[variant]
    model = RNNModel(rnn_type, ntoken=12, ninp=6, nhid=6, nlayers=2, **options).eval()
    tokens = torch.randint(0, 12, (5, 3))
    hidden = model.init_hidden(3)
    names = ["tokens", "h0", "c0"] if model.rnn_type == "LSTM" else ["tokens", "h0"]
    states = {name: {1: "batch"} for name in names[1:]}
    result = oxport.convert(model, (tokens, hidden), opset_version=opset, input_names=names,
                            dynamic_axes={"tokens": {0: "seq", 1: "batch"}, **states})
    proto = result.model_proto
    onnx.checker.check_model(proto, full_check=True)
    onnx_op = {"LSTM": "LSTM", "GRU": "GRU"}.get(model.rnn_type, "RNN")
    assert [n.op_type for n in proto.graph.node].count(onnx_op) == 2
    session = _session(proto.SerializeToString())
    for seq, batch in ((5, 3), (7, 2)):
        tokens, hidden = torch.randint(0, 12, (seq, batch)), model.init_hidden(batch)
        flat = [tokens, *(hidden if isinstance(hidden, tuple) else (hidden,))]
        actual = session.run(None, {n: t.numpy() for n, t in zip(names, flat)})
        with torch.no_grad():
            expected = model(tokens, hidden)
        testing.compare(expected, actual, rtol=RTOL, atol=ATOL, where=f"{variant} seq={seq}")


@pytest.mark.parametrize("layer", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_batch_first_without_states_follows_the_batch_size(layer: type) -> None:
    """Omitted states (PyTorch's zeros of the traced batch size) leave ONNX's zero default."""
    torch.manual_seed(0)
    model = layer(3, 4, num_layers=2, bidirectional=True, batch_first=True).eval()
    data = testing.roundtrip_bytes(model, (torch.randn(2, 5, 3),), input_names=["x"],
                                   dynamic_axes={"x": {0: "batch", 1: "seq"}})
    assert "ConstantOfShape" not in [n.op_type for n in onnx.load_from_string(data).graph.node]
    session = _session(data)
    for batch, seq in ((2, 5), (4, 3)):
        x = torch.randn(batch, seq, 3)
        with torch.no_grad():
            expected = model(x)
        testing.compare(expected, session.run(None, {"x": x.numpy()}), rtol=RTOL, atol=ATOL)


# -- packed sequences -----------------------------------------------------------------------
_LAYERS = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN_TANH": torch.nn.RNN,
           "RNN_RELU": torch.nn.RNN}


def _packed_model(kind: str, bidirectional: bool, layers: int, batch_first: bool,
                  enforce_sorted: bool = False) -> Packed:
    torch.manual_seed(0)
    options = {"nonlinearity": "relu"} if kind == "RNN_RELU" else {}
    return Packed(_LAYERS[kind](3, 4, num_layers=layers, bidirectional=bidirectional,
                                batch_first=batch_first, **options),
                  enforce_sorted=enforce_sorted).eval()


def _packed_inputs(model: Packed, batch: int, seq: int, states: bool,
                   lengths: list[int]) -> tuple[torch.Tensor, ...]:
    rnn = model.rnn
    x = torch.randn(batch, seq, 3) if rnn.batch_first else torch.randn(seq, batch, 3)
    hx = ()
    if states:
        shape = (rnn.num_layers * (2 if rnn.bidirectional else 1), batch, rnn.hidden_size)
        hx = tuple(torch.randn(shape) for _ in range(2 if isinstance(rnn, torch.nn.LSTM) else 1))
    return (x, torch.tensor(lengths), *hx)


def _export_packed(model: Packed, states: bool, opset: int, exporter=oxport.export,
                   lengths: tuple[int, int, int] = (5, 2, 4)) -> tuple[bytes, list[str]]:
    """Exported at batch 3, sequence 5 with dynamic batch and sequence axes."""
    args = _packed_inputs(model, 3, 5, states, list(lengths))
    names = ["x", "lengths", "h0", "c0"][:len(args)]
    time_batch = {0: "batch", 1: "seq"} if model.rnn.batch_first else {0: "seq", 1: "batch"}
    axes = {"x": time_batch, "lengths": {0: "batch"}, **{n: {1: "batch"} for n in names[2:]}}
    buffer = io.BytesIO()
    extra = {"dynamo": False} if exporter is not oxport.export else {}
    exporter(model, args, buffer, opset_version=opset, input_names=names, dynamic_axes=axes,
             **extra)
    return buffer.getvalue(), names


# (batch, sequence, lengths): the traced size, then a second one whose longest sequence is
# shorter than the padded input (the output is as long as the longest sequence).
_PACKED_SIZES = ((3, 5, [5, 2, 4]), (4, 7, [3, 6, 1, 6]))


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
@pytest.mark.parametrize("states", [False, True], ids=["no_states", "states"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("layers", [1, 2], ids=["1layer", "2layers"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
@pytest.mark.parametrize("kind", sorted(_LAYERS))
def test_packed_sequence_matches_eager_at_a_second_size(kind: str, bidirectional: bool,
                                                        layers: int, batch_first: bool,
                                                        states: bool) -> None:
    model = _packed_model(kind, bidirectional, layers, batch_first)
    data, names = _export_packed(model, states, 17)
    assert not {"PackPadded", "PadPacked"} & {n.op_type for n in onnx.load_from_string(
        data).graph.node}
    session = _session(data)
    for batch, seq, lengths in _PACKED_SIZES:
        inputs = _packed_inputs(model, batch, seq, states, lengths)
        with torch.no_grad():
            expected = model(*inputs)
        actual = session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
        testing.compare(expected, actual, rtol=RTOL, atol=ATOL,
                        where=f"batch={batch} seq={seq}")


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
@pytest.mark.parametrize("opset", [9, 11, 20, 26])
def test_packed_lstm_across_opsets(opset: int) -> None:
    """Sorted lengths (enforce_sorted=True) need no integer TopK, so opset 9 works; there the
    output keeps the padded length, so the longest sequence fills it."""
    model = _packed_model("LSTM", True, 2, True, enforce_sorted=True)
    data, names = _export_packed(model, True, opset, lengths=(5, 4, 2))
    session = _session(data)
    for batch, seq, lengths in ((3, 5, [5, 4, 2]), (4, 7, [7, 6, 6, 1])):
        inputs = _packed_inputs(model, batch, seq, True, lengths)
        with torch.no_grad():
            expected = model(*inputs)
        actual = session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
        testing.compare(expected, actual, rtol=RTOL, atol=ATOL, where=f"opset {opset}")


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_packed_output_is_as_long_as_the_longest_sequence_unlike_torch_onnx() -> None:
    """Intended difference: torch.onnx's padded output keeps the padded input's length;
    PyTorch's (and oxport's, from opset 10) is as long as the longest sequence."""
    model = _packed_model("GRU", False, 1, True)
    inputs = _packed_inputs(model, 2, 6, False, [4, 3])
    with torch.no_grad():
        expected = model(*inputs)
    assert expected[0].shape == (2, 4, 4)
    for exporter, time_length in ((torch.onnx.export, 6), (oxport.export, 4)):
        data, names = _export_packed(model, False, 17, exporter)
        actual = _session(data).run(None, {n: t.numpy() for n, t in zip(names, inputs)})
        assert actual[0].shape == (2, time_length, 4)
    testing.compare(expected, actual, rtol=RTOL, atol=ATOL)


class _HandPacked(torch.nn.Module):
    """A PackedSequence built from its fields, not by pack_padded_sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.GRU(3, 4)

    def forward(self, data: torch.Tensor, batch_sizes: torch.Tensor) -> torch.Tensor:
        packed = torch.nn.utils.rnn.PackedSequence(data, batch_sizes)
        return self.rnn(packed)[0].data


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_packed_sequence_built_by_hand_is_declined_clearly() -> None:
    with pytest.raises(UnsupportedOperatorError, match="pack_padded_sequence"):
        oxport.convert(_HandPacked().eval(), (torch.randn(5, 3), torch.tensor([2, 2, 1])))


# -- weights the user feeds at run time ----------------------------------------------------
def _lstm_and_input() -> tuple[torch.nn.LSTM, torch.Tensor]:
    torch.manual_seed(0)
    return torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).eval(), torch.randn(5, 2, 3)


def test_export_params_false_feeds_weights_at_run_time() -> None:
    model, x = _lstm_and_input()
    data = testing.roundtrip_bytes(model, (x,), export_params=False, opset_version=20)
    stored = {i.name for i in onnx.load_from_string(data).graph.initializer}
    assert not stored & set(dict(model.named_parameters()))
    session = _session(data)
    feeds = {"input": x.numpy(), **{name: p.detach().numpy()
                                    for name, p in model.named_parameters()}}
    assert {i.name for i in session.get_inputs()} == set(feeds)
    with torch.no_grad():
        expected = model(x)
    testing.compare(expected, session.run(None, feeds), rtol=RTOL, atol=ATOL)


def test_initializers_kept_as_inputs_can_be_overridden() -> None:
    model, x = _lstm_and_input()
    data = testing.roundtrip_bytes(model, (x,), keep_initializers_as_inputs=True,
                                   opset_version=20)
    session = _session(data)
    new_weight = torch.randn_like(model.weight_hh_l1_reverse)
    actual = session.run(None, {"input": x.numpy(),
                                "weight_hh_l1_reverse": new_weight.numpy()})
    with torch.no_grad():
        model.weight_hh_l1_reverse.copy_(new_weight)
        expected = model(x)
    testing.compare(expected, actual, rtol=RTOL, atol=ATOL)


# -- declined -------------------------------------------------------------------------------
def test_lstm_projections_are_declined_clearly() -> None:
    model = torch.nn.LSTM(3, 4, proj_size=2).eval()
    with pytest.raises(UnsupportedOperatorError, match="proj_size"):
        oxport.convert(model, (torch.randn(5, 2, 3),))


def test_training_dropout_between_layers_needs_opset_12() -> None:
    model = torch.nn.GRU(3, 4, num_layers=2, dropout=0.5)
    with pytest.raises(UnsupportedOperatorError, match="opset_version >= 12"):
        oxport.convert(model, (torch.randn(5, 2, 3), torch.randn(2, 2, 4)), opset_version=11,
                       training=oxport.TrainingMode.TRAINING)
