"""The long fuzz run: ``python -m tests.fuzz --models 10000 --opsets 13 17 20``.

Model ``i`` of seed ``S`` is ``generate(f"{S}-{i}")``, exported at opset
``opsets[i % len(opsets)]``, so any model of a run is reproduced by its seed alone
(``--only S-i``). Prints a summary table (Markdown) and writes every defect's reproducer
(and of every clean error) to ``--failures``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings

from .generator import generate
from .runner import DEFECTS, KINDS, Outcome, check


def summary(outcomes: list[Outcome], seconds: float, seed: str) -> str:
    """The run's result as a Markdown table: one row per opset."""
    counts: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for outcome in outcomes:
        counts[outcome.opset][outcome.kind] += 1
    dynamic = sum(o.case.second_inputs is not None for o in outcomes)
    lines = [f"{len(outcomes)} models (seed {seed!r}, {dynamic} with dynamic axes checked at "
             f"a second size), {seconds / 60:.1f} min.", "",
             "| opset | " + " | ".join(KINDS) + " |", "|---" * (len(KINDS) + 1) + "|"]
    for opset in sorted(counts):
        lines.append(f"| {opset} | " + " | ".join(str(counts[opset][k]) for k in KINDS) + " |")
    total = collections.Counter(o.kind for o in outcomes)
    lines.append("| all | " + " | ".join(str(total[k]) for k in KINDS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--start", type=int, default=0, help="first model index")
    parser.add_argument("--opsets", type=int, nargs="+", default=[13, 17, 20])
    parser.add_argument("--only", help="run one model, e.g. 0-123")
    parser.add_argument("--failures", default="fuzz-failures.txt",
                        help="file for the reproducers of every outcome but ok")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.only:
        seed, _, index = args.only.rpartition("-")
        opset = args.opsets[int(index) % len(args.opsets)]
        outcome = check(generate(args.only), opset)
        print(outcome.report())
        return int(outcome.kind in DEFECTS)
    start = time.monotonic()
    outcomes = []
    with open(args.failures, "w", encoding="utf-8") as failures:
        for index in range(args.start, args.start + args.models):
            outcome = check(generate(f"{args.seed}-{index}"),
                            args.opsets[index % len(args.opsets)])
            outcomes.append(outcome)
            if outcome.kind != "ok":
                failures.write(outcome.report() + "\n")
                failures.flush()
            if len(outcomes) % 100 == 0:
                print(f"{len(outcomes)} models", collections.Counter(o.kind for o in outcomes),
                      file=sys.stderr, flush=True)
    print(summary(outcomes, time.monotonic() - start, args.seed))
    return int(any(o.kind in DEFECTS for o in outcomes))


if __name__ == "__main__":
    sys.exit(main())
