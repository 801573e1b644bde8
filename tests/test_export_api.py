"""``oxport.export`` and its companions: every parameter and every ``args`` form of the seed."""

from __future__ import annotations

import io
import logging
import os
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import oxport
from oxport import OperatorExportTypes, TrainingMode, plugin_manager, walk
from oxport.errors import InvalidExportArgumentError
from tests.helpers import load

torch.manual_seed(0)
TOL = {"rtol": 1e-4, "atol": 1e-6}


def _run(f: str | io.BytesIO, *arrays: torch.Tensor, feeds: dict | None = None) -> list:
    source = f.getvalue() if isinstance(f, io.BytesIO) else f
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    if feeds is None:
        feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), arrays)}
    return session.run(None, feeds)


def _dims(value_info: onnx.ValueInfoProto) -> list:
    return [d.dim_param or (d.dim_value if d.HasField("dim_value") else None)
            for d in value_info.type.tensor_type.shape.dim]


class Net(nn.Module):
    """Linear -> ReLU -> Dropout -> Linear; parameters fc.weight, fc.bias, out.weight, out.bias."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 5)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.fc(x))))


@pytest.fixture
def restore_logging():
    logger = logging.getLogger("oxport")
    state = (logger.level, logger.disabled, list(logger.handlers))
    yield logger
    logger.setLevel(state[0])
    logger.disabled = state[1]
    logger.handlers[:] = state[2]


# -- args forms ------------------------------------------------------------------------
class Pair(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, scale: float = 1.0,
                repeat: int = 1) -> torch.Tensor:
        out = x * scale
        for _ in range(repeat):
            out = out + (x if y is None else y)
        return out


class Recurrent(nn.Module):
    """An LSTM-style signature: ``forward(x, (h, c))`` returning ``(y, (h, c))``."""

    def forward(self, x, state):
        h, c = state
        c = c * 0.5 + x
        h = torch.relu(h + c)
        return h * 2, (h, c)


def test_args_single_tensor_is_a_one_tuple(tmp_path):
    x = torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(Pair(), x, f)
    assert [i.name for i in load(f).graph.input] == ["x"]
    np.testing.assert_allclose(_run(f, x)[0], Pair()(x).numpy(), **TOL)


def test_args_tuple_gives_inputs_in_order(tmp_path):
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(Pair(), (x, y), f)
    assert [i.name for i in load(f).graph.input] == ["x", "y"]
    np.testing.assert_allclose(_run(f, x, y)[0], Pair()(x, y).numpy(), **TOL)


def test_args_trailing_dict_holds_named_arguments(tmp_path):
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(Pair(), (x, {"y": y, "repeat": 2}), f)
    assert [i.name for i in load(f).graph.input] == ["x", "y"]
    expected = Pair()(x, y=y, repeat=2)
    np.testing.assert_allclose(_run(f, x, y)[0], expected.numpy(), **TOL)


class SumsList(nn.Module):
    def forward(self, xs: list) -> torch.Tensor:
        return xs[0] + xs[1] * 2


def test_args_list_is_one_argument_as_torch_onnx_passes_it(tmp_path):
    """torch.onnx traces ``args=[a, b]`` as ``forward([a, b])``: one argument, a list."""
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(SumsList(), [a, b], f)
    assert len(load(f).graph.input) == 2
    np.testing.assert_allclose(_run(f, a, b)[0], SumsList()([a, b]).numpy(), **TOL)
    with pytest.raises(InvalidExportArgumentError, match="missing"):
        oxport.export(Recurrent(), [a, b], io.BytesIO())  # forward(x, state): one argument


class TakesDict(nn.Module):
    def forward(self, x: torch.Tensor, extra: dict) -> torch.Tensor:
        return x + extra["bias"] * 2


def test_args_empty_dict_escape_passes_a_dict_positionally(tmp_path):
    x, bias = torch.randn(2, 3), torch.randn(3)
    f = str(tmp_path / "m.onnx")
    oxport.export(TakesDict(), (x, {"bias": bias}, {}), f)
    model = load(f)
    assert [i.name for i in model.graph.input] == ["x", "extra.bias"]
    np.testing.assert_allclose(_run(f, x, bias)[0], TakesDict()(x, {"bias": bias}).numpy(),
                               **TOL)


def test_args_nested_tuples_are_flattened(tmp_path):
    x, h, c = torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4)
    f = str(tmp_path / "m.onnx")
    oxport.export(Recurrent(), (x, (h, c)), f, input_names=["x", "h0", "c0"],
                  output_names=["y", "h1", "c1"])
    model = load(f)
    assert [i.name for i in model.graph.input] == ["x", "h0", "c0"]
    assert [o.name for o in model.graph.output] == ["y", "h1", "c1"]
    y, (h1, c1) = Recurrent()(x, (h, c))
    for got, want in zip(_run(f, x, h, c), (y, h1, c1)):
        np.testing.assert_allclose(got, want.numpy(), **TOL)


def test_primitive_args_are_0d_inputs_unless_their_value_is_baked_in(tmp_path):
    """As in torch.onnx: a Python number becomes a 0-d input of torch's dtype (float64 for a
    float); one the trace uses as a Python value (a loop count) is baked in, and the input
    nothing reads is dropped. None stays hard-coded."""
    x = torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(Pair(), (x, None, 2.5, 3), f)
    model = load(f)
    assert [i.name for i in model.graph.input] == ["x", "scale"]
    assert model.graph.input[1].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    np.testing.assert_allclose(_run(f, x, torch.tensor(2.5, dtype=torch.float64))[0], Pair()(x, None, 2.5, 3).numpy(), **TOL)
    # scale is read at run time; the loop count is that of the export.
    x2 = torch.randn(2, 3)
    np.testing.assert_allclose(_run(f, x2, torch.tensor(0.5, dtype=torch.float64))[0], (x2 * 0.5 + 3 * x2).numpy(), **TOL)


# -- f -----------------------------------------------------------------------------------
def test_f_path_and_bytesio_hold_the_same_model(tmp_path):
    model, x = Net().eval(), torch.randn(2, 3)
    buffer = io.BytesIO()
    oxport.export(model, x, buffer)
    path = tmp_path / "m.onnx"
    oxport.export(model, x, path)  # a PathLike
    assert path.read_bytes() == buffer.getvalue()
    np.testing.assert_allclose(_run(buffer, x)[0], model(x).detach().numpy(), **TOL)


def test_f_as_a_text_file_is_refused(tmp_path):
    with open(tmp_path / "m.onnx", "w") as handle:
        with pytest.raises(oxport.errors.InvalidExportArgumentError, match="binary file"):
            oxport.export(Net(), torch.randn(2, 3), handle)


# -- export_params, names, keep_initializers_as_inputs -----------------------------------
class WithBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("shift", torch.full((4,), 0.5))
        self.lin = nn.Linear(3, 4)
        self.table = torch.arange(16.0).reshape(4, 4)  # a plain tensor: traced as a constant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.lin(x) + self.shift, self.table)


def test_export_params_false_makes_parameters_inputs_in_state_dict_order(tmp_path):
    model, x = WithBuffer().eval(), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(model, x, f, export_params=False, do_constant_folding=False)
    proto = load(f)
    assert [i.name for i in proto.graph.input] == ["x", *model.state_dict()]
    # Constants the conversion made stay initializers; parameters carry no data.
    assert {t.name for t in proto.graph.initializer}.isdisjoint(model.state_dict())
    feeds = {"x": x.numpy(), **{k: v.numpy() for k, v in model.state_dict().items()}}
    np.testing.assert_allclose(_run(f, feeds=feeds)[0], model(x).detach().numpy(), **TOL)
    # Other weights can be fed at run time.
    other = WithBuffer().eval()
    feeds.update({k: v.numpy() for k, v in other.state_dict().items()})
    np.testing.assert_allclose(_run(f, feeds=feeds)[0], other(x).detach().numpy(), **TOL)


def test_export_params_true_stores_parameters_as_initializers_only(tmp_path):
    model, x = WithBuffer().eval(), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(model, x, f)
    proto = load(f)
    assert [i.name for i in proto.graph.input] == ["x"]
    assert set(model.state_dict()) <= {t.name for t in proto.graph.initializer}


def test_partial_input_and_output_names_name_inputs_then_parameters(tmp_path):
    model, x = Net().eval(), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(model, x, f, input_names=["data", "learned_0"], output_names=["scores"])
    proto = load(f)
    assert [i.name for i in proto.graph.input] == ["data"]
    names = [t.name for t in proto.graph.initializer]
    assert names[0] == "learned_0" and names[1:] == ["fc.bias", "out.weight", "out.bias"]
    assert [o.name for o in proto.graph.output] == ["scores"]
    np.testing.assert_allclose(_run(f, x)[0], model(x).detach().numpy(), **TOL)


def test_keep_initializers_as_inputs(tmp_path):
    model, x = Net().eval(), torch.randn(2, 3)
    default, kept = str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")
    oxport.export(model, x, default)  # None -> False for OperatorExportTypes.ONNX
    oxport.export(model, x, kept, keep_initializers_as_inputs=True)
    assert [i.name for i in load(default).graph.input] == ["x"]
    assert [i.name for i in load(kept).graph.input] == ["x", *model.state_dict()]
    # Kept initializers can be overridden at run time.
    zeros = {k: np.zeros_like(v.numpy()) for k, v in model.state_dict().items()}
    got = _run(kept, feeds={"x": x.numpy(), **zeros})[0]
    np.testing.assert_allclose(got, np.zeros((2, 2), np.float32))


def test_keep_initializers_as_inputs_is_forced_below_opset_9(tmp_path):
    model, x = Net().eval(), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(model, x, f, opset_version=8, keep_initializers_as_inputs=False)
    proto = load(f)
    assert [i.name for i in proto.graph.input] == ["x", *model.state_dict()]
    assert proto.ir_version == 3
    np.testing.assert_allclose(_run(f, feeds={"x": x.numpy()})[0],
                               model(x).detach().numpy(), **TOL)


# -- verbose ------------------------------------------------------------------------------
def test_verbose_prints_the_graph_and_records_source_locations(tmp_path, capsys,
                                                               restore_logging):
    model, x = Net().eval(), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(model, x, f, verbose=True, input_names=["x"])
    out = capsys.readouterr().out
    assert out.startswith("graph(%x : Float(2, 3),")
    assert "%fc.weight : Float(5, 3)" in out
    assert "onnx::Gemm[transB=1](%x, %fc.weight, %fc.bias), scope: Net/Linear[fc]" in out
    assert "scope: Net/Linear[out]" in out
    gemm = [n for n in load(f).graph.node if n.op_type == "Gemm"]
    assert gemm[0].doc_string.startswith("scope: Net/Linear[fc] # ")
    relu = [n for n in load(f).graph.node if n.op_type == "Relu"][0]
    this_file = os.path.basename(__file__)
    assert this_file in relu.doc_string and ": forward" in relu.doc_string
    assert load(f).doc_string.startswith("Net from ")
    # The log is on for the export only.
    assert restore_logging.handlers == [] or not any(
        getattr(h, "_oxport", False) for h in restore_logging.handlers)


def test_quiet_export_prints_nothing_and_sets_no_doc_strings(tmp_path, capsys):
    f = str(tmp_path / "m.onnx")
    oxport.export(Net().eval(), torch.randn(2, 3), f)
    assert capsys.readouterr().out == ""
    assert all(not n.doc_string for n in load(f).graph.node)


# -- training --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, was_training, dropout", [
    (TrainingMode.EVAL, True, False),
    (TrainingMode.EVAL, False, False),
    (TrainingMode.PRESERVE, True, True),
    (TrainingMode.PRESERVE, False, False),
    (TrainingMode.TRAINING, False, True),
    (TrainingMode.TRAINING, True, True),
])
def test_training_modes_and_the_model_mode_is_restored(mode, was_training, dropout):
    model = Net().train(was_training)
    seen = []
    model.register_forward_pre_hook(lambda module, args: seen.append(module.training))
    buffer = io.BytesIO()
    oxport.export(model, torch.randn(2, 3), buffer, training=mode)
    assert seen == [dropout]
    assert model.training is was_training and model.fc.training is was_training
    ops = [n.op_type for n in load(buffer).graph.node]
    assert ("Dropout" in ops) is dropout
    if dropout:
        node = [n for n in load(buffer).graph.node if n.op_type == "Dropout"][0]
        assert len(node.input) == 3  # ratio and training_mode given


def test_training_mode_skips_constant_folding():
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.arange(20.0).reshape(4, 5)

        def forward(self, x):
            return x + self.table * 2

    x = torch.randn(4, 5)
    folded = oxport.convert(Scaled(), x).model_proto
    kept = oxport.convert(Scaled(), x, training=TrainingMode.TRAINING).model_proto
    assert [n.op_type for n in folded.graph.node] == ["Add"]
    assert [n.op_type for n in kept.graph.node if n.op_type != "Constant"] == ["Mul", "Add"]


def test_select_model_mode_for_export():
    model = Net().train()
    with oxport.select_model_mode_for_export(model, TrainingMode.EVAL):
        assert not model.training and not model.fc.training
    assert model.training
    model.eval()
    with oxport.select_model_mode_for_export(model, TrainingMode.TRAINING):
        assert model.training
    assert not model.training
    with oxport.select_model_mode_for_export(model, TrainingMode.PRESERVE):
        assert not model.training
    with pytest.raises(oxport.errors.InvalidExportArgumentError, match="TrainingMode"):
        with oxport.select_model_mode_for_export(model, 7):
            pass


# -- opset_version, operator_export_type, do_constant_folding ----------------------------
@pytest.mark.parametrize("opset", [7, 9, 13, 17, 20, 26])
def test_opset_versions(opset, tmp_path):
    model, x = Net().eval(), torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    oxport.export(model, x, f, opset_version=opset)
    proto = load(f)
    assert [(o.domain, o.version) for o in proto.opset_import] == [("", opset)]
    onnx.checker.check_model(proto, full_check=True)
    np.testing.assert_allclose(_run(f, feeds={"x": x.numpy()})[0], model(x).detach().numpy(),
                               **TOL)


def test_default_opset_is_20():
    proto = oxport.convert(Net().eval(), torch.randn(2, 3)).model_proto
    assert [(o.domain, o.version) for o in proto.opset_import] == [("", 20)]


def test_operator_export_type_onnx_is_the_default_and_explicit():
    model, x = Net().eval(), torch.randn(2, 3)
    a = oxport.convert(model, x).to_bytes()
    b = oxport.convert(model, x, operator_export_type=OperatorExportTypes.ONNX).to_bytes()
    assert a == b


class Folded(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.arange(12.0).reshape(3, 4)

    def forward(self, x):
        scale = self.table.view(4, 3).view(12) * 2 + 1
        return x * scale.view(3, 4)


@pytest.mark.parametrize("fold", [True, False])
def test_do_constant_folding(fold, tmp_path):
    x = torch.randn(3, 4)
    f = str(tmp_path / "m.onnx")
    oxport.export(Folded(), x, f, do_constant_folding=fold)
    ops = [n.op_type for n in load(f).graph.node]
    assert (ops == ["Mul"]) is fold
    if not fold:
        assert ops.count("Reshape") == 3 and "Add" in ops
    np.testing.assert_allclose(_run(f, x)[0], Folded()(x).numpy(), **TOL)


# -- dynamic_axes -----------------------------------------------------------------------------
class SumModule(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)


def test_dynamic_axes_seed_example(tmp_path):
    """The seed's SumModule: a dict names axes; a list gets ``<name>_dynamic_axes_<k>``."""
    static, dynamic = str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")
    oxport.export(SumModule(), (torch.ones(2, 2),), static, input_names=["x"],
                  output_names=["sum"])
    assert _dims(load(static).graph.input[0]) == [2, 2]
    assert _dims(load(static).graph.output[0]) == [2]
    oxport.export(SumModule(), (torch.ones(2, 2),), dynamic, input_names=["x"],
                  output_names=["sum"],
                  dynamic_axes={"x": {0: "my_custom_axis_name"}, "sum": [0]})
    proto = load(dynamic)
    assert _dims(proto.graph.input[0]) == ["my_custom_axis_name", 2]
    assert _dims(proto.graph.output[0]) == ["sum_dynamic_axes_1"]
    x = torch.randn(5, 2)
    np.testing.assert_allclose(_run(dynamic, x)[0], x.sum(1).numpy(), **TOL)


