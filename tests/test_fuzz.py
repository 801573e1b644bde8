"""The random-model fuzzer, a fixed-seed run of a few hundred models (about 30 s).

Each model either raises a clear oxport error or gives a file that passes the full
checker, runs in ONNX Runtime and matches eager at the export size and at a second size
of its dynamic axes (see ``tests/fuzz``). The long run is a command, documented in
``docs/fuzzing.md``: ``python -m tests.fuzz --models 10000``.
"""

from __future__ import annotations

import collections
import warnings

import pytest

from tests.fuzz.generator import generate
from tests.fuzz.runner import DEFECTS, check

MODELS = 300
OPSETS = (13, 17, 20)


@pytest.fixture(scope="module")
def outcomes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [check(generate(f"ci-{i}"), OPSETS[i % len(OPSETS)]) for i in range(MODELS)]


def test_no_silent_wrong_output_invalid_model_or_crash(outcomes):
    defects = [o for o in outcomes if o.kind in DEFECTS]
    assert not defects, "\n\n".join(o.report() for o in defects)


def test_the_run_exercises_exports_and_dynamic_axes(outcomes):
    kinds = collections.Counter(o.kind for o in outcomes)
    assert kinds["ok"] >= 0.9 * MODELS, kinds
    checked_twice = [o for o in outcomes if o.kind == "ok" and o.case.second_inputs is not None]
    assert len(checked_twice) >= MODELS // 3
    dtypes = {t.dtype for o in outcomes for t in o.case.inputs}
    assert len(dtypes) == 9, dtypes  # float16/32/64, int8-int64, uint8, bool
    assert any(t.dim() == 0 for o in outcomes for t in o.case.inputs)


def test_a_model_is_its_seed():
    first, again = generate("ci-7"), generate("ci-7")
    assert first.source == again.source and first.dynamic_axes == again.dynamic_axes
    assert all((a == b).all() for a, b in zip(first.inputs, again.inputs))
