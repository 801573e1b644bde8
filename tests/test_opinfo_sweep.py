"""The OpInfo sweep's fast subset: wherever torch.onnx's export of a sample matches eager,
oxport's must too (``benchmarks/opinfo_sweep.py`` runs the whole database; see
docs/opinfo_sweep.md)."""

from __future__ import annotations

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