def test_dynamic_axes_list_names_count_from_one_and_negative_axes(tmp_path):
    f = str(tmp_path / "m.onnx")
    oxport.export(Pair(), torch.randn(2, 3, 4), f, input_names=["x"],
                  dynamic_axes={"x": [0, -1]})
    assert _dims(load(f).graph.input[0]) == ["x_dynamic_axes_1", 3, "x_dynamic_axes_2"]


# -- custom_opsets, export_modules_as_functions, autograd_inlining ---------------------------
@pytest.fixture
def custom_relu():
    def symbolic(g, x):
        return g.op("custom_domain::MyRelu", x)

    oxport.register_custom_op_symbolic("aten::relu", symbolic, 9)
    yield
    oxport.unregister_custom_op_symbolic("aten::relu", 9)


@pytest.mark.parametrize("custom_opsets, version", [(None, 1), ({"custom_domain": 3}, 3)])
def test_custom_opsets(custom_relu, custom_opsets, version):
    proto = oxport.convert(Net().eval(), torch.randn(2, 3), custom_opsets=custom_opsets,
                           ).model_proto
    imports = {o.domain: o.version for o in proto.opset_import}
    assert imports == {"": 20, "custom_domain": version}
    assert [n.domain for n in proto.graph.node if n.op_type == "MyRelu"] == ["custom_domain"]
    assert proto.ir_version == onnx.helper.find_min_ir_version_for(
        list(proto.opset_import), ignore_unknown=True)


