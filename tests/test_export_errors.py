"""Bad input to ``oxport.export``: a clear error naming the problem and the fix, no file left."""

from __future__ import annotations

import os

import onnx
import pytest
import torch
from torch import nn

import oxport
from oxport import errors
from oxport.errors import (
    CheckerError,
    InvalidExportArgumentError,
    OnnxExporterError,
    SymbolicError,
    UnsupportedOperatorError,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


X = torch.randn(2, 3)


def _fails(tmp_path, error: type[Exception], match: str, model=None, args=(X,), name="m.onnx",
           **kwargs) -> Exception:
    """Export must raise ``error`` matching ``match`` and leave the folder empty."""
    target = tmp_path / name
    with pytest.raises(error, match=match) as info:
        oxport.export(Net() if model is None else model, args, str(target), **kwargs)
    assert isinstance(info.value, OnnxExporterError)
    assert os.listdir(tmp_path) == []
    return info.value


@pytest.mark.parametrize("opset", [6, 27, 0, -1, "20", 20.0, True])
def test_opset_outside_7_to_26(tmp_path, opset):
    _fails(tmp_path, InvalidExportArgumentError, r"use an int from 7 to 26 \(default 20\)",
           opset_version=opset)


def test_dynamic_axes_naming_an_unknown_value_warns_and_is_ignored(tmp_path):
    """As torch.onnx: a key that names no input or output (even a position's default
    name, once input_names renamed it) warns and is ignored."""
    for names, axes, known in ((["x"], {"z": [0], "x": {0: "batch"}}, "inputs ['x']"),
                               (["x"], {"input": [0]}, "inputs ['x']")):
        with pytest.warns(UserWarning, match="neither an input nor an output") as record:
            oxport.export(Net(), (X,), str(tmp_path / "m.onnx"), input_names=names,
                          output_names=["y"], dynamic_axes=axes)
        message = str(record[0].message)
        assert known in message and "ignored, as torch.onnx does" in message
    model = onnx.load(str(tmp_path / "m.onnx"))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == X.shape[0]


@pytest.mark.parametrize("axes, where", [({"x": [2]}, "'x' has rank 2"),
                                         ({"x": {-3: "b"}}, "'x' has rank 2"),
                                         ({"y": {5: "b"}}, "'y' has rank 2")])
def test_dynamic_axes_axis_out_of_range(tmp_path, axes, where):
    _fails(tmp_path, InvalidExportArgumentError, where, input_names=["x"], output_names=["y"],
           dynamic_axes=axes)


@pytest.mark.parametrize("axes", [[0], {"x": 0}, {"x": "batch"}])
def test_dynamic_axes_malformed(tmp_path, axes):
    _fails(tmp_path, InvalidExportArgumentError, "dynamic_axes", input_names=["x"],
           dynamic_axes=axes)


def test_more_input_names_than_inputs_and_parameters(tmp_path):
    error = _fails(tmp_path, InvalidExportArgumentError, "input_names has 4 names",
                   input_names=["a", "b", "c", "d"])
    assert "1 input and 2 parameters; give at most 3 names" in str(error)


def test_more_output_names_than_outputs(tmp_path):
    _fails(tmp_path, InvalidExportArgumentError,
           "output_names has 2 names but the model has 1 output; give at most 1",
           output_names=["y", "z"])


def test_a_name_given_twice(tmp_path):
    _fails(tmp_path, InvalidExportArgumentError, "'a' is given to two different values",
           input_names=["a"], output_names=["a"])


def test_nonexistent_directory(tmp_path):
    with pytest.raises(InvalidExportArgumentError, match="does not exist. Create it first"):
        oxport.export(Net(), X, str(tmp_path / "missing" / "m.onnx"))
    assert os.listdir(tmp_path) == []


def test_target_is_a_directory(tmp_path):
    (tmp_path / "m.onnx").mkdir()
    with pytest.raises(InvalidExportArgumentError, match="it is a folder"):
        oxport.export(Net(), X, str(tmp_path / "m.onnx"))
    assert os.listdir(tmp_path) == ["m.onnx"] and os.listdir(tmp_path / "m.onnx") == []


def test_unwritable_directory_is_refused_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    _fails(tmp_path, InvalidExportArgumentError, "is not writable")


def test_a_failing_write_is_a_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    """The OS refusing the write (permissions as root, a full disk) after the checks passed."""
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refuse)
    _fails(tmp_path, OnnxExporterError, "Cannot write .*Permission denied.*nothing was written")


