"""OpInfo sweep: every operator of torch's test database exported by torch.onnx and oxport.

For each OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` and each of
its CPU sample inputs in float32 (and int64 and bool where the op takes them), the op is
wrapped in a module whose inputs are the sample's tensors, exported with torch.onnx
(``dynamo=False``) and with oxport at opsets 13, 17 and 20, run in ONNX Runtime, and
compared with eager. Per op it counts the samples both exporters get right, only torch.onnx,
only oxport, and neither. Samples of random ops (the eager call draws from torch's random
generator, or eager calls differ, once the OpInfo's own per-call seeding is off) and samples
with non-tensor or complex outputs are skipped and counted.

    python benchmarks/opinfo_sweep.py                      # the whole sweep (hours)
    python benchmarks/opinfo_sweep.py --samples 3 --markdown docs/opinfo_sweep.md
    python benchmarks/opinfo_sweep.py --ops add sort --opsets 17 -v
    python benchmarks/opinfo_sweep.py --merge PART1.json PART2.json --markdown FULL.md
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import multiprocessing
import os
import signal
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

OPSETS = (13, 17, 20)
DTYPES = (torch.float32, torch.int64, torch.bool)
OUTCOMES = ("both", "torch_only", "oxport_only", "neither")
SECONDS_PER_EXPORT = 60


@dataclasses.dataclass
class OpReport:
    """What one OpInfo's samples gave, counted over dtypes, samples and opsets."""

    name: str
    counts: dict[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    #: (dtype, sample index, opset, oxport's error or mismatch) where only torch.onnx is right.
    torch_only: list[tuple[str, int, int, str]] = dataclasses.field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


class _Sample(torch.nn.Module):
    """The op applied to one sample, its tensors as the module's inputs."""

    def __init__(self, op: Any, spec: Any, constants: list[Any]) -> None:
        super().__init__()
        self.op, self.spec, self.constants = op, spec, constants

    def forward(self, *tensors: torch.Tensor) -> Any:
        values, it = [], iter(tensors)
        for constant in self.constants:
            values.append(next(it) if constant is _TENSOR else constant)
        args, kwargs = pytree.tree_unflatten(values, self.spec)
        return self.op(*args, **kwargs)


_TENSOR = object()


def _wrap(op: Any, sample: Any) -> tuple[_Sample, tuple[torch.Tensor, ...]]:
    leaves, spec = pytree.tree_flatten(((sample.input, *sample.args), sample.kwargs))
    tensors = tuple(leaf for leaf in leaves if isinstance(leaf, torch.Tensor))
    constants = [_TENSOR if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
    return _Sample(op, spec, constants), tensors


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    def expire(*_: Any) -> None:
        raise _Timeout(f"took more than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _export(exporter: str, module: torch.nn.Module, tensors: tuple[torch.Tensor, ...],
            opset: int) -> bytes:
    f = io.BytesIO()
    names = [f"input_{i}" for i in range(len(tensors))]
    with warnings.catch_warnings(), _deadline(SECONDS_PER_EXPORT):
        warnings.simplefilter("ignore")
        if exporter == "torch":
            torch.onnx.export(module, tensors, f, opset_version=opset, input_names=names,
                              dynamo=False)
        else:
            import oxport
            oxport.export(module, tensors, f, opset_version=opset, input_names=names)
    return f.getvalue()


def _run(model: bytes, tensors: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()  # one thread: no pool for a forked child to inherit
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    by_name = {f"input_{i}": t.numpy() for i, t in enumerate(tensors)}
    # An exporter may drop the inputs its graph does not read.
    feeds = {i.name: by_name[i.name] for i in session.get_inputs()}
    with _deadline(SECONDS_PER_EXPORT):
        return session.run(None, feeds)


def _matches(expected: list[torch.Tensor], actual: list[np.ndarray]) -> str:
    """'' when ONNX Runtime's outputs match eager's, else what differs."""
    if len(expected) != len(actual):
        return f"{len(actual)} outputs, eager has {len(expected)}"
    for index, (want, got) in enumerate(zip(expected, actual)):
        want = want.numpy()
        if tuple(want.shape) != tuple(np.shape(got)):
            return f"output {index}: shape {np.shape(got)}, eager {want.shape}"
        if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
            if not np.array_equal(want.astype(np.float64), np.asarray(got).astype(np.float64)):
                return f"output {index}: values differ"
        elif not np.allclose(np.asarray(got, dtype=np.float64), want.astype(np.float64),
                             rtol=1e-3, atol=1e-4, equal_nan=True):
            return f"output {index}: values differ"
    return ""


def _outcome(exporter: str, module: torch.nn.Module, tensors: tuple[torch.Tensor, ...],
             expected: list[torch.Tensor], opset: int) -> str:
    """'' when the exporter's model matches eager, else the reason it does not."""
    try:
        model = _export(exporter, module, tensors, opset)
    except Exception as exc:  # noqa: BLE001 - any failure is this exporter's failure
        return f"export: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    try:
        return _matches(expected, _run(model, tensors))
    except Exception as exc:  # noqa: BLE001
        return f"run: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"


def _isolated(exporter: str, jobs: list[tuple[torch.nn.Module, tuple[torch.Tensor, ...],
                                             list[torch.Tensor]]],
              opsets: tuple[int, ...]) -> list[list[str]]:
    """Each job's :func:`_outcome` per opset, computed in a forked child that reports job by
    job: an exporter or ONNX Runtime that hangs in native code or crashes (torch.onnx does
    on some empty inputs) costs the job it was on, and a new child takes the rest."""
    context = multiprocessing.get_context("fork")
    results: list[list[str]] = []
    limit = SECONDS_PER_EXPORT * len(opsets)
    while len(results) < len(jobs):
        first = len(results)
        receiver, sender = context.Pipe(duplex=False)

        def work(first: int = first) -> None:
            for module, tensors, expected in jobs[first:]:
                sender.send([_outcome(exporter, module, tensors, expected, o) for o in opsets])
            os._exit(0)  # no interpreter teardown in the child

        child = context.Process(target=work, daemon=True)
        child.start()
        sender.close()
        try:
            while len(results) < len(jobs) and receiver.poll(limit):
                results.append(receiver.recv())
        except EOFError:  # the child died
            pass
        if child.is_alive():
            child.kill()
        child.join()
        if len(results) < len(jobs):
            results.append([f"no result in {limit} s (hangs or crashes; exit code "
                            f"{child.exitcode})"] * len(opsets))
    return results


@contextlib.contextmanager
def _unseeded() -> Iterator[None]:
    """The OpInfos of random ops (bernoulli, dropout, randn_like...) seed every call with
    ``wrapper_set_seed``, so their eager output never varies while ONNX Runtime's draws do;
    here that wrapper calls the op as it is, so a sample that draws shows it."""
    from torch.testing._internal import common_methods_invocations as database
    seeded = database.wrapper_set_seed
    database.wrapper_set_seed = lambda op, *args, **kwargs: op(*args, **kwargs)
    try:
        yield
    finally:
        database.wrapper_set_seed = seeded


def _eager(module: torch.nn.Module, tensors: tuple[torch.Tensor, ...]) -> list[torch.Tensor] | str:
    """The eager outputs, or why the sample is skipped."""
    runs, draws = [], False
    try:
        with torch.no_grad(), _unseeded():
            for seed in range(3):  # a random op's draws differ under different seeds
                torch.manual_seed(seed)
                state = torch.get_rng_state()
                # cloned: an in-place op (cauchy_) returns its input, which the next run redraws
                runs.append([leaf.clone() if isinstance(leaf, torch.Tensor) else leaf
                             for leaf in pytree.tree_leaves(module(*tensors))])
                # bernoulli(0.03) may draw the same zeros three times: it still drew
                draws = draws or not torch.equal(state, torch.get_rng_state())
    except Exception as exc:  # noqa: BLE001
        return f"eager raises {type(exc).__name__}"
    outputs = runs[0]
    if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
        return "non-tensor output"
    if any(o.is_complex() or o.layout != torch.strided or o.dtype in (torch.bfloat16,
                                                                        torch.float16)
           for o in outputs):
        return "complex, sparse or half output"
    if draws or not all(torch.equal(a, b) or (a.is_floating_point() and torch.allclose(
            a, b, equal_nan=True)) for again in runs[1:] for a, b in zip(outputs, again)):
        return "random"
    return [o.detach() for o in outputs]


def sweep_op(opinfo: Any, opsets: tuple[int, ...], samples: int | None,
             verbose: bool = False) -> OpReport:
    report = OpReport(_full_name(opinfo))
    supported = opinfo.supported_dtypes("cpu")
    for dtype in (d for d in DTYPES if d in supported):
        torch.manual_seed(0)
        try:
            inputs = list(opinfo.sample_inputs("cpu", dtype, requires_grad=False))
        except Exception:  # noqa: BLE001 - the database's own generator failed
            report.skip("sample generator raises")
            continue
        jobs, indices = [], []
        for index, sample in enumerate(inputs[:samples]):
            module, tensors = _wrap(opinfo.op, sample)
            if not tensors:
                report.skip("no tensor input")
                continue
            expected = _eager(module, tensors)
            if isinstance(expected, str):
                report.skip(expected)
                continue
            jobs.append((module, tensors, expected))
            indices.append(index)
        if not jobs:
            continue
        by_exporter = [_isolated(exporter, jobs, opsets) for exporter in ("torch", "oxport")]
        for index, torch_errors, oxport_errors in zip(indices, *by_exporter):
            for opset, torch_error, oxport_error in zip(opsets, torch_errors, oxport_errors):
                outcome = {(False, False): "both", (False, True): "torch_only",
                           (True, False): "oxport_only", (True, True): "neither"}[
                    (bool(torch_error), bool(oxport_error))]
                report.counts[outcome] += 1
                if outcome == "torch_only":
                    report.torch_only.append((str(dtype).removeprefix("torch."), index, opset,
                                              oxport_error))
                if verbose and outcome != "both":
                    print(f"  {report.name} {dtype} #{index} opset {opset}: {outcome}: "
                          f"torch: {torch_error or 'ok'} | oxport: {oxport_error or 'ok'}",
                          flush=True)
    return report


def op_infos(names: list[str] | None = None) -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db
    if not names:
        return list(op_db)
    wanted = set(names)
    return [o for o in op_db if _full_name(o) in wanted]


def _full_name(opinfo: Any) -> str:
    """``name`` or ``name.variant`` (``div.floor_rounding``), as the reports name it."""
    variant = opinfo.variant_test_name
    return f"{opinfo.name}.{variant}" if variant else opinfo.name


def _warm_up() -> None:
    """Load both exporters, their plugins and ONNX Runtime once, before the forks; torch
    computes on one thread (a forked child would inherit a thread pool's held locks)."""
    torch.set_num_threads(1)
    module, tensors = _wrap(torch.neg, types.SimpleNamespace(input=torch.ones(1), args=(),
                                                             kwargs={}))
    for exporter in ("torch", "oxport"):
        _outcome(exporter, module, tensors, [-tensors[0]], OPSETS[-1])


def sweep(names: list[str] | None, opsets: tuple[int, ...], samples: int | None,
          verbose: bool = False,
          progress: Callable[[list[OpReport], int], None] | None = None) -> list[OpReport]:
    """Sweep the named OpInfos (all by default); ``progress(reports, total)`` after each."""
    _warm_up()
    reports: list[OpReport] = []
    selected = op_infos(names)
    for opinfo in selected:
        started = time.perf_counter()
        reports.append(sweep_op(opinfo, opsets, samples, verbose))
        if progress is not None:
            progress(reports, len(selected))
        if verbose:
            counts = reports[-1].counts
            print(f"{reports[-1].name}: {counts} ({time.perf_counter() - started:.1f} s)",
                  flush=True)
    return reports


def markdown(reports: list[OpReport], command: str, total: int | None = None,
             samples: int | None = None) -> str:
    totals = dict.fromkeys(OUTCOMES, 0)
    skipped: dict[str, int] = {}
    for report in reports:
        for key, count in report.counts.items():
            totals[key] += count
        for key, count in report.skipped.items():
            skipped[key] = skipped.get(key, 0) + count
    runs = sum(totals.values())
    torch_ok = totals["both"] + totals["torch_only"]
    oxport_ok = totals["both"] + totals["oxport_only"]
    lines = [
        "# OpInfo sweep", "",
        f"Generated by {command}; do not edit by hand.", "",
        "Each run is one sample of one OpInfo (torch's operator test database) in one dtype at "
        "one opset, exported by torch.onnx (`dynamo=False`) and by oxport, run in ONNX Runtime "
        "and compared with eager (rtol 1e-3, atol 1e-4; integers and bools exactly)."
        + (f" Only the first {samples} samples of each OpInfo and dtype ran: the whole sweep "
           "is the same command without `--samples` (its time: benchmarks/README.md); "
           "[opinfo_sweep_full.md](opinfo_sweep_full.md) holds the last such run over every "
           "sample, of the OpInfos it covers."
           if samples else " Every sample ran."), "",
        "| | runs |", "| --- | ---: |",
        f"| OpInfos | {len(reports)}" + (f" of {total} (the run stopped early)"
                                         if total and total > len(reports) else "") + " |",
        f"| sample runs | {runs} |",
        f"| torch.onnx right | {torch_ok} |",
        f"| oxport right | {oxport_ok} |",
        f"| both right | {totals['both']} |",
        f"| only torch.onnx right | {totals['torch_only']} |",
        f"| only oxport right | {totals['oxport_only']} |",
        f"| neither | {totals['neither']} |", "",
        "Skipped samples: " + (", ".join(f"{k} {v}" for k, v in sorted(skipped.items()))
                               or "none") + ".", "",
        "## Samples only torch.onnx gets right", "",
    ]
    remaining = [(r.name, *entry) for r in reports for entry in r.torch_only]
    if remaining:
        lines += ["| OpInfo | dtype | sample | opset | oxport |", "| --- | --- | ---: | ---: | --- |"]
        lines += [f"| `{n}` | {d} | {i} | {o} | {e.replace('|', '/')} |"
                  for n, d, i, o, e in remaining]
    else:
        lines.append("None.")
    lines += ["", "## Per OpInfo", "",
              "| OpInfo | both | torch only | oxport only | neither | skipped |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in reports:
        c = r.counts
        lines.append(f"| `{r.name}` | {c['both']} | {c['torch_only']} | {c['oxport_only']} | "
                     f"{c['neither']} | {sum(r.skipped.values())} |")
    return "\n".join(lines) + "\n"


def _load(path: str) -> list[OpReport]:
    """The reports of an earlier run's ``--json``."""
    with open(path, encoding="utf-8") as f:
        return [OpReport(r["name"], r["counts"], r["skipped"],
                         [tuple(e) for e in r["torch_only"]]) for r in json.load(f)]


def _write_merged(paths: list[str], markdown_path: str | None, json_path: str | None) -> int:
    """Merge runs' ``--json`` files (a later file's OpInfo replaces an earlier one's, in the
    earlier one's place) into ``--markdown``/``--json`` (the markdown printed without)."""
    by_name: dict[str, OpReport] = {}
    for path in paths:
        by_name.update((r.name, r) for r in _load(path))
    reports = list(by_name.values())
    text = markdown(reports, f"`python benchmarks/opinfo_sweep.py --merge {' '.join(paths)}` "
                             "(each file a run's --json)")
    if markdown_path:
        with open(markdown_path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump([dataclasses.asdict(r) for r in reports], f, indent=1)
    return 1 if any(r.torch_only for r in reports) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="*", help="OpInfo names (name.variant for variants)")
    parser.add_argument("--opsets", nargs="*", type=int, default=list(OPSETS))
    parser.add_argument("--samples", type=int, default=None,
                        help="at most this many samples per OpInfo and dtype (default: all)")
    parser.add_argument("--json", help="write the per-op reports here")
    parser.add_argument("--markdown", help="write the summary table here")
    parser.add_argument("--update", metavar="JSON",
                        help="an earlier run's --json: re-sweep only --ops and keep its other "
                             "OpInfos (after fixes)")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="sweep nothing: write --markdown/--json of earlier runs' --json "
                             "files merged (a later file's OpInfo replaces an earlier one's)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.merge:
        return _write_merged(args.merge, args.markdown, args.json)
    options = " ".join(["python benchmarks/opinfo_sweep.py",
                        *(["--opsets", *map(str, args.opsets)] if tuple(args.opsets) != OPSETS
                          else []),
                        *(["--samples", str(args.samples)] if args.samples else [])])
    command = f"{options} --ops {' '.join(args.ops)}" if args.ops and not args.update \
        else options

    earlier = _load(args.update) if args.update else []
    if args.update:
        command = (f"`{options}` over every OpInfo, then `{options} --update RUN.json --ops "
                   f"{' '.join(args.ops or [])}` after fixes (RUN.json: the first run's --json)")
    else:
        command = f"`{command}`"

    def merged(fresh: list[OpReport]) -> list[OpReport]:
        """The earlier run's OpInfos, each replaced by its fresh report where there is one."""
        if not earlier:
            return fresh
        by_name = {r.name: r for r in fresh}
        return [by_name.get(r.name, r) for r in earlier]

    def write(reports: list[OpReport], total: int) -> None:
        """The files as they stand (rewritten after each OpInfo, so a stopped run leaves
        what it did)."""
        if earlier:
            reports, total = merged(reports), len(earlier)
        if args.markdown:
            with open(args.markdown, "w", encoding="utf-8") as f:
                f.write(markdown(reports, command, total, args.samples))
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump([dataclasses.asdict(r) for r in reports], f, indent=1)

    reports = merged(sweep(args.ops, tuple(args.opsets), args.samples, args.verbose, write))
    if not args.markdown:
        print(markdown(reports, command, samples=args.samples))
    return 1 if any(r.torch_only for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
