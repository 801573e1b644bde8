"""How long the command line takes to answer: ``oxport --help`` (bar 0.3 s) and ``oxport
plugins`` (bar 1.0 s), each run in a fresh process, interleaved, median of the runs.

Beside each, ``python -c "import torch"``: what the command would cost at least if it
loaded torch (the ratio says how far below that it stays). Exits 1 when a bar is missed.

    python benchmarks/cli_startup.py            # 7 runs each
    python benchmarks/cli_startup.py --runs 15 --json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time

#: name -> (command, bar in seconds or None for a reference).
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "oxport --help": (["--help"], 0.3),
    "oxport plugins": (["plugins"], 1.0),
    "import torch": ([], None),
}


def _command(args: list[str]) -> list[str]:
    if not args:
        return [sys.executable, "-c", "import torch"]
    launcher = shutil.which("oxport")
    return [launcher, *args] if launcher else [sys.executable, "-m", "oxport", *args]


def measure(runs: int) -> dict[str, list[float]]:
    """Seconds per run of each command, interleaved so load on the machine hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, (args, _bar) in COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(_command(args), check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    times = measure(args.runs)
    torch_median = statistics.median(times["import torch"])
    rows = []
    for name, (_args, bar) in COMMANDS.items():
        median = statistics.median(times[name])
        rows.append({"command": name, "median_s": round(median, 3),
                     "min_s": round(min(times[name]), 3), "bar_s": bar,
                     "vs_import_torch": round(median / torch_median, 2),
                     "ok": bar is None or median <= bar})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'command':16} {'median':>8} {'min':>8} {'bar':>6} {'x import torch':>15}")
        for row in rows:
            bar = f"{row['bar_s']:.1f}" if row["bar_s"] is not None else "-"
            verdict = "" if row["bar_s"] is None else ("  ok" if row["ok"] else "  MISSED")
            print(f"{row['command']:16} {row['median_s']:8.3f} {row['min_s']:8.3f} {bar:>6} "
                  f"{row['vs_import_torch']:15.2f}{verdict}")
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
