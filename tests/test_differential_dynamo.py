"""oxport's torch.export front end against torch.onnx.export(dynamo=True) (tests/differential.py).

Both exporters are called with ``dynamo=True`` at opsets 18, 20 and 23. torch.onnx's dynamo
export takes seconds a model, so CI compares a sample (:data:`OP_CASE_SAMPLE`,
:data:`LAYER_SAMPLE`, each at one opset in turn, and the models of :data:`MODELS` at all
three); ``OXPORT_DIFFERENTIAL=full`` compares everything at every opset. Where torch.onnx
cannot export or run a model, oxport's file must match eager or oxport must refuse with its
own error. Every other difference fails unless the dynamo section of docs/differences.md
lists it; one listed as an open bug is an expected failure (xfail).
"""

from __future__ import annotations

import os

import pytest

from tests import differential

FULL = os.environ.get("OXPORT_DIFFERENTIAL") == "full"
TABLE = differential.intended_differences(front_end="dynamo")
#: In CI, one op case in this many and one layer in that many, at one opset in turn.
OP_CASE_SAMPLE = 30
LAYER_SAMPLE = 10
#: The models compared in CI (at every opset).
MODELS = ("model.mlp", "model.dcgan.generator")


def _runs() -> list[object]:
    op_cases = differential.op_case_subjects(front_end="dynamo")
    layers = differential.layer_subjects(differential.DYNAMO_OPSETS)
    models = differential.model_subjects(opsets=differential.DYNAMO_OPSETS)
    if FULL:
        runs = differential.sampled([*op_cases, *layers, *models], 1)
    else:
        runs = [*differential.sampled(op_cases, OP_CASE_SAMPLE),
                *differential.sampled(layers, LAYER_SAMPLE),
                *differential.sampled([m for m in models if m.id in MODELS], 1)]
    return [pytest.param(subject, opset, id=f"{subject.id}-opset{opset}")
            for subject, opset in runs]


@pytest.mark.parametrize(("subject", "opset"), _runs())
def test_same_as_torch_onnx_dynamo(subject: differential.Subject, opset: int) -> None:
    differential.check(subject, opset, TABLE, "dynamo",
                       "the dynamo section of docs/differences.md")


def test_the_dynamo_tables_parse_apart_from_the_trace_ones() -> None:
    assert TABLE and all(row.reason for row in TABLE)
    assert {row.status for row in TABLE} <= {
        "signature", "values", "values (torch.onnx wrong)", "signature (torch.onnx wrong)",
        "oxport-fails", "oxport-runtime-fails"}
    trace = differential.intended_differences()
    assert not any(row in trace for row in TABLE if row.cases != "`*`")