def test_autograd_inlining_reaches_the_conversion(monkeypatch):
    seen = []
    original = walk.Conversion.run

    def spy(self, front):
        seen.append(self.autograd_inlining)
        return original(self, front)

    monkeypatch.setattr(walk.Conversion, "run", spy)
    oxport.convert(Net().eval(), torch.randn(2, 3), autograd_inlining=False)
    oxport.convert(Net().eval(), torch.randn(2, 3))
    assert seen == [False, True]


# -- outputs ------------------------------------------------------------------------------------
class DictOut(nn.Module):
    def forward(self, x):
        return {"double": x * 2, "label": "hello", "pair": (x + 1, x - 1)}


def test_dict_outputs_are_flattened_and_str_outputs_dropped_with_a_warning(tmp_path):
    """A dict loses nothing (its keys name the outputs): only the dropped str warns."""
    x = torch.randn(2, 3)
    f = str(tmp_path / "m.onnx")
    with pytest.warns(UserWarning) as record:
        result = oxport.export(DictOut(), x, f)
    messages = [str(w.message) for w in record]
    assert not any("dict output" in m for m in messages)
    assert any("str output" in m and "'hello'" in m and "dropped" in m for m in messages)
    assert any("dict output" in n and "['double', 'label', 'pair']" in n
               for n in result.output_notes)
    assert [o.name for o in onnx.load(f).graph.output] == ["double", "pair.0", "pair.1"]
    got = _run(f, x)
    assert len(got) == 3
    for g, want in zip(got, (x * 2, x + 1, x - 1)):
        np.testing.assert_allclose(g, want.numpy(), **TOL)


