"""The export report and node provenance: ops per plugin, fallbacks, tracing warnings and
pitfalls by source line, dynamic axes that ended up static, changed outputs, timings;
provenance in the result, in verbose doc strings and metadata, and in checker errors."""

from __future__ import annotations

import inspect
import io
import json

import numpy as np
import pytest
import torch

import oxport
from oxport.errors import CheckerError
from oxport.diagnose.report import ExportReport, build_report

pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning",
                                        "ignore::UserWarning")


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)

    def forward(self, x):
        return self.fc(x).relu()


class Pitfalls(torch.nn.Module):
    """Every pitfall of the seed's "Avoiding Pitfalls", one per line."""

    def forward(self, x, n):
        scale = n.item()
        offset = torch.tensor(np.ones(3).sum())
        frozen = x.data
        batch, width = x.shape[:2]
        grown = width
        grown += 2
        return x * scale + offset + frozen + grown


class FixedRows(torch.nn.Module):
    def forward(self, x):
        return (x * 2).reshape(3, -1)


def test_report_counts_ops_per_plugin_and_timings():
    result = oxport.convert(Mlp(), (torch.randn(2, 3),))
    report = result.report()
    assert isinstance(report, ExportReport) and report.opset == result.opset
    nn_plugin = next(p for p in report.ops_by_plugin if p.startswith("oxport.nn "))
    assert report.ops_by_plugin[nn_plugin]["aten::linear"] == 1
    assert any(ops.get("aten::relu") == 1 for ops in report.ops_by_plugin.values())
    assert set(report.timings) >= {"trace", "convert", "serialize"}
    assert not report.fallbacks and not report.pitfalls and not report.static_axes
    text = report.to_text()
    for section in ("Ops converted, by plugin:", "Fallbacks used:", "Pitfalls:",
                    "Dynamic axes that ended up static:", "Outputs changed:", "Timings:"):
        assert section in text
    assert json.loads(json.dumps(report.to_json()))["ops_by_plugin"] == report.ops_by_plugin


def test_pitfalls_by_source_line():
    model = Pitfalls()
    result = oxport.convert(model, (torch.randn(2, 3), torch.tensor(2.0)),
                            input_names=["x", "n"])
    report = result.report(model)
    found = {(p.kind, p.location.rsplit(":", 1)[-1]) for p in report.pitfalls}
    fn = Pitfalls.forward
    assert ("python-value", str(line_of(fn, "n.item()"))) in found
    assert ("numpy", str(line_of(fn, "np.ones"))) in found
    assert ("constant-tensor", str(line_of(fn, "np.ones"))) in found
    assert ("tensor-data", str(line_of(fn, "x.data"))) in found
    assert ("inplace-shape", str(line_of(fn, "grown += 2"))) in found
    assert ("unused-input", "") in found  # n was read through .item(): the graph ignores it
    item = next(p for p in report.pitfalls if p.kind == "python-value")
    assert item.code == "scale = n.item()" and "x.reshape(y, -1)" in item.advice
    groups = {g.location.rsplit(":", 1)[-1]: g for g in report.warnings}
    assert groups[str(line_of(fn, "n.item()"))].category == "TracerWarning"
    # Without the model, only what the trace and the graph show.
    kinds = {p.kind for p in result.report().pitfalls}
    assert kinds == {"python-value", "constant-tensor", "unused-input"}


