"""The long fuzz run: ``python -m tests.fuzz --models 10000 --opsets 13 17 20``.

Model ``i`` of seed ``S`` is ``generate(f"{S}-{i}")``, exported at opset
``opsets[i % len(opsets)]`` through each front end of ``--front-end`` (``trace``:
``dynamo=False``, ``dynamo``: ``dynamo=True``, ``both``), so any model of a run is
reproduced by its seed alone (``--only S-i``). Prints a summary table (Markdown) and writes every defect's reproducer
(and of every clean error) to ``--failures``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings

from .generator import generate
from .runner import DEFECTS, FRONT_ENDS, KINDS, Outcome, check


def summary(outcomes: list[Outcome], seconds: float, seed: str) -> str:
    """The run's result as a Markdown table: one row per front end and opset."""
    counts: dict[tuple[str, int], collections.Counter[str]] = collections.defaultdict(
        collections.Counter)
    for outcome in outcomes:
        counts[outcome.front_end, outcome.opset][outcome.kind] += 1
    front_ends = sorted({o.front_end for o in outcomes}, key=FRONT_ENDS.index)
    models = len(outcomes) // max(len(front_ends), 1)
    dynamic = sum(o.case.second_inputs is not None for o in outcomes) // max(len(front_ends), 1)
    title = (f"{models} models (seed {seed!r}, {dynamic} with dynamic axes checked at a "
             f"second size), front ends {', '.join(front_ends)}, {seconds / 60:.1f} min.")
    lines = [title, "",
             "| front end | opset | " + " | ".join(KINDS) + " |",
             "|---" * (len(KINDS) + 2) + "|"]
    for front_end, opset in sorted(counts, key=lambda k: (FRONT_ENDS.index(k[0]), k[1])):
        row = counts[front_end, opset]
        lines.append(f"| {front_end} | {opset} | " + " | ".join(str(row[k]) for k in KINDS)
                     + " |")
    for front_end in front_ends:
        total = collections.Counter(o.kind for o in outcomes if o.front_end == front_end)
        lines.append(f"| {front_end} | all | " + " | ".join(str(total[k]) for k in KINDS)
                     + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--start", type=int, default=0, help="first model index")
    parser.add_argument("--opsets", type=int, nargs="+", default=[13, 17, 20])
    parser.add_argument("--front-end", choices=[*FRONT_ENDS, "both"], default="trace",
                        help="trace: dynamo=False; dynamo: dynamo=True; both: each model "
                        "through both")
    parser.add_argument("--only", help="run one model, e.g. 0-123")
    parser.add_argument("--failures", default="fuzz-failures.txt",
                        help="file for the reproducers of every outcome but ok")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    front_ends = FRONT_ENDS if args.front_end == "both" else (args.front_end,)
    if args.only:
        index = args.only.rpartition("-")[2]
        opset = args.opsets[int(index) % len(args.opsets)]
        outcomes = [check(generate(args.only), opset, f) for f in front_ends]
        print("\n".join(o.report() for o in outcomes))
        return int(any(o.kind in DEFECTS for o in outcomes))
    start = time.monotonic()
    outcomes = []
    with open(args.failures, "w", encoding="utf-8") as failures:
        for index in range(args.start, args.start + args.models):
            case = generate(f"{args.seed}-{index}")
            for front_end in front_ends:
                outcome = check(case, args.opsets[index % len(args.opsets)], front_end)
                outcomes.append(outcome)
                if outcome.kind != "ok":
                    failures.write(outcome.report() + "\n")
                    failures.flush()
            if (index - args.start + 1) % 100 == 0:
                print(f"{len(outcomes)} models", collections.Counter(o.kind for o in outcomes),
                      file=sys.stderr, flush=True)
    print(summary(outcomes, time.monotonic() - start, args.seed))
    return int(any(o.kind in DEFECTS for o in outcomes))


if __name__ == "__main__":
    sys.exit(main())
