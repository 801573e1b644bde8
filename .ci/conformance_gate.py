#!/usr/bin/env python3
"""CI's gate on PyTorch's own exporter tests (the conformance corpus, README there).

    python .ci/conformance_gate.py --run --results DIR   # run the corpus, then check
    python .ci/conformance_gate.py --results DIR         # check results already there
    python .ci/conformance_gate.py --results DIR --write-docs   # and rewrite the docs

``--run`` runs, with oxport, every (opset, mode) class that ``conformance_floor.json``
names in ``full`` (scored against torch.onnx's results shipped with the corpus), and the
corpus's smoke subset at the ``sample`` opsets (scored against torch.onnx's own run of
it, made first). The check fails when a score falls below its floor in
``conformance_floor.json``: raise a floor there when fixes land. ``--write-docs`` rewrites
the section "PyTorch's own exporter tests" of docs/differences.md from the results, each
failing test with its reason from ``conformance_reasons.json`` (fnmatch patterns of test
names; the first error line where none matches).

The corpus is ``../shared/conformance/torch_onnx_ts/`` beside the checkout
(``OXPORT_CONFORMANCE_CORPUS`` or ``--corpus`` name another place).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FLOOR_FILE = HERE / "conformance_floor.json"
REASONS_FILE = HERE / "conformance_reasons.json"
DOCS = ROOT / "docs" / "differences.md"
SECTION = "## PyTorch's own exporter tests"
CORPUS_PATH = Path("shared", "conformance", "torch_onnx_ts")
#: ``../shared/...`` beside the checkout, or beside a folder above it (a CI checkout made
#: in a subfolder of the workspace).
DEFAULT_CORPUS = next((parent / CORPUS_PATH for parent in ROOT.parents
                       if (parent / CORPUS_PATH / "run_suite.py").is_file()),
                      ROOT.parent / CORPUS_PATH)


@dataclass(frozen=True)
class Run:
    """One run of the corpus: a class (opset, mode), the whole of it or its smoke subset."""

    opset: int
    mode: str
    sample: bool = False

    @property
    def name(self) -> str:
        return f"{'sample' if self.sample else 'full'}-opset{self.opset}-{self.mode}"

    def results(self, folder: Path, exporter: str = "oxport") -> Path:
        return folder / f"{exporter}-{self.name}.json"


def corpus_dir(given: str | None) -> Path:
    """The corpus folder; exits with a clear message when it is not there."""
    folder = Path(given or os.environ.get("OXPORT_CONFORMANCE_CORPUS") or DEFAULT_CORPUS)
    if not (folder / "run_suite.py").is_file():
        sys.exit(f"conformance gate: no corpus at {folder} (run_suite.py missing): check out "
                 "../shared/conformance/torch_onnx_ts/ beside the repository, or set "
                 "OXPORT_CONFORMANCE_CORPUS.")
    return folder.resolve()


def load_floors() -> dict:
    return json.loads(FLOOR_FILE.read_text())


def planned_runs(floors: dict) -> list[Run]:
    """Every run the floors name: the full classes, then the samples."""
    full = [Run(int(opset), mode) for opset, modes in floors["full"].items() for mode in modes]
    sample = floors.get("sample", {})
    return full + [Run(int(opset), sample["mode"], sample=True)
                   for opset in sample.get("floor", {})]


def run_suite(corpus: Path, run: Run, exporter: str, out: Path,
              baseline: Path | None = None) -> None:
    """One run_suite.py invocation (one worker: CI's two cores run one test at a time plus
    ONNX Runtime)."""
    command = [sys.executable, str(corpus / "run_suite.py"), "--exporter", exporter,
               "--mode", run.mode, "--opset", str(run.opset), "--workers", "1",
               "--out", str(out)]
    if run.sample:
        command += ["--subset", "smoke"]
    if baseline is not None:
        command += ["--baseline", str(baseline)]
    print(f"conformance gate: {run.name} with {exporter}", flush=True)
    subprocess.run(command, check=True)


def run_all(corpus: Path, runs: list[Run], folder: Path) -> None:
    """oxport through every run; a sample first through torch.onnx, its baseline."""
    folder.mkdir(parents=True, exist_ok=True)
    for run in runs:
        baseline = None
        if run.sample:
            baseline = run.results(folder, "torch")
            run_suite(corpus, run, "torch.onnx:export", baseline)
        run_suite(corpus, run, "oxport:export", run.results(folder), baseline)


def score(run: Run, folder: Path) -> dict:
    """The run's ``baseline_relative`` (passed, denominator, not_passed) and its tests."""
    path = run.results(folder)
    if not path.is_file():
        sys.exit(f"conformance gate: {path} is missing: run with --run first.")
    results = json.loads(path.read_text())
    relative = results.get("baseline_relative")
    if results.get("wall_cap_hit") or not results.get("tests") or relative is None:
        sys.exit(f"conformance gate: {path} holds no complete, scored run "
                 f"(wall cap hit: {results.get('wall_cap_hit')}, "
                 f"{len(results.get('tests') or {})} tests).")
    return {**relative, "tests": results["tests"]}


