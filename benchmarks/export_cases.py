"""How many op-test cases pass through the torch.export front end.

Runs every built-in case that torch.export can capture (not scripted, no
``not_exportable`` reason) at its lowest and highest opset with ``dynamo=True``, the
checks of the shared runner (full checker, ONNX Runtime against eager), and prints
the pass rate and each failure's first line, grouped by op; ``--json PATH`` keeps them,
with the counts per op that ``docs/supported_ops.md``'s torch.export column is made from
(``oxport.cli.support_table.EXPORT_RESULTS`` is the committed run).

    python -m benchmarks.export_cases [--only aten::add,aten::mul] [--every N] [--json out.json]
    python -m benchmarks.export_cases --json benchmarks/results/export-cases.json  # the table's

It takes a while (every case is captured by torch.export, about a second each): not a CI
step; ``--every 10`` runs every tenth case run, for an estimate.
"""

from __future__ import annotations

import argparse
import collections
import json
import datetime
import signal
import sys
import time
import warnings
from typing import Any

#: How oxport says torch.export itself failed on the model.
_CAPTURE = "torch.export could not capture"
#: A case that takes longer than this (seconds) counts as failed.
CASE_TIMEOUT_S = 120


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout(f"took over {CASE_TIMEOUT_S} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated op names to run")
    parser.add_argument("--every", type=int, default=1, help="run every N-th case run only")
    parser.add_argument("--json", default="", help="write the results here")
    options = parser.parse_args(argv)

    from oxport import testing

    registry = testing.registry_view()
    entries = testing.entries_of(registry, distribution="oxport")
    providers = {e.provenance for e in entries}
    cases = [c for c in registry.cases if c.provenance in providers]
    runs = testing.expand(entries, cases, front_ends=("export",))
    wanted = {name for name in options.only.split(",") if name}
    if wanted:
        runs = [r for r in runs if r.entry.name in wanted]
    runs = runs[::max(options.every, 1)]
    skipped = sorted({str(c) + ": " + (c.not_exportable or "scripted") for c in cases
                      if not testing.exportable(c)})
    failures: dict[str, str] = {}
    #: Per op (registry name): its runs, passes and runs torch.export could not capture.
    ops: dict[str, dict[str, Any]] = collections.defaultdict(
        lambda: {"runs": 0, "passed": 0, "not_captured": 0})
    for case in cases:
        if not testing.exportable(case):
            reason = case.not_exportable or "scripted"
            ops[case.op].setdefault("not_exportable", {})[str(case)] = reason
    signal.signal(signal.SIGALRM, _alarm)
    start = time.perf_counter()
    for index, case_run in enumerate(runs):
        signal.alarm(CASE_TIMEOUT_S)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                testing.run(case_run)
        except (Exception, _Timeout) as exc:  # noqa: BLE001 - every failure is a result
            first = (str(exc).strip().splitlines() or [""])[0]
            failures[case_run.id] = f"{type(exc).__name__}: {first[:300]}"
            print(f"FAILED {case_run.id}: {failures[case_run.id]}", file=sys.stderr, flush=True)
        finally:
            signal.alarm(0)
        counts = ops[case_run.entry.name]
        counts["runs"] += 1
        message = failures.get(case_run.id)
        if message is None:
            counts["passed"] += 1
        else:
            counts["not_captured"] += _CAPTURE in message
            counts.setdefault("first_failure", message)
        if (index + 1) % 100 == 0:
            print(f"  {index + 1}/{len(runs)} runs, {len(failures)} failed", file=sys.stderr)
    elapsed = time.perf_counter() - start
    passed = len(runs) - len(failures)
    uncaptured = [run_id for run_id, message in failures.items() if _CAPTURE in message]
    captured = len(runs) - len(uncaptured)
    rate = 100 * passed / captured if captured else 0.0
    print(f"torch.export front end: {passed} of the {captured} case runs torch.export captured "
          f"pass ({rate:.1f} %) in {elapsed:.0f} s; torch.export failed to capture "
          f"{len(uncaptured)} more runs, and {len(skipped)} cases are scripted or declared "
          "not exportable")
    by_op: dict[str, list[str]] = collections.defaultdict(list)
    for run_id, message in failures.items():
        by_op[run_id.split("[")[0].split("-since")[0]].append(f"{run_id}: {message}")
    for op, lines in sorted(by_op.items()):
        print(f"- {op}: {len(lines)} failed")
        for line in lines[:3]:
            print(f"    {line}")
    if options.json:
        with open(options.json, "w") as handle:
            json.dump({"date": datetime.date.today().isoformat(), "runs": len(runs),
                       "passed": passed, "not_captured": uncaptured, "failures": failures,
                       "not_exportable": skipped, "seconds": round(elapsed),
                       "complete": not wanted and options.every == 1,
                       "ops": dict(sorted(ops.items()))},
                      handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