def test_plain_tensor_outputs_warn_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        oxport.convert(Net().eval(), torch.randn(2, 3))


# -- export_to_pretty_string, is_in_onnx_export, logging -------------------------------------
def test_export_to_pretty_string():
    text = oxport.export_to_pretty_string(Net().eval(), torch.randn(2, 3), input_names=["x"])
    assert text.startswith("graph(%x : Float(2, 3),")
    assert "= onnx::Relu(" in text and text.rstrip().endswith("}")
    google = oxport.export_to_pretty_string(Net().eval(), torch.randn(2, 3),
                                            google_printer=True)
    assert 'op_type: "Gemm"' in google and "ir_version:" in google


def test_is_in_onnx_export_inside_forward_and_symbolics(monkeypatch):
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(("forward", oxport.is_in_onnx_export()))
            return torch.relu(x)

    def symbolic(g, x):
        seen.append(("symbolic", oxport.is_in_onnx_export()))
        return g.op("Relu", x)

    oxport.register_custom_op_symbolic("aten::relu", symbolic, 7)
    try:
        assert not oxport.is_in_onnx_export()
        oxport.convert(Probe(), torch.randn(2))
    finally:
        oxport.unregister_custom_op_symbolic("aten::relu", 7)
    assert seen == [("forward", True), ("symbolic", True)]
    assert not oxport.is_in_onnx_export()


