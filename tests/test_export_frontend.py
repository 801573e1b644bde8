"""The torch.export front end (``dynamo=True``, or an ``ExportedProgram`` as the model).

Models go through ``torch.export.export`` and the same op packs as the TorchScript path;
each exported model runs in ONNX Runtime against eager PyTorch at the captured shape and
at a second size of every dynamic axis (``oxport.diagnose.verification.verify``).
"""

from __future__ import annotations

import io
import linecache
import math
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport.diagnose.verification import verify
from oxport.errors import InvalidExportArgumentError, OnnxExporterError, UnsupportedOperatorError
from oxport.frontends import capture
from tests.models.resnet import resnet18
from tests.models.word_language_model import RNNModel


def _run(proto: onnx.ModelProto, *inputs: torch.Tensor) -> list[np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})


def _dims(info: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]


def test_cnn_with_a_named_dim_matches_eager_at_another_batch() -> None:
    model = resnet18(num_classes=10, width=8).eval()
    batch = torch.export.Dim("batch")
    result = oxport.export(model, (torch.randn(2, 3, 32, 32),), None, dynamo=True,
                           dynamic_shapes={"x": {0: batch}})
    proto = result.model_proto
    onnx.checker.check_model(proto, full_check=True)
    assert _dims(proto.graph.input[0]) == ["batch", 3, 32, 32]
    assert _dims(proto.graph.output[0]) == ["batch", 10]
    x = torch.randn(5, 3, 32, 32)
    np.testing.assert_allclose(_run(proto, x)[0], model(x).detach().numpy(),
                               rtol=1e-3, atol=1e-5)