@pytest.mark.parametrize("model", [lambda x: x, None, "model.pt", nn.Linear])
def test_model_that_is_not_a_module(tmp_path, model):
    with pytest.raises(InvalidExportArgumentError, match="model must be a torch.nn.Module"):
        oxport.export(model, (X,), str(tmp_path / "m.onnx"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args, match", [
    ((X, X), "too many positional arguments"),
    ((), "missing a required argument: 'x'"),
    ((X, {"y": X}), "unexpected keyword argument 'y'"),
])
def test_args_that_do_not_match_forward(tmp_path, args, match):
    error = _fails(tmp_path, InvalidExportArgumentError, match, args=args)
    assert "Net.forward(x:" in str(error)
    assert "end args with a dict for named arguments" in str(error)


@pytest.mark.parametrize("args", ["text", {"x": X}, 3 + 4j])
def test_args_of_the_wrong_kind(tmp_path, args):
    _fails(tmp_path, InvalidExportArgumentError, "args must be a tuple", args=args)


def test_args_the_model_cannot_run_on(tmp_path):
    error = _fails(tmp_path, OnnxExporterError, "Running the model on args failed",
                   args=(torch.randn(2, 5),))
    assert "mat1 and mat2 shapes cannot be multiplied" in str(error)


def test_an_error_raised_by_forward_names_it(tmp_path):
    class Broken(nn.Module):
        def forward(self, x):
            raise KeyError("no such layer")

    error = _fails(tmp_path, OnnxExporterError, "KeyError: 'no such layer'", model=Broken())
    assert isinstance(error.__cause__, KeyError)


@pytest.fixture
def raising_relu():
    def symbolic(g, x):
        raise ValueError("boom in the symbolic")

    oxport.register_custom_op_symbolic("aten::relu", symbolic, 7)
    yield
    oxport.unregister_custom_op_symbolic("aten::relu", 7)


def test_a_symbolic_that_raises_names_the_plugin(tmp_path, raising_relu):
    error = _fails(tmp_path, SymbolicError, "The symbolic for aten::relu")
    message = str(error)
    assert "from register_custom_op_symbolic raised ValueError: boom in the symbolic" in message
    assert "test_export_errors.py" in message  # where the op is in the user's code
    assert "report it to its authors" in message


@pytest.fixture
def invalid_gemm():
    def symbolic(g, x, weight, bias):
        return g.op("Gemm", x, weight, bias, transB_i=1, not_an_attribute_i=3)

    oxport.register_custom_op_symbolic("aten::linear", symbolic, 7)
    yield
    oxport.unregister_custom_op_symbolic("aten::linear", 7)


def test_checker_failure_still_writes_the_file(tmp_path, invalid_gemm):
    """The seed: a CheckerError is raised after the (invalid) model is written."""
    target = tmp_path / "m.onnx"
    with pytest.raises(CheckerError, match="Unrecognized attribute: not_an_attribute"):
        oxport.export(Net(), X, str(target))
    assert os.listdir(tmp_path) == ["m.onnx"]
    assert target.stat().st_size > 0


def test_every_unconvertible_op_is_listed_at_once(tmp_path):
    """Only the prim pack loaded: both aten::linear and aten::relu are named, with a fix."""
    error = _fails(tmp_path, UnsupportedOperatorError, "Exporting 2 operators",
                   plugins=["oxport.prim"])
    message = str(error)
    assert "aten::linear (1 use" in message and "aten::relu (1 use" in message
    assert "aten::relu (1 use" in message and "): provided by oxport.activations, which is " \
        "not loaded: plugins= or OXPORT_PLUGINS does not list it" in message
    assert [op.kind for op in error.ops] == ["aten::linear", "aten::relu"]