def floor_of(floors: dict, run: Run) -> int:
    if run.sample:
        return floors["sample"]["floor"][str(run.opset)]
    return floors["full"][str(run.opset)][run.mode]


def check(floors: dict, runs: list[Run], folder: Path) -> list[str]:
    """One line per run; the runs below their floor are returned as failures."""
    failures = []
    for run in runs:
        result, floor = score(run, folder), floor_of(floors, run)
        line = f"{run.name}: {result['passed']}/{result['denominator']} (floor {floor})"
        print(f"conformance gate: {line}")
        if result["passed"] < floor:
            failures.append(line)
    return failures


def reason_for(test: str, message: str, reasons: dict[str, str]) -> str:
    """The committed reason of the first pattern matching ``test``, else its error line."""
    for pattern, reason in reasons.items():
        if fnmatch.fnmatchcase(test, pattern):
            return reason
    first = (message or "").strip().splitlines()
    return f"(no reason recorded) `{first[0][:160]}`" if first else "(no reason recorded)"


def docs_section(runs: list[Run], folder: Path, reasons: dict[str, str]) -> str:
    """The docs section: each run's score, then every test still failing, with its reason."""
    about = ("`.ci/run` runs PyTorch's own tests of its TorchScript exporter "
             "(`test_pytorch_onnx_onnxruntime.py`, the corpus in "
             "`../shared/conformance/torch_onnx_ts/`) with oxport in torch.onnx's place. A "
             "test counts when it passes and exports a model with torch.onnx itself (the "
             "corpus's baselines for the full classes, torch.onnx's own run of the smoke "
             "subset for the samples); CI fails when a score falls below its floor in "
             "`.ci/conformance_floor.json`. This section is generated: "
             "`python .ci/conformance_gate.py --results DIR --write-docs` (reasons from "
             "`.ci/conformance_reasons.json`).")
    lines = [SECTION, "", about, "", "| run | passed | of | floor |", "| --- | --- | --- | --- |"]
    floors = load_floors()
    where: dict[str, dict[str, list[str]]] = {}  # test -> mode -> the runs it fails in
    why: dict[str, str] = {}
    for run in runs:
        result = score(run, folder)
        lines.append(f"| {run.name} | {result['passed']} | {result['denominator']} | "
                     f"{floor_of(floors, run)} |")
        for node in result["not_passed"]:
            test = node.split("::")[-1]
            runs_of = where.setdefault(test, {}).setdefault(run.mode, [])
            runs_of.append(f"{run.opset}{' (sample)' if run.sample else ''}")
            why.setdefault(test, reason_for(test, result["tests"].get(node, {}).get(
                "message", ""), reasons))
    lines += ["", ("The tests torch.onnx passes that oxport does not, by reason (each with "
                   "the classes it fails in: mode, opsets):"), ""]
    for reason in sorted(set(why.values())):
        tests = sorted(t for t in why if why[t] == reason)
        listed = ", ".join(f"`{t}` ({'; '.join(f'{m} ' + ', '.join(o) for m, o in where[t].items())})"
                           for t in tests)
        lines.append(f"- {reason} Tests ({len(tests)}): {listed}.")
    if not why:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def write_docs(section: str) -> None:
    """Replace the section in docs/differences.md (added at the end the first time)."""
    text = DOCS.read_text()
    start = text.find(SECTION + "\n")
    if start < 0:
        DOCS.write_text(text.rstrip("\n") + "\n\n" + section)
        return
    end = text.find("\n## ", start + len(SECTION))
    rest = "" if end < 0 else text[end + 1:]
    DOCS.write_text(text[:start] + section + ("\n" + rest if rest else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="folder of the runs' JSON results")
    parser.add_argument("--run", action="store_true", help="run the corpus first")
    parser.add_argument("--corpus", help="the corpus folder (default: beside the checkout)")
    parser.add_argument("--write-docs", action="store_true",
                        help="rewrite docs/differences.md's section from the results")
    args = parser.parse_args(argv)
    floors, folder = load_floors(), Path(args.results)
    runs = planned_runs(floors)
    if args.run:
        run_all(corpus_dir(args.corpus), runs, folder)
    failures = check(floors, runs, folder)
    if args.write_docs:
        write_docs(docs_section(runs, folder, json.loads(REASONS_FILE.read_text())))
    if failures:
        print("conformance gate: below the floor in .ci/conformance_floor.json:\n  "
              + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
