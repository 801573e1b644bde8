"""A CI guard for the scripted op-case sweep (``OXPORT_TEST_FRONT_ENDS=script``, too long for
CI): a handful of traced op cases run scripted, from the families whose scripted forms
needed their own handling (complex and FFT ops, 3-D padding, lists computed at run time),
and the error for slicing a list of tensors built at run time below opset 13."""

from __future__ import annotations

from typing import List

import pytest
import torch

import oxport
from oxport import testing
from oxport.errors import UnsupportedOperatorError

#: Cases (as the op-test ids name them) and the one opset each runs at here.
GUARDED = {
    "aten::stft": 17,  # F.pad's [1] * (3 - dim) + list(x.size()) folds
    "aten::fft_irfft[polar_trimmed_ortho]": 20,  # complex values made inside the graph
    "aten::to[complex]": 13,  # a cast to a complex dtype read from the arguments
    "aten::unsqueeze[complex]": 17,  # a negative dim counts before the real pairs' axis
    "aten::reflection_pad3d": 13,  # [1] * 6 folds
    "aten::replication_pad3d": 20,
    "aten::size[whole]": 17,  # x.size()[::-1] of a shape known at run time only
    "aten::upsample_nearest2d[dynamic_size]": 17,  # F.interpolate(size=y.shape[-2:])
    "aten::split_with_sizes[run_time_sizes]": 13,  # a list comprehension over the pieces
    "aten::tensor_split[run_time_count]": 20,  # as many pieces as the run says: a Sequence
    "aten::binary_cross_entropy[weight_saturated]": 17,  # _infer_size of an Optional weight
    "aten::sum[0d]": 13,  # keepdim on a scalar stays a scalar
}


def _guarded_runs() -> list[testing.CaseRun]:
    registry = testing.registry_view()
    entries = testing.entries_of(registry, distribution="oxport")
    runs = [run for run in testing.expand(entries, registry.cases, front_ends=("script",))
            if GUARDED.get(str(run.case)) == run.opset]
    return runs


_RUNS = _guarded_runs()


def test_every_guarded_case_is_found():
    assert sorted(str(run.case) for run in _RUNS) == sorted(GUARDED)


@pytest.mark.parametrize("case_run", _RUNS, ids=[run.id for run in _RUNS])
def test_scripted_op_case(case_run: testing.CaseRun) -> None:
    testing.run(case_run)


@torch.jit.script
def _slice_grown(x: torch.Tensor) -> torch.Tensor:
    rows: List[torch.Tensor] = []
    for i in range(x.size(0)):
        rows.append(x[i] * i)
    return torch.stack(rows[1:])


def test_slicing_a_list_of_tensors_built_at_run_time_names_opset_13():
    with pytest.raises(UnsupportedOperatorError, match=r"aten::slice .*test_scripted_op_cases"
                       r"\.py\", line \d+.*slicing a list of tensors built at run time.*"
                       r"opset 13 would support it"):
        oxport.convert(_slice_grown, (torch.randn(4, 3),), opset_version=12)


def test_a_case_declared_not_scriptable_must_fail_with_its_error():
    from oxport.registry import OpCase

    registry = testing.registry_view()
    entry = registry.lookup("aten::mul", 17)
    exports = OpCase("aten::mul", lambda x: x * 2, ((2, 3),), not_scriptable="any error")
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        testing.run(testing.CaseRun(exports, entry, 17, "script"), registry)
    refused = OpCase("aten::mul", _slice_grown, ((4, 3),), script=True,
                     not_scriptable="slicing a list of tensors built at run time")
    testing.run(testing.CaseRun(refused, entry, 12, "script"), registry)