def test_static_axes_name_the_line():
    result = oxport.convert(FixedRows(), (torch.randn(3, 4),), input_names=["x"],
                            dynamic_axes={"x": {0: "batch"}})
    (axis,) = result.report().static_axes
    assert (axis.axis, axis.size, axis.dim_name) == (0, 3, "batch")
    line = line_of(FixedRows.forward, "reshape(3, -1)")
    assert axis.culprits == [f"{__file__}({line}): forward (Reshape with the constant "
                             "[3, -1] from aten::reshape)"]
    declared = oxport.convert(FixedRows(), (torch.randn(3, 4),), input_names=["x"],
                              output_names=["y"],
                              dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    (axis,) = declared.report().static_axes
    assert axis.output == "y" and "declared dynamic ('batch')" in axis.reason
    assert axis.culprits and f"({line}): forward" in axis.culprits[0]


def test_dynamic_model_has_no_static_axes():
    result = oxport.convert(Mlp(), (torch.randn(2, 3),), input_names=["x"],
                            output_names=["y"],
                            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    assert result.report().static_axes == []


def test_changed_outputs_and_fallbacks_are_reported():
    class Outputs(torch.nn.Module):
        def forward(self, x):
            return {"y": x + 1, "name": "text"}

    report = oxport.convert(Outputs(), (torch.randn(2),)).report()
    assert any("dict output" in note for note in report.output_notes)
    assert any("str output" in note for note in report.output_notes)

    class Custom(torch.nn.Module):
        def forward(self, x):
            return torch.ops.report_test.twice(x)

    result = oxport.convert(Custom(), (torch.randn(2),),
                            operator_export_type=oxport.OperatorExportTypes.ONNX_FALLTHROUGH)
    report = result.report()
    assert report.fallbacks[0]["op"] == "report_test::twice"
    assert report.fallbacks[0]["fallback"] == "fallthrough"
    assert report.ops_by_plugin["fallback:fallthrough"] == {"report_test::twice": 1}
    origins = [o for o in result.provenance().values() if o.torch_op == "report_test::twice"]
    assert origins and origins[0].plugin == "fallback:fallthrough"


torch.library.define("report_test::twice", "(Tensor x) -> Tensor")


@torch.library.impl("report_test::twice", "cpu")
def _twice(x):
    return x * 2


def test_export_writes_the_report(tmp_path, capsys):
    target = tmp_path / "report.json"
    oxport.export(Mlp(), (torch.randn(2, 3),), io.BytesIO(), report=target)
    data = json.loads(target.read_text())
    assert set(data) == {"opset", "ops_by_plugin", "fallbacks", "warnings", "pitfalls",
                         "static_axes", "output_notes", "timings"}
    assert "write" in data["timings"]
    text = tmp_path / "report.txt"
    oxport.export(Mlp(), (torch.randn(2, 3),), io.BytesIO(), report=text)
    assert text.read_text().startswith("oxport export report (opset")
    oxport.export(Mlp(), (torch.randn(2, 3),), io.BytesIO(), report=True)
    assert "Ops converted, by plugin:" in capsys.readouterr().out


def test_provenance_in_the_result_doc_strings_and_metadata():
    result = oxport.convert(Mlp(), (torch.randn(2, 3),), verbose=True)
    table = result.provenance()
    gemm = next(name for name, o in table.items() if o.torch_op == "aten::linear")
    origin = result.provenance(gemm)
    line = line_of(Mlp.forward, "self.fc(x)")
    assert origin.source == f"{__file__}({line}): forward"
    assert origin.scope == "fc" and origin.plugin == "oxport.nn"
    assert origin.distribution == "oxport" and origin.version == oxport.__version__
    assert f"by oxport.nn (oxport {oxport.__version__})" in origin.describe()
    node = next(n for n in result.serialized.model.graph.node if n.name == gemm)
    assert f"plugin: oxport.nn (oxport {oxport.__version__})" in node.doc_string
    metadata = {p.key: p.value for p in result.serialized.model.metadata_props}
    counts = json.loads(metadata["oxport.plugins"])
    assert counts[f"oxport.nn (oxport {oxport.__version__})"] >= 1
    quiet = oxport.convert(Mlp(), (torch.randn(2, 3),))
    assert not any(p.key == "oxport.plugins" for p in quiet.serialized.model.metadata_props)


def test_checker_error_names_the_plugin_and_line():
    def bad_relu(g, x):
        return g.op("Relu", x, not_an_attribute_i=1)

    class Act(torch.nn.Module):
        def forward(self, x):
            return x.relu()

    oxport.register_custom_op_symbolic("aten::relu", bad_relu, 14)
    try:
        with pytest.raises(CheckerError) as caught:
            oxport.convert(Act(), (torch.randn(2),), opset_version=17)
    finally:
        oxport.unregister_custom_op_symbolic("aten::relu", 14)
    message = str(caught.value)
    assert "not_an_attribute" in message
    assert (f"(node /Relu_0 was made for aten::relu at {__file__}"
            f"({line_of(Act.forward, 'x.relu()')}): forward by the symbolic from "
            "register_custom_op_symbolic)") in message


def test_build_report_equals_result_report():
    result = oxport.convert(Mlp(), (torch.randn(2, 3),))
    assert build_report(result).to_json() == result.report().to_json()
