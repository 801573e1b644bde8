"""oxport.export as a drop-in for torch.onnx.export: torch's enums, torch 2.13's keywords,
the seed's positional order, and the same graph signature as torch.onnx's TorchScript path."""

from __future__ import annotations

import io

import onnx
import pytest
import torch

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.types import JitScalarType, OperatorExportTypes, TrainingMode


class AddOptional(torch.nn.Module):
    def forward(self, x, y=None):
        return x.relu() if y is None else x + y


def _proto(buffer: io.BytesIO) -> onnx.ModelProto:
    return onnx.load_from_string(buffer.getvalue())


def test_torch_enums_are_accepted_and_compare_equal():
    assert TrainingMode(torch.onnx.TrainingMode.PRESERVE) is TrainingMode.PRESERVE
    assert OperatorExportTypes(torch.onnx.OperatorExportTypes.ONNX_FALLTHROUGH) \
        is OperatorExportTypes.ONNX_FALLTHROUGH
    assert JitScalarType(torch.onnx.JitScalarType.BFLOAT16) is JitScalarType.BFLOAT16
    assert TrainingMode.EVAL == torch.onnx.TrainingMode.EVAL
    assert TrainingMode.EVAL != torch.onnx.TrainingMode.TRAINING
    assert OperatorExportTypes.ONNX == torch.onnx.OperatorExportTypes.ONNX
    with pytest.raises(ValueError):  # a member of another enum is not taken by its name
        TrainingMode(torch.onnx.OperatorExportTypes.ONNX)


def test_seed_positional_call_with_torch_enums():
    buffer = io.BytesIO()
    oxport.export(AddOptional(), (torch.randn(2, 3),), buffer, True, False,
                  torch.onnx.TrainingMode.EVAL, ["x"], ["out"],
                  torch.onnx.OperatorExportTypes.ONNX, 17, True, {"x": {0: "batch"}})
    proto = _proto(buffer)
    assert [i.name for i in proto.graph.input] == ["x"]
    assert [o.name for o in proto.graph.output] == ["out"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.opset_import[0].version == 17


def test_torch_2_keywords_with_dynamo_false():
    x = torch.randn(2, 3)
    buffer = io.BytesIO()
    oxport.export(AddOptional(), (x,), buffer, kwargs={"y": x}, dynamo=False,
                  external_data=False, optimize=True, verify=True, report=False,
                  profile=False, dump_exported_program=False, artifacts_dir=".",
                  custom_translation_table=None, verbose=None, opset_version=17,
                  training=torch.onnx.TrainingMode.EVAL,
                  operator_export_type=torch.onnx.OperatorExportTypes.ONNX)
    assert [i.name for i in _proto(buffer).graph.input] == ["x", "y"]


def test_f_none_converts_without_writing():
    result = oxport.export(AddOptional(), torch.randn(2, 3))
    assert [i.name for i in result.model_proto().graph.input] == ["x"]


@pytest.mark.parametrize("keywords, match", [
    ({"dynamic_shapes": {"x": {0: "batch"}}}, r"dynamic_shapes= is for dynamo=True.*dynamic_axes"),
    ({"training": 7}, r"training=7 is not valid: pass one of TrainingMode.EVAL"),
    ({"operator_export_type": torch.onnx.TrainingMode.EVAL},
     r"operator_export_type=.* is not valid: pass one of OperatorExportTypes.ONNX"),
    ({"kwargs": [1]}, r"kwargs must be a dict"),
])
def test_bad_drop_in_arguments_name_the_fix(tmp_path, keywords, match):
    target = tmp_path / "m.onnx"
    with pytest.raises(InvalidExportArgumentError, match=match):
        oxport.export(AddOptional(), (torch.randn(2, 3),), target, **keywords)
    assert not target.exists()


def test_verify_failure_writes_nothing(tmp_path):
    class Wrong(torch.nn.Module):  # eager and ONNX differ: a symbolic that adds 1
        def forward(self, x):
            return torch.ops.aten.elu(x)

    def bad_elu(g, x, *rest):
        return g.op("Add", x, g.op("Constant", value_t=torch.tensor(1.0)))

    oxport.register_custom_op_symbolic("aten::elu", bad_elu, 9)
    target = tmp_path / "m.onnx"
    try:
        with pytest.raises(oxport.verification.VerificationError):
            oxport.export(Wrong(), (torch.randn(2, 3),), target, verify=True)
    finally:
        oxport.unregister_custom_op_symbolic("aten::elu", 9)
    assert not target.exists()