def test_is_in_onnx_export_is_reset_after_a_failure():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("broken model")

    with pytest.raises(oxport.OnnxExporterError):
        oxport.convert(Broken(), torch.randn(2))
    assert not oxport.is_in_onnx_export()


def test_enable_and_disable_log(capsys, restore_logging):
    oxport.enable_log()
    oxport.convert(Net().eval(), torch.randn(2, 3))
    assert "exported" in capsys.readouterr().err
    oxport.disable_log()
    oxport.convert(Net().eval(), torch.randn(2, 3))
    assert "exported" not in capsys.readouterr().err


def test_a_missing_fallback_plugin_is_a_clear_error():
    fallbacks = [p.name for p in plugin_manager.load().plugins if p.registered.get("fallbacks")]
    with pytest.raises(oxport.errors.InvalidExportArgumentError) as info:
        oxport.convert(Net().eval(), torch.randn(2, 3), disable_plugins=fallbacks,
                       operator_export_type=OperatorExportTypes.ONNX_ATEN_FALLBACK)
    message = str(info.value)
    assert "operator_export_type=OperatorExportTypes.ONNX_ATEN_FALLBACK" in message
    assert "'aten-fallback' fallback plugin" in message and "OperatorExportTypes.ONNX" in message


class ScaledLayer(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4) * 0.3)
        self.scale = scale

    def forward(self, x):
        return torch.matmul(x, self.weight.view(4, 4) * self.scale + 1.0)


@pytest.mark.parametrize("fold", [True, False])
def test_many_small_constants_keep_their_own_values(fold):
    """Regression: deferred constants were cached by id(), which Python reuses after a
    constant is freed; deep models then fed one constant's node to another's users."""
    model = nn.Sequential(*[ScaledLayer(0.5 + i / 100) for i in range(60)]).eval()
    x = torch.randn(2, 4)
    buffer = io.BytesIO()
    oxport.export(model, x, buffer, do_constant_folding=fold)
    np.testing.assert_allclose(_run(buffer, x)[0], model(x).detach().numpy(), rtol=1e-3,
                               atol=1e-5)