def test_output_sizes_torch_export_proved_static_need_no_shape_inference(monkeypatch) -> None:
    """A trace's output sizes are the example's, so with dynamic axes the TorchScript front
    end leaves them open for ONNX shape inference; torch.export's are proven for every
    input size, so the torch.export front end writes them as they are."""
    from oxport import serialize

    inferred = []
    infer = serialize.proto._infer_output_shapes
    monkeypatch.setattr(serialize.proto, "_infer_output_shapes",
                        lambda *args: inferred.append(True) or infer(*args))
    model = resnet18(num_classes=10, width=8).eval()
    options = dict(input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    exported = oxport.export(model, (torch.randn(2, 3, 32, 32),), None, dynamo=True,
                             **options).model_proto
    assert _dims(exported.graph.output[0]) == ["batch", 10] and not inferred
    traced = oxport.export(model, (torch.randn(2, 3, 32, 32),), None, **options).model_proto
    assert _dims(traced.graph.output[0]) == ["batch", 10] and inferred == [True]


def test_lstm_language_model_keeps_its_sequence_axis_dynamic() -> None:
    """torch's own torch.export path fixes the sequence length of nn.LSTM (it unrolls the
    time steps); here aten::lstm stays whole and becomes ONNX LSTM."""
    model = RNNModel("LSTM", 50, 16, 16, 2).eval()
    tokens = torch.randint(0, 50, (7, 3))
    verdict = verify(model, (tokens, model.init_hidden(3)), dynamo=True,
                     dynamic_axes={"tokens": {0: "seq", 1: "batch"}, "hidden.0": {1: "batch"},
                                   "hidden.1": {1: "batch"}})
    assert len(verdict.runs) == 3  # the example, then seq and batch changed
    result = oxport.convert(model, (tokens, model.init_hidden(3)), dynamo=True,
                            dynamic_axes={"tokens": {0: "seq"}})
    assert [n.op_type for n in result.model_proto.graph.node].count("LSTM") == 2


@pytest.mark.parametrize("kind", ["GRU", "RNN_TANH", "RNN_RELU"])
def test_gru_and_rnn_language_models_keep_their_sequence_axis_dynamic(kind: str) -> None:
    """The rnn pack's capture kernels keep aten::gru / rnn_tanh / rnn_relu whole, as for the
    LSTM: without them torch.export unrolls the layer and fixes the sequence length."""
    model = RNNModel(kind, 50, 16, 16, 2).eval()
    tokens = torch.randint(0, 50, (7, 3))
    axes = {"tokens": {0: "seq", 1: "batch"}, "hidden": {1: "batch"}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdict = verify(model, (tokens, model.init_hidden(3)), dynamo=True, dynamic_axes=axes)
    assert not [w for w in caught if "fixed dynamic axes" in str(w.message)]
    assert len(verdict.runs) == 3
    result = oxport.convert(model, (tokens, model.init_hidden(3)), dynamo=True,
                            dynamic_axes=axes)
    onnx_op = "GRU" if kind == "GRU" else "RNN"
    assert [n.op_type for n in result.model_proto.graph.node].count(onnx_op) == 2


@pytest.mark.parametrize("layer", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_batch_first_bidirectional_recurrent_layers_stay_dynamic(layer: type) -> None:
    """The capture kernels' output shapes follow the input's layout and both directions."""
    model = layer(4, 5, num_layers=2, bidirectional=True, batch_first=True).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdict = verify(model, (torch.randn(2, 6, 4),), dynamo=True,
                         dynamic_axes={"input": {0: "batch", 1: "seq"}})
    assert not [w for w in caught if "fixed dynamic axes" in str(w.message)]
    assert len(verdict.runs) == 3


def test_a_capture_kernel_applies_only_where_a_symbolic_serves_its_op() -> None:
    """The capture kernels load with every export, the rnn pack only when a model calls a
    recurrent layer; with the pack blocked, no symbolic serves the layer and torch.export
    unrolls it as it would without the kernel."""
    model = torch.nn.GRU(4, 5).eval()
    x = torch.randn(3, 2, 4)
    kept = oxport.convert(model, (x,), dynamo=True).model_proto
    assert [n.op_type for n in kept.graph.node].count("GRU") == 1
    unrolled = oxport.convert(model, (x,), dynamo=True, disable_plugins=["oxport.rnn"])
    ops = [n.op_type for n in unrolled.model_proto.graph.node]
    assert "GRU" not in ops and "MatMul" in ops
    session = ort.InferenceSession(unrolled.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(got[0], model(x)[0].numpy(), rtol=1e-4, atol=1e-5)


def test_a_capture_kernel_for_an_op_torch_lacks_is_refused_clearly() -> None:
    with pytest.raises(OnnxExporterError, match="^A capture kernel is registered for "
                                                "aten::ghost_rnn.input, which torch does not"):
        capture.capture(torch.nn.ReLU(), (torch.randn(2, 3),), {},
                        kernels={"aten::ghost_rnn.input": torch.empty_like})


def test_transformers_bert_matches_eager_at_a_second_batch_and_length() -> None:
    transformers = pytest.importorskip("transformers")
    model = transformers.BertModel(transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        vocab_size=99, max_position_embeddings=64)).eval()
    ids = torch.randint(0, 99, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[0, -2:] = 0
    axes = {0: "batch", 1: "seq"}
    verdict = verify(model, (ids, {"attention_mask": mask, "return_dict": False}),
                     dynamo=True, input_names=["input_ids", "attention_mask"],
                     dynamic_axes={"input_ids": axes, "attention_mask": axes})
    assert len(verdict.runs) == 3  # the example, then batch and seq changed


def test_symint_arithmetic_becomes_shape_computations() -> None:
    class Fold(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            batch, seq, width = x.shape
            return x.reshape(batch * seq, width // 2, 2) + seq

    verify(Fold(), (torch.randn(2, 3, 4),), dynamo=True, input_names=["x"],
           dynamic_axes={"x": {0: "batch", 1: "seq"}})


_NUMBER_OPS = {  # each a computation on a dynamic size torch.export keeps symbolic
    "int ** float": lambda x: x * x.shape[0] ** 0.5,
    "int ** natural int": lambda x: x.reshape(x.shape[0] ** 2 // x.shape[0], -1),
    "int ** negative int": lambda x: x * x.shape[0] ** -1,
    "float ** int": lambda x: x * (x.shape[0] / 2) ** 2,
    "math.ceil": lambda x: x[:math.ceil(x.shape[0] / 2)],
    "math.floor": lambda x: x[:math.floor(x.shape[0] / 4)],
    "math.trunc": lambda x: x * math.trunc(x.shape[0] / 4),
    "torch.sym_sqrt": lambda x: x * torch.sym_sqrt(x.shape[0]),
}


class _SizeArithmetic(torch.nn.Module):
    def __init__(self, compute) -> None:
        super().__init__()
        self.compute = compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.compute(x)


@pytest.mark.parametrize("opset", [11, 20])
@pytest.mark.parametrize("op", list(_NUMBER_OPS))
def test_powers_and_roundings_of_sizes_stay_dynamic(op: str, opset: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing specialized
        verify(_SizeArithmetic(_NUMBER_OPS[op]), (torch.randn(9, 4),), dynamo=True,
               input_names=["x"], dynamic_axes={"x": {0: "n"}}, opset_version=opset)


def test_an_exported_program_is_taken_as_it_is() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    program = torch.export.export(model, (torch.randn(2, 4),),
                                  dynamic_shapes=({0: torch.export.Dim("rows")},))
    proto = oxport.export(program, (), None).model_proto
    # A program keeps no Dim names: a dim is named after the input axis it first sizes.
    assert _dims(proto.graph.input[0]) == ["input_dim_0", 4]
    verdict = verify(program, (torch.randn(2, 4),), dynamic_axes={"input": {0: "input_dim_0"}})
    assert len(verdict.runs) == 2  # the example, then another number of rows
    x = torch.randn(6, 4)
    np.testing.assert_allclose(_run(proto, x)[0], model(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_parameters_keep_their_state_dict_names() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
    proto = oxport.export(model, (torch.randn(2, 4),), None, dynamo=True).model_proto
    assert sorted(i.name for i in proto.graph.initializer) == ["0.bias", "0.weight"]


def test_unsupported_ops_are_reported_at_once_with_their_source_lines() -> None:
    @torch.library.custom_op("oxport_test::mystery", mutates_args=())
    def mystery(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @mystery.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    class Uses(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return mystery(mystery(x) + 1)

    with pytest.raises(UnsupportedOperatorError) as raised:
        oxport.export(Uses(), (torch.randn(2),), io.BytesIO(), dynamo=True)
    message = str(raised.value)
    assert "oxport_test::mystery (2 uses" in message
    assert "test_export_frontend.py" in message


def _file_lines_cached() -> list[str]:
    return [name for name, entry in linecache.cache.items()
            if len(entry) == 4 and entry[1] is not None]


def test_the_source_files_the_capture_reads_are_not_kept(monkeypatch) -> None:
    read = []
    update = linecache.updatecache
    monkeypatch.setattr(linecache, "updatecache",
                        lambda name, *rest: read.append(name) or update(name, *rest))
    linecache.clearcache()
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    oxport.export(model, (torch.randn(2, 4),), None, dynamo=True)
    assert any(name.endswith(".py") for name in read)  # torch.export's stack traces
    assert _file_lines_cached() == []


def test_releasing_source_lines_keeps_entries_from_before_and_without_a_file(tmp_path) -> None:
    before, during = tmp_path / "before.py", tmp_path / "during.py"
    for path in (before, during):
        path.write_text("x = 1\n")
    linecache.clearcache()
    linecache.getline(str(before), 1)
    with capture.capture_state_released():
        assert linecache.getline(str(during), 1) == "x = 1\n"
        generated = "<eval_with_key>.0"  # as torch.fx names a GraphModule's code
        loader = type("Loader", (), {"get_source": lambda self, name: "y = 2\n"})()
        assert linecache.lazycache(generated, {"__name__": generated, "__loader__": loader})
        assert linecache.getline(generated, 1) == "y = 2\n"
    assert str(before) in linecache.cache and str(during) not in linecache.cache
    assert linecache.getline(generated, 1) == "y = 2\n"


def test_a_custom_op_is_served_by_a_registered_symbolic() -> None:
    @torch.library.custom_op("oxport_test::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    class Uses(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return twice(x)

    oxport.register_custom_op_symbolic(
        "oxport_test::twice", lambda g, x: g.op("Add", x, x), 9)
    try:
        proto = oxport.export(Uses(), (torch.randn(3),), None, dynamo=True).model_proto
    finally:
        oxport.unregister_custom_op_symbolic("oxport_test::twice", 9)
    assert [n.op_type for n in proto.graph.node] == ["Add"]


@torch.library.custom_op("oxport_test::scale_into", mutates_args=("acc",))
def _scale_into(x: torch.Tensor, acc: torch.Tensor, k: float) -> torch.Tensor:
    """Scales ``acc`` in place, returns ``x + acc``."""
    acc.mul_(k)
    return x + acc


@_scale_into.register_fake
def _(x: torch.Tensor, acc: torch.Tensor, k: float) -> torch.Tensor:
    return torch.empty_like(x)


class _Accumulates(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        acc = y.clone()
        return _scale_into(x, acc, 3.0), acc + 1


@pytest.fixture
def scale_into_symbolic():
    """The symbolic returns the op's result, then the new value of ``acc`` it writes."""
    def symbolic(g, x, acc, k):
        scaled = g.op("Mul", acc, k)
        return g.op("Add", x, scaled), scaled

    oxport.register_custom_op_symbolic("oxport_test::scale_into", symbolic, 9)
    yield
    oxport.unregister_custom_op_symbolic("oxport_test::scale_into", 9)


@pytest.mark.parametrize("capture", ["trace", "export", "auto_functionalized_v2",
                                     "auto_functionalized"])
def test_a_mutating_custom_op_writes_what_its_symbolic_returns(
        capture: str, scale_into_symbolic) -> None:
    """Later reads of the written argument see its new value: through the tracer, torch.export
    capturing the op whole, and its functional forms (auto_functionalized v2, and v1)."""
    model, x, y = _Accumulates(), torch.randn(3), torch.randn(3)
    if capture == "trace":
        source = model
    elif capture == "export":
        source = torch.export.export(model, (x, y))
        assert "oxport_test.scale_into" in str(source.graph)
    else:
        with torch._export.config.patch(
                enable_auto_functionalized_v2_for_export=capture.endswith("v2")):
            source = torch.export.export(model, (x, y)).run_decompositions({})
        assert {n.target.name() for n in source.graph.nodes
                if isinstance(n.target, torch._ops.HigherOrderOperator)} == {capture}
    proto = oxport.convert(source, (x, y), dynamo=capture != "trace").model_proto
    for got, want in zip(_run(proto, x, y), model(x, y)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.onnx's TorchScript path
def test_torch_onnx_drops_a_custom_op_s_write(scale_into_symbolic) -> None:
    """Why oxport's results differ from torch.onnx's here: torch.onnx keeps only the op's
    result, so a later read of the written tensor sees its old value."""
    def symbolic(g, x, acc, k):
        return g.op("Add", x, g.op("Mul", acc, k))

    torch.onnx.register_custom_op_symbolic("oxport_test::scale_into", symbolic, 9)
    try:
        buffer = io.BytesIO()
        model, x, y = _Accumulates(), torch.randn(3), torch.randn(3)
        torch.onnx.export(model, (x, y), buffer, dynamo=False)
    finally:
        torch.onnx.unregister_custom_op_symbolic("oxport_test::scale_into", 9)
    theirs = _run(onnx.load_from_string(buffer.getvalue()), x, y)
    np.testing.assert_allclose(theirs[1], (y + 1).numpy(), rtol=1e-6)  # the write is lost
    assert not np.allclose(theirs[1], model(x, y)[1].numpy())
    # The same symbolic under oxport (it returns no new value for acc) gives that file,
    # saying so.
    oxport.register_custom_op_symbolic("oxport_test::scale_into", symbolic, 9)
    with pytest.warns(UserWarning, match="returned no new value for acc"):
        ours = _run(oxport.convert(model, (x, y)).model_proto, x, y)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def test_a_custom_op_writing_a_view_is_refused_clearly(scale_into_symbolic) -> None:
    class WritesARow(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            acc = y.clone()
            _scale_into(x[0], acc[0], 2.0)
            return acc

    program = torch.export.export(WritesARow(), (torch.randn(2, 3), torch.randn(2, 3)))
    with pytest.raises(OnnxExporterError, match="mutates acc, a view of another tensor"):
        oxport.convert(program.run_decompositions({}), ())


@pytest.mark.parametrize("call, fix", [
    (lambda m, x: oxport.export(m, (x,), None, dynamic_shapes={"x": {0: "b"}}),
     "dynamo=True"),
    (lambda m, x: oxport.export(torch.jit.script(m), (x,), None, dynamo=True),
     "eager nn.Module"),
    (lambda m, x: oxport.export(torch.export.export(m, (x,)), (), None,
                                export_modules_as_functions=True), "pass the nn.Module"),
    (lambda m, x: oxport.export(m, (x,), None, dynamo=True, dynamic_shapes={"y": {0: "b"}}),
     "not arguments given"),
])
def test_options_that_cannot_apply_raise_a_clear_error(call, fix: str) -> None:
    with pytest.raises(InvalidExportArgumentError, match=fix):
        call(torch.nn.Linear(2, 2), torch.randn(3, 2))


def test_a_model_torch_export_cannot_capture_says_so() -> None:
    class DataDependent(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[: int(x.sum().item() > 0) + 1]

    target = io.BytesIO()
    with pytest.raises(OnnxExporterError, match="torch.export could not capture"):
        oxport.export(DataDependent(), (torch.randn(3),), target, dynamo=True,
                      dynamic_axes={"x": {0: "n"}}, input_names=["x"])
    assert target.getvalue() == b""


def test_a_dynamic_axis_of_example_size_one_stays_dynamic() -> None:
    """torch.export fixes a size-1 axis unless its guards are size-oblivious."""
    class Flatten(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(x.size(0), -1) * 2

    verify(Flatten(), (torch.randn(1, 3, 2),), dynamo=True, input_names=["x"],
           dynamic_axes={"x": {0: "batch"}})


def test_cli_dynamo_exports_and_verifies(tmp_path, capsys) -> None:
    from oxport import cli

    target = tmp_path / "mlp.onnx"
    status = cli.main(["export", "--example", "mlp", "--dynamo", "--verify", "-o", str(target),
                       "--dynamic-axis", "input:0:batch"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "input: float32 batchx32" in out
    assert "at input 2x32" in out


def test_torch_cond_becomes_an_if_taking_either_branch_at_run_time() -> None:
    class Branches(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 0, lambda x: self.linear(x).relu(),
                              lambda x: x * 2 - 1, (x,))

    model = Branches().eval()
    proto = oxport.convert(model, (torch.ones(2, 3),), dynamo=True).model_proto
    assert "If" in [n.op_type for n in proto.graph.node]
    for x in (torch.ones(2, 3), -torch.ones(2, 3)):
        np.testing.assert_allclose(_run(proto, x)[0], model(x).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_while_loop_becomes_a_loop_with_a_run_time_trip_count() -> None:
    from torch._higher_order_ops.while_loop import while_loop

    class Doubling(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
            def cond(i: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                return i < n

            def body(i: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                return i + 1, y * 2 + 1

            return while_loop(cond, body, (torch.zeros((), dtype=torch.int64), x))[1]

    model = Doubling()
    proto = oxport.convert(model, (torch.ones(2, 3), torch.tensor(3)), dynamo=True).model_proto
    assert "Loop" in [n.op_type for n in proto.graph.node]
    for n in (0, 3, 5):
        x = torch.randn(2, 3)
        np.testing.assert_allclose(_run(proto, x, torch.tensor(n))[0],
                                   model(x, torch.tensor(n)).numpy(), rtol=1e-5)


def test_grad_mode_wrappers_are_inlined() -> None:
    class NoGradPart(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                y = x * 3
            return y + x

    proto = oxport.convert(NoGradPart(), (torch.randn(4),), dynamo=True).model_proto
    x = torch.randn(4)
    np.testing.assert_allclose(_run(proto, x)[0], (x * 3 + x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["gpt2", "t5", "llama", "mixtral"])
def test_transformers_decoders_match_eager_at_a_second_batch_and_length(name: str) -> None:
    """T5 is one torch's own torch.export path fails to decompose; Mixtral's experts go
    through transformers' grouped_mm_fallback custom op under torch.export."""
    pytest.importorskip("transformers")
    from tests.test_transformers import SIZES, SPECS

    spec = SPECS[name]
    torch.manual_seed(0)
    model = spec.build().eval()
    inputs = spec.inputs(*SIZES[0])
    result = oxport.convert(model, (dict(inputs, return_dict=False),), dynamo=True,
                            opset_version=17, input_names=list(inputs),
                            dynamic_axes={k: a for k, a in spec.axes.items() if k in inputs})
    proto = result.model_proto
    assert _dims(proto.graph.input[0]) == ["batch", "seq"]
    for size in SIZES:
        feeds = spec.inputs(*size)
        with torch.no_grad():
            expected = model(**feeds, return_dict=False)
        actual = _run(proto, *feeds.values())
        for got, want in zip(actual, [e for e in expected if isinstance(e, torch.Tensor)]):
            np.testing.assert_allclose(got, want.numpy(), rtol=spec.rtol, atol=spec.atol)


@pytest.mark.parametrize("name", ["vit", "videoprism"])
def test_vision_transformers_resize_position_embeddings_at_a_second_size(name: str) -> None:
    """Their position embeddings are resized to ``int(patches ** 0.5)`` a side: a power of
    a SymInt, computed at run time. Captured at the larger size: at the smaller one the
    model's code skips the resize (its patches are the embeddings' own), a branch
    torch.export would keep."""
    pytest.importorskip("transformers")
    from tests.test_transformers import _CALL, _EXTRA, SIZES, SPECS

    spec = SPECS[name]
    torch.manual_seed(0)
    model = spec.build().eval()
    options = {**_CALL, **_EXTRA.get(name, {})}
    inputs = spec.inputs(*SIZES[1])
    proto = oxport.convert(model, ({**inputs, **options},), dynamo=True, opset_version=20,
                           input_names=list(inputs),
                           output_names=[key for key in spec.axes if key not in inputs],
                           dynamic_axes=spec.axes).model_proto
    for size in SIZES:
        feeds = spec.inputs(*size)
        with torch.no_grad():
            expected = [y for y in model(**feeds, **options) if isinstance(y, torch.Tensor)]
        actual = _run(proto, *feeds.values())
        assert len(actual) == len(expected)
        for got, want in zip(actual, expected):
            np.testing.assert_allclose(got, want.numpy(), rtol=spec.rtol, atol=spec.atol)


class _SizeBranch(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if x.shape[0] * x.shape[1] == 12:
            return x * 2 + y
        return x + y


def test_a_branch_taken_on_a_condition_on_dynamic_axes_is_warned_about() -> None:
    axes = {"x": {0: "rows", 1: "cols"}, "y": {0: "rows", 1: "cols"}}
    with pytest.warns(UserWarning, match=r"only where \(x\.shape\[1\]\*x\.shape\[0\]\) "
                                         r"== 12 \(values of dynamic axes"):
        oxport.convert(_SizeBranch(), (torch.randn(3, 4), torch.randn(3, 4)), dynamo=True,
                       input_names=["x", "y"], dynamic_axes=axes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # x + y only asks for equal sizes: no warning
        oxport.convert(_SizeBranch(), (torch.randn(2, 5), torch.randn(2, 5)), dynamo=True,
                       input_names=["x", "y"], dynamic_axes=axes)


def test_dinov2_pins_its_resize_to_the_captured_size_and_is_warned_about() -> None:
    """``int(height // patch)`` in transformers' resize specializes the quotient under
    torch.export (the TorchScript front end computes it at run time)."""
    pytest.importorskip("transformers")
    from tests.test_transformers import _CALL, SIZES, SPECS

    spec = SPECS["dinov2_with_registers"]
    inputs = spec.inputs(*SIZES[1])
    with pytest.warns(UserWarning, match=r"pixel_values\.shape\[2\]"):
        oxport.convert(spec.build().eval(), ({**inputs, **_CALL},), dynamo=True,
                       input_names=list(inputs), dynamic_axes={
                           key: axes for key, axes in spec.axes.items() if key in inputs})


def test_modules_become_functions_from_the_module_stack() -> None:
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)
            self.act = torch.nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.linear(self.act(x))) + x  # act called twice

    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = Block(), Block()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    model, x = Stack().eval(), torch.randn(2, 4)
    protos = [oxport.convert(model, (x,), dynamo=dynamo, opset_version=17,
                             export_modules_as_functions={Block}).model_proto
              for dynamo in (False, True)]
    traced, exported = ([n.op_type for n in p.graph.node] for p in protos)
    assert exported == traced == ["Block", "Block"]
    assert [n.op_type for n in protos[1].functions[0].node] == \
        [n.op_type for n in protos[0].functions[0].node]
    np.testing.assert_allclose(_run(protos[1], x)[0], model(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_both_front_ends_give_the_same_inputs_and_outputs() -> None:
    """Same names, order, dtypes and ranks as the TorchScript path (nested inputs
    flattened, tuple outputs flattened, non-tensor arguments constants)."""
    model = RNNModel("LSTM", 50, 16, 16, 2).eval()
    args = (torch.randint(0, 50, (7, 3)), model.init_hidden(3))

    def signature(proto: onnx.ModelProto) -> list[list[tuple[str, int, int]]]:
        return [[(v.name, v.type.tensor_type.elem_type, len(v.type.tensor_type.shape.dim))
                 for v in values] for values in (proto.graph.input, proto.graph.output)]

    traced, exported = (signature(oxport.convert(model, args, dynamo=dynamo).model_proto)
                        for dynamo in (False, True))
    assert [name for name, _, _ in exported[0]] == ["tokens", "hidden.0", "hidden.1"]
    assert exported[0] == traced[0]
    assert [io[1:] for io in exported[1]] == [io[1:] for io in traced[1]]


def test_complex_tensors_are_carried_as_real_pairs() -> None:
    def spectrum(x: torch.Tensor) -> torch.Tensor:
        z = torch.fft.fft(x)
        return torch.view_as_real(z * torch.polar(torch.ones_like(x), x)) + z.imag.unsqueeze(-1)

    proto = oxport.convert(_Function(spectrum), (torch.randn(2, 8),), dynamo=True,
                           opset_version=17).model_proto
    onnx.checker.check_model(proto, full_check=True)
    x = torch.randn(2, 8)
    np.testing.assert_allclose(_run(proto, x)[0], spectrum(x).numpy(), rtol=1e-4, atol=1e-5)


def test_a_split_of_a_dynamic_axis_reads_the_example_size() -> None:
    """split_with_sizes of sizes computed at run time, along a dynamic axis: the symbolic
    checks the axis against the example's size (torch.export gives a symbol) and the model
    works at another size."""
    def halves(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        return [t * 2 for t in x.split_with_sizes([y.size(1), y.size(1) * 2])]

    proto = oxport.convert(_Function(halves), (torch.randn(6, 2), torch.randn(1, 2)),
                           dynamo=True, input_names=["x", "y"],
                           dynamic_axes={"x": [0], "y": [1]}).model_proto
    x, y = torch.randn(9, 2), torch.randn(1, 3)
    for got, want in zip(_run(proto, x, y), halves(x, y)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)


def test_like_factories_fill_a_dynamic_shape_below_opset_9() -> None:
    """No ConstantOfShape before opset 9: ones_like/zeros_like/full_like of a dynamic shape
    are made from the input itself, NaN and inf included."""
    def fills(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.ones_like(x, dtype=torch.int32), torch.zeros_like(x),
                torch.full_like(x, 2.5))

    proto = oxport.convert(_Function(fills), (torch.randn(2, 3),), dynamo=True, opset_version=7,
                           input_names=["x"], dynamic_axes={"x": [0, 1]}).model_proto
    x = torch.tensor([[float("nan"), 0.0], [float("inf"), -1.0], [0.0, 3.0]])
    for got, want in zip(_run(proto, x), fills(x)):
        np.testing.assert_array_equal(got, want.numpy())


def test_scan_and_map_become_scans_over_a_dynamic_length() -> None:
    """scan (carrying a sum, with a map inside) and map run at another number of steps."""
    from torch._higher_order_ops.map import map as map_over
    from torch._higher_order_ops.scan import scan

    def steps(init: torch.Tensor, xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        def combine(total: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            doubled = map_over(lambda row: row * 2, x.unsqueeze(0)).squeeze(0)
            return total + doubled, total * 1
        final, history = scan(combine, init, xs)
        return final, history, map_over(lambda x, t: x @ t, xs, final.unsqueeze(1))

    proto = oxport.convert(_Function(steps), (torch.zeros(3), torch.randn(4, 3)), dynamo=True,
                           input_names=["init", "xs"],
                           dynamic_axes={"xs": {0: "steps"}}).model_proto
    assert [n.op_type for n in proto.graph.node].count("Scan") == 2
    init, xs = torch.randn(3), torch.randn(7, 3)
    for got, want in zip(_run(proto, init, xs), steps(init, xs)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_values_only_runtime_asserts_read_are_dropped() -> None:
    """Slices at indices read from a tensor: torch.export checks each piece's storage offset
    (aten.sym_storage_offset, which has no ONNX meaning) in asserts oxport drops."""
    def pieces(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.tensor_split(x, i, 1)

    x, i = torch.randn(2, 7, 3), torch.tensor([1, 5, -1])
    program = torch.export.export(_Function(pieces), (x, i)).run_decompositions()
    assert "sym_storage_offset" in str(program.graph)
    proto = oxport.convert(program, (x, i)).model_proto
    other = torch.tensor([2, 3, 6])
    for got, want in zip(_run(proto, x, other), pieces(x, other)):
        np.testing.assert_array_equal(got, want.numpy())


class _Function(torch.nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor):
        return self.fn(*args)