@torch.library.custom_op("oxport_test_errors::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class _CallsTwice(torch.nn.Module):
    def forward(self, x):
        return _twice(x)


def test_advice_for_an_unknown_op_offers_only_what_works(tmp_path):
    """A non-aten op: only fallthrough carries it (aten-fallback would fail the same way)."""
    error = _fails(tmp_path, UnsupportedOperatorError, "Exporting 1 operator",
                   model=_CallsTwice(), args=(torch.randn(2),))
    message = str(error)
    assert "oxport_test_errors::twice (1 use" in message
    assert "install an op pack that provides it, or register one with " \
        "oxport.register_custom_op_symbolic('oxport_test_errors::twice', fn, 20); or export " \
        "it as it is with fallbacks=['fallthrough']" in message
    assert "aten" not in message.replace("oxport_test_errors", "")
    # The advice works.
    with pytest.warns(errors.FallbackWarning, match="by the 'fallthrough' fallback"):
        oxport.export(_CallsTwice(), (torch.randn(2),), str(tmp_path / "ok.onnx"),
                      fallbacks=["fallthrough"])


@pytest.mark.parametrize("custom_opsets, match", [
    ({"": 2}, "must name a custom domain"),
    ({"ai.onnx": 2}, "must name a custom domain"),
    ({"custom": 0}, r"custom_opsets\['custom'\] must be an int >= 1"),
])
def test_malformed_custom_opsets(tmp_path, custom_opsets, match):
    _fails(tmp_path, InvalidExportArgumentError, match, custom_opsets=custom_opsets)


def test_malformed_training_and_export_type(tmp_path):
    _fails(tmp_path, InvalidExportArgumentError, "TrainingMode.EVAL", training="eval")
    _fails(tmp_path, InvalidExportArgumentError, "OperatorExportTypes",
           operator_export_type=9)


def test_error_classes_share_one_base():
    for cls in (errors.UnsupportedOperatorError, errors.CheckerError, errors.SymbolicValueError,
                errors.InvalidExportArgumentError, errors.SymbolicError):
        assert issubclass(cls, OnnxExporterError)


def test_a_5d_grid_sample_below_opset_20_is_refused():
    """As torch.onnx: 5-D GridSample is ONNX's from opset 20 only; below, a clear error."""
    class Volumetric(torch.nn.Module):
        def forward(self, x, grid):
            return torch.nn.functional.grid_sample(x, grid, align_corners=False)

    with pytest.raises(OnnxExporterError, match="GridSample over a 5-D"):
        oxport.convert(Volumetric(), (torch.randn(1, 1, 2, 3, 2), torch.randn(1, 3, 2, 4, 3)),
                       opset_version=17)
    assert issubclass(OnnxExporterError, RuntimeError)


def _scripted_qat_conv_bn() -> torch.jit.ScriptModule:
    """A scripted QAT conv-bn-relu: its weight goes through aten::fused_moving_avg_obs_fake_quant
    (which torch.onnx does not export either), and TorchScript gives that value no sizes."""
    import warnings

    from torch.ao.nn.intrinsic.qat import ConvBnReLU2d
    from torch.ao.quantization import get_default_qat_qconfig

    model = ConvBnReLU2d(3, 4, 3, qconfig=get_default_qat_qconfig("fbgemm")).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(model)


def test_an_op_downstream_of_an_unconvertible_one_is_not_blamed(tmp_path):
    """conv2d and batch_norm cannot convert a weight no symbolic computed: the error names
    the op that has no symbolic, not theirs as a bug in their plugin."""
    error = _fails(tmp_path, UnsupportedOperatorError, "Exporting 1 operator",
                   model=_scripted_qat_conv_bn(), args=(torch.randn(2, 3, 8, 8),),
                   opset_version=17)
    assert [op.kind for op in error.ops] == ["aten::fused_moving_avg_obs_fake_quant"]
    kinds = oxport.unconvertible_ops(_scripted_qat_conv_bn(), (torch.randn(2, 3, 8, 8),),
                                     opset_version=17)[1]
    assert kinds == ["aten::fused_moving_avg_obs_fake_quant"]


def test_a_forward_failing_while_tracing_names_the_error_without_printing_its_tensor(tmp_path):
    outside = nn.Parameter(torch.randn(40, 40))  # not the module's: the tracer refuses it

    class UsesAnOutsideWeight(nn.Module):
        def forward(self, x):
            return x @ outside

    with pytest.raises(OnnxExporterError) as caught:
        oxport.export(UsesAnOutsideWeight(), (torch.randn(2, 40),), str(tmp_path / "m.onnx"))
    message = str(caught.value)
    assert "Cannot insert a Tensor that requires grad as a constant" in message
    assert "FloatTensor" not in message and len(message) < 1000
    assert not (tmp_path / "m.onnx").exists()
