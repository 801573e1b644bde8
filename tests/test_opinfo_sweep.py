"""The OpInfo sweep's fast subset: wherever torch.onnx's export of a sample matches eager,
oxport's must too (``benchmarks/opinfo_sweep.py`` runs the whole database; see
docs/opinfo_sweep.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks import opinfo_sweep

#: A spread over the op families, two samples per dtype at opset 17 (about a minute).
FAST_SUBSET = [
    "abs", "add", "addmm", "amax", "argmax", "atan2", "baddbmm", "bitwise_left_shift",
    "broadcast_to", "bucketize", "cat", "chunk", "clamp", "cumsum", "diagonal", "div.floor_rounding",
    "expand", "flip", "gather", "index_add", "index_select", "logit", "masked_fill", "matmul",
    "max.reduction_with_dim", "mean", "meshgrid.list_of_tensors", "nn.functional.conv2d",
    "nn.functional.embedding", "nn.functional.gelu", "nn.functional.interpolate.nearest",
    "nn.functional.layer_norm", "nn.functional.one_hot", "permute", "remainder", "repeat",
    "reshape", "roll", "scatter_add", "softmax", "sort", "split", "stack", "sum", "take",
    "topk", "transpose", "tril", "where",
]


@pytest.fixture(scope="module")
def reports() -> dict[str, opinfo_sweep.OpReport]:
    found = opinfo_sweep.sweep(FAST_SUBSET, (17,), samples=2)
    return {r.name: r for r in found}


def test_the_subset_names_opinfos(reports):
    assert sorted(reports) == sorted(FAST_SUBSET)


@pytest.mark.parametrize("name", FAST_SUBSET)
def test_oxport_right_where_torch_onnx_is(name, reports):
    report = reports[name]
    assert sum(report.counts.values()), f"{name}: no sample ran ({report.skipped})"
    assert not report.torch_only, f"{name}: only torch.onnx matches eager: {report.torch_only}"


def test_merge_replaces_an_earlier_runs_opinfo(tmp_path):
    """--merge sweeps nothing: a later file's OpInfo replaces an earlier one's, in place."""
    def run(path, *reports):
        path.write_text(json.dumps([dict(name=n, counts=dict.fromkeys(opinfo_sweep.OUTCOMES, 0)
                                         | counts, skipped={}, torch_only=torch_only)
                                    for n, counts, torch_only in reports]))
        return str(path)

    before = run(tmp_path / "a.json", ("abs", {"both": 3}, []),
                 ("sort", {"torch_only": 1}, [["float32", 4, 17, "export: error"]]))
    after = run(tmp_path / "b.json", ("sort", {"both": 1, "oxport_only": 2}, []))
    merged, text = tmp_path / "merged.json", tmp_path / "merged.md"
    assert opinfo_sweep.main(["--merge", before, after, "--json", str(merged),
                              "--markdown", str(text)]) == 0
    assert [r["name"] for r in json.loads(merged.read_text())] == ["abs", "sort"]
    assert "| only torch.onnx right | 0 |" in text.read_text()
    assert "| `sort` | 1 | 0 | 2 | 0 | 0 |" in text.read_text()
    assert opinfo_sweep.main(["--merge", after, before, "--markdown", str(text)]) == 1
