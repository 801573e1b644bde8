"""``docs/supported_ops.md`` is the registry's support table, and covers the seeds' list."""

from __future__ import annotations

import pathlib
import re

import pytest

from oxport import cli, plugins
from oxport.cli import support_table
from oxport.registry import Layer
from oxport.types import MAX_OPSET, MIN_OPSET

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "supported_ops.md"

#: The seed's "The following operators are supported" list (000_*.txt), as the TorchScript
#: ops a trace records; a name not listed here records as ``aten::<name>``.
SEED_OPS = [
    "BatchNorm", "ConstantPadNd", "Conv", "Dropout", "Embedding", "FeatureDropout", "Index",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "RNN", "abs", "absolute", "acos",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "add", "addmm", "and", "arange", "argmax",
    "argmin", "asin", "atan", "avg_pool1d", "avg_pool2d", "avg_pool3d", "baddbmm", "bitshift",
    "cat", "ceil", "celu", "clamp", "clamp_max", "clamp_min", "concat", "copy", "cos",
    "cumsum", "det", "dim_arange", "div", "dropout", "einsum", "elu", "empty", "empty_like",
    "eq", "erf", "exp", "expand", "expand_as", "flatten", "floor", "floor_divide",
    "frobenius_norm", "full", "full_like", "gather", "ge", "gelu", "glu", "group_norm", "gt",
    "hardtanh", "im2col", "index_copy", "index_fill", "index_put", "index_select",
    "instance_norm", "interpolate", "isnan", "layer_norm", "le", "leaky_relu", "log", "log1p",
    "log2", "log_sigmoid", "log_softmax", "logdet", "logsumexp", "lt", "masked_fill",
    "masked_scatter", "masked_select", "max", "mean", "min", "mm", "mul", "multinomial",
    "narrow", "ne", "neg", "nll_loss", "nonzero", "norm", "ones", "ones_like", "or", "permute",
    "pixel_shuffle", "pow", "prelu", "prod", "rand", "randn", "randn_like", "reciprocal",
    "reflection_pad", "relu", "repeat", "replication_pad", "reshape", "reshape_as", "round",
    "rrelu", "rsqrt", "rsub", "scalar_tensor", "scatter", "scatter_add", "select", "selu",
    "sigmoid", "sign", "sin", "size", "slice", "softmax", "softplus", "sort", "split", "sqrt",
    "squeeze", "stack", "std", "sub", "sum", "t", "tan", "tanh", "threshold", "to", "topk",
    "transpose", "true_divide", "type_as", "unbind", "unfold", "unique", "unsqueeze",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "view", "weight_norm",
    "where", "zeros", "zeros_like",
]
RECORDED_AS = {
    "BatchNorm": ["batch_norm"], "ConstantPadNd": ["constant_pad_nd"], "Conv": ["_convolution"],
    "Dropout": ["dropout"], "Embedding": ["embedding"], "FeatureDropout": ["feature_dropout"],
    "Index": ["index"], "MaxPool1d": ["max_pool1d"], "MaxPool2d": ["max_pool2d"],
    "MaxPool3d": ["max_pool3d"], "RNN": ["rnn_tanh", "rnn_relu", "lstm", "gru"],
    "absolute": ["abs"], "and": ["__and__"], "or": ["__or__"],
    "bitshift": ["__lshift__", "__rshift__"], "concat": ["cat"], "copy": ["copy_"],
    "det": ["linalg_det"], "dim_arange": ["_dim_arange"],
    "frobenius_norm": ["linalg_vector_norm"], "true_divide": ["div"], "unique": ["_unique2"],
    "weight_norm": ["_weight_norm"],
    "interpolate": ["upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d"],
    "reflection_pad": [f"reflection_pad{n}d" for n in (1, 2, 3)],
    "replication_pad": [f"replication_pad{n}d" for n in (1, 2, 3)],
}


def _export_results() -> dict:
    return support_table.load_export_results(str(ROOT / support_table.EXPORT_RESULTS))


def _builtin_table() -> str:
    """The table of the built-in packs (third-party packs installed here add rows), with
    the committed torch.export case run."""
    registry = plugins.load().registry
    return support_table.render((e for e in registry.entries() if e.layer is Layer.BUILTIN),
                                _export_results())


def test_committed_table_matches_the_registry():
    assert DOC.read_text(encoding="utf-8") == _builtin_table(), (
        f"docs/supported_ops.md is out of date with the registry or the torch.export case "
        f"run: regenerate it with `{support_table.REGENERATE}` (in an environment without "
        "third-party op packs).")


def test_the_torch_export_column_comes_from_a_complete_run():
    results = _export_results()
    assert results["complete"], "a run of every case (no --only, no --every)"
    counted = results["ops"].values()
    assert sum(c["runs"] for c in counted) == results["runs"]
    assert sum(c["passed"] for c in counted) == results["passed"]
    text = DOC.read_text(encoding="utf-8")
    assert "| operator | opsets | variants | torch.export | provider |" in text
    assert f"run of {results['date']}: {results['passed']} of {results['runs']} runs pass" \
        in text


@pytest.mark.parametrize("counts, status", [
    (None, "–"),
    ({"runs": 2, "passed": 2, "not_captured": 0}, "yes"),
    ({"runs": 4, "passed": 2, "not_captured": 1, "first_failure": "x"}, "2/3 runs"),
    ({"runs": 2, "passed": 0, "not_captured": 2, "first_failure": "x"}, "not captured"),
    ({"runs": 0, "passed": 0, "not_captured": 0, "not_exportable": {"a": "scripted"}},
     "scripted only"),
    ({"runs": 0, "passed": 0, "not_captured": 0,
      "not_exportable": {"a": "scripted", "a[q]": "eager-mode quantized"}}, "not capturable"),
])
def test_export_status(counts, status):
    assert support_table.export_status(counts) == status


def test_ops_needs_markdown_for_export_results(capsys, tmp_path):
    assert cli.main(["ops", "--export-results", "x.json"]) == 2
    assert "--export-results needs --markdown" in capsys.readouterr().err
    old = tmp_path / "old.json"
    old.write_text('{"runs": 1, "passed": 1}')
    assert cli.main(["ops", "--markdown", "--export-results", str(old)]) == 2
    assert "no counts per op" in capsys.readouterr().err


def test_cli_writes_the_table(tmp_path):
    out = tmp_path / "ops.md"
    assert cli.main(["ops", "--markdown", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == support_table.render(
        plugins.load().registry.entries())


def test_cli_output_needs_markdown(capsys):
    assert cli.main(["ops", "-o", "ops.md"]) == 2
    assert "--markdown" in capsys.readouterr().err


def test_table_counts_aten_ops_per_opset():
    text = DOC.read_text(encoding="utf-8")
    registry = plugins.load().registry
    builtin = [e for e in registry.entries() if e.layer is Layer.BUILTIN]
    for opset in (MIN_OPSET, 13, MAX_OPSET):
        count = len({e.name for e in builtin if e.serves(opset) and e.name.startswith("aten::")})
        assert re.search(rf"^\| {opset} \| {count} \| \d+ \|$", text, re.M), opset
    total = len({e.name for e in builtin if e.name.startswith("aten::")})
    assert f"**{total} aten operators**" in text


@pytest.mark.parametrize("seed_name", SEED_OPS)
def test_table_lists_the_seeds_operators(seed_name):
    text = DOC.read_text(encoding="utf-8")
    for name in RECORDED_AS.get(seed_name, [seed_name]):
        assert f"| `aten::{name}` |" in text, f"the seed's {seed_name!r} (aten::{name})"
