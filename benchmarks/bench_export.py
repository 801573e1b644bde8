"""Export speed, memory, file size and graph size: oxport against torch.onnx.

Every export runs in a fresh subprocess; for each model the exporters are
interleaved (floor, oxport, TorchScript, dynamo, floor, oxport, ...) and each
figure is the median of ``--repeat`` runs, each run calling from another Python call
depth (``CALL_DEPTHS``). Per model it reports:

* seconds of the export call, and the *floor*: ``torch.jit.trace`` of the model
  (``check_trace=False``) plus writing its unique weight bytes once, raw, to a file,
  both measured in their own fresh subprocess; for oxport's torch.export front end
  (``oxport-export``, ``dynamo=True``) the floor is ``torch.export.export`` of the model
  (the same dynamic axes) plus the same write;
* before the clock: the exporter's modules imported (for the three that start with
  ``torch.export.export``, its tracing machinery too, timed apart as the same ~1 s for
  each, and added back in the export table's "with them" ratios), and ``os.sync()``,
  so no exporter writes while an earlier child's file is still being flushed;
* extra memory: peak RSS during the export (``VmHWM``, reset just before the call)
  minus RSS before it, divided by the unique weight bytes (one eager forward runs
  before, for every exporter and the floor: first-call initialisation of torch's
  kernels is not timed, and memory a forward pass needs anyway is not counted);
* file size (model plus external data) divided by the unique weight bytes;
* node count (subgraphs included) of each exporter's model;
* the largest ONNX Runtime vs eager error at the example inputs, and whether the
  model also matches eager at a second size of every dynamic axis (rtol 1e-3,
  atol 1e-5 each time).

    python benchmarks/bench_export.py --quick            # small models, 1 repeat, < 3 min
    python benchmarks/bench_export.py                    # every model but the 2 GB one
    python benchmarks/bench_export.py --full             # and the > 2 GB GPT-2
    python benchmarks/bench_export.py --models gpt2-small vgg-16 --exporters oxport ts
    python benchmarks/bench_export.py --full --readme    # also rewrite benchmarks/README.md

Machine load makes absolute times noisy; the ratios between exporters run
interleaved are the figures to read. Children may write and use cached bytecode
(a first, unrecorded run per exporter warms it) and use torch's default threads.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

EXPORTERS = ("floor", "oxport", "ts", "dynamo", "oxport-export")
LABELS = {"oxport": "oxport", "ts": "TorchScript", "dynamo": "dynamo", "floor": "floor",
          "oxport-export": "oxport (torch.export)", "floor-export": "export floor"}
#: The extra Python call depths the timed call runs at, one per run (the same for every
#: exporter of a run). On CPython before 3.13's and 3.14's fixes of gh-142183 (this
#: machine's 3.11 among them), a call made again and again right across a boundary of
#: the interpreter's frame-stack chunks maps and unmaps a chunk each time: measured here,
#: torch.export's capture of SuperResolution at one depth made 16,000 mmap/munmap pairs
#: (0.19 s) and 2,500 (0.10 s) at a depth 10 frames deeper. Which depth is slow depends on
#: the caller, so one fixed depth favours whichever exporter it happens to suit.
CALL_DEPTHS = (0, 8, 16, 24, 32)
#: The exporters whose export starts with ``torch.export.export``.
CAPTURES_WITH_EXPORT = ("floor-export", "oxport-export", "dynamo")
OPSET = 20
RTOL, ATOL = 1e-3, 1e-5
MARKER = "@@bench@@"


# -- the child: one export in a fresh process ----------------------------------------
def _status() -> dict[str, int]:
    with open("/proc/self/status") as handle:
        text = handle.read()
    return {key: int(re.search(rf"{key}:\s+(\d+)", text).group(1)) * 1024
            for key in ("VmRSS", "VmHWM")}


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _export(exporter: str, model: Any, inputs: tuple[Any, ...], spec: Any, path: str
            ) -> dict[str, Any]:
    import torch

    common = dict(input_names=spec.input_names, output_names=spec.output_names,
                  dynamic_axes=spec.dynamic_axes, opset_version=OPSET)
    if exporter == "oxport":
        import oxport
        result = oxport.export(model, inputs, path, **common)
        return {"phases": result.timings}
    if exporter == "ts":
        torch.onnx.export(model, inputs, path, dynamo=False, **common)
        return {}
    if exporter == "oxport-export":
        import oxport
        result = oxport.export(model, inputs, path, dynamo=True, **common)
        return {"phases": result.timings}
    if exporter == "dynamo":
        del common["dynamic_axes"]
        torch.onnx.export(model, inputs, path, dynamo=True,
                          dynamic_shapes=_dynamic_shapes(model, spec), **common)
        return {}
    raise ValueError(exporter)


def _dynamic_shapes(model: Any, spec: Any, kind: Any = None) -> Any:
    """The model's dynamic axes as torch.export's Dim.DYNAMIC, or ``kind`` (torch.onnx's
    dynamic_axes conversion fails on *args forwards)."""
    import torch

    kind = kind or torch.export.Dim.DYNAMIC
    dims = tuple({axis: kind for axis in spec.dynamic_axes.get(name, {})}
                 for name in spec.input_names)
    varargs = any(p.kind == p.VAR_POSITIONAL
                  for p in inspect.signature(model.forward).parameters.values())
    return (dims,) if varargs else dims


def _floor(model: Any, inputs: tuple[Any, ...], path: str, spec: Any = None
           ) -> dict[str, Any]:
    """``torch.jit.trace`` (with ``spec``: ``torch.export.export`` with its dynamic axes)
    alone, then the unique weight bytes written once, raw."""
    import torch

    start = time.perf_counter()
    if spec is not None:
        try:
            torch.export.export(model, inputs, dynamic_shapes=_dynamic_shapes(model, spec),
                                strict=False)
        except Exception:  # noqa: BLE001 - an axis the model fixes (an LSTM's sequence)
            start = time.perf_counter()
            torch.export.export(model, inputs, strict=False, dynamic_shapes=_dynamic_shapes(
                model, spec, torch.export.Dim.AUTO))
    else:
        with torch.no_grad():
            torch.jit.trace(model, inputs, check_trace=False)
    traced = time.perf_counter() - start
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    with open(path, "wb") as handle:
        for tensor in model.state_dict().values():
            key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(),
                   tuple(tensor.shape))
            if key not in seen:
                seen.add(key)
                handle.write(memoryview(tensor.contiguous().numpy()).cast("B"))
    return {"trace_s": traced, "write_s": time.perf_counter() - start - traced}


def _count_nodes(graph: Any) -> int:
    total = 0
    for node in graph.node:
        total += 1
        for attr in node.attribute:
            if attr.HasField("g"):
                total += _count_nodes(attr.g)
            for sub in attr.graphs:
                total += _count_nodes(sub)
    return total


def _run_ort(path: str, model: Any, inputs: tuple[Any, ...], names: list[str]
             ) -> tuple[float, bool | str]:
    """The largest |ORT - eager| over the outputs, and whether all are within tolerance:
    True, False, or ``"fp32"`` where they are not but ORT is no farther from a float64
    run of the model than float32 eager itself is (float32's own rounding is the limit)."""
    import numpy as np
    import onnxruntime as ort

    expected = _eager(model, inputs)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    by_name = dict(zip(names, inputs))
    feeds = {i.name: by_name[i.name].numpy() for i in session.get_inputs()}
    got = session.run(None, feeds)
    worst, ok = 0.0, len(got) >= len(expected)
    for ours, ref in zip(got, expected):
        if ours.shape != ref.shape:
            return float("inf"), False
        diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
        ok = ok and bool(np.allclose(ours, ref, rtol=RTOL, atol=ATOL))
    if ok or len(got) < len(expected):
        return worst, ok
    exact = _eager(copy.deepcopy(model).double(), tuple(
        t.double() if t.is_floating_point() else t for t in inputs))
    within = all(np.abs(ours - truth).max() <= 2 * np.abs(ref - truth).max()
                 for ours, ref, truth in zip(got, expected, exact) if truth.dtype.kind == "f")
    return worst, "fp32" if within else False


def _eager(model: Any, inputs: tuple[Any, ...]) -> list[Any]:
    import torch

    with torch.no_grad():
        out = model(*inputs)
    return [t.numpy() for t in ((out,) if isinstance(out, torch.Tensor) else out)]


def _verify(path: str, model: Any, spec: Any) -> dict[str, Any]:
    import onnx
    import torch

    result: dict[str, Any] = {}
    proto = onnx.load(path, load_external_data=False)
    result["nodes"] = _count_nodes(proto.graph)
    del proto
    torch.manual_seed(1)
    try:
        result["max_err"], result["ort_ok"] = _run_ort(path, model, spec.inputs(), spec.input_names)
    except Exception as exc:  # noqa: BLE001 - a model ORT cannot run is a result, not a crash
        result["max_err"], result["ort_ok"] = None, False
        result["ort_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    try:
        result["dyn_err"], result["dyn_ok"] = _run_ort(path, model, spec.second(),
                                                       spec.input_names)
    except Exception as exc:  # noqa: BLE001
        result["dyn_err"], result["dyn_ok"] = None, False
        result["dyn_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return result


def _fresh_page_cache(out_dir: str, nbytes: int) -> None:
    """Give every exporter's write the same start. Writing a file allocates page cache; on
    this VM, pages the kernel freed a few seconds earlier have gone back to the host and
    cost ~10x to touch again, so a child's write time depended on how long the child before
    it ran. Write and delete a file of the weights' size (its pages are freed and reused by
    the timed write), then ``os.sync()`` so nothing is still flushing."""
    scratch = os.path.join(out_dir, "scratch.bin")
    block = bytes(1 << 24)
    with open(scratch, "wb") as handle:
        for _ in range(-(-nbytes // len(block))):
            handle.write(block)
    os.remove(scratch)
    os.sync()


def _warm_up(exporter: str, out_dir: str) -> None:
    """One export of a two-layer model with ``exporter`` (or its floor), so that the timed
    export pays no first-call cost: lazy imports, plugin or registry loading, torch.export's
    first trace."""
    import types

    import torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    spec = types.SimpleNamespace(input_names=["x"], output_names=["y"],
                                 dynamic_axes={"x": {0: "batch"}})
    inputs = (torch.randn(2, 4),)
    with torch.no_grad():
        model(*inputs)
    path = os.path.join(out_dir, "warm-up.bin")
    if exporter.startswith("floor"):
        _floor(model, inputs, path, spec if exporter == "floor-export" else None)
    else:
        _export(exporter, model, inputs, spec, path)
    for name in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, name))


def _time_capture_calls(result: dict[str, Any]) -> None:
    """Add the seconds of every ``torch.export.export`` call to ``result["capture_call_s"]``:
    the export floor's own capture, made by oxport in the same process, so that its time
    beyond that call is measured at the same machine speed (here a capture's time moves
    by up to 2x between processes a few seconds apart)."""
    import torch

    capture = torch.export.export
    result["capture_call_s"] = 0.0

    def timed_capture(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return capture(*args, **kwargs)
        finally:
            result["capture_call_s"] += time.perf_counter() - start

    torch.export.export = timed_capture


def _at_depth(depth: int, call: Any) -> Any:
    """``call()``, made from ``depth`` extra Python frames (see :data:`CALL_DEPTHS`)."""
    return _at_depth(depth - 1, call) if depth else call()


def child(model_name: str, exporter: str, out_dir: str, verify: bool, warm: bool = False,
          depth: int = 0) -> dict[str, Any]:
    import torch

    from benchmarks.models import BY_NAME, unique_weight_bytes

    warnings.simplefilter("ignore")
    spec = BY_NAME[model_name]
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(1)
    inputs = spec.inputs()
    with torch.no_grad():  # first-call initialisation of torch's kernels is no export's cost
        model(*inputs)
    result: dict[str, Any] = {"weight_bytes": unique_weight_bytes(model), "depth": depth}
    # Imports are not part of the export time: each exporter's own modules, and for the
    # three that capture with torch.export, its tracing machinery (torch._dynamo and
    # friends, ~1 s here whatever the model), timed on its own as ``capture_import_s``.
    if exporter in CAPTURES_WITH_EXPORT:
        start = time.perf_counter()
        import torch.export._trace  # noqa: F401
        result["capture_import_s"] = time.perf_counter() - start
    if exporter.startswith("oxport"):
        import oxport
        oxport.export  # noqa: B018 - the public names load on first use
    if exporter == "oxport-export":  # its torch.export front end, as dynamo's _core below
        import oxport.frontends.exported  # noqa: F401
    elif exporter in ("ts", "dynamo"):
        import torch.onnx  # noqa: F401
    if exporter == "dynamo":
        import onnxscript  # noqa: F401
        import torch.onnx._internal.exporter._core  # noqa: F401
    if warm:
        _warm_up(exporter, out_dir)
    floors = ("floor", "floor-export")
    path = os.path.join(out_dir, "model.onnx" if exporter not in floors else "weights.bin")
    _fresh_page_cache(out_dir, result["weight_bytes"])
    before = _status()["VmRSS"]
    result["peak_exact"] = _reset_peak()
    if exporter in floors:
        def timed() -> dict[str, Any]:
            return _floor(model, inputs, path, spec if exporter == "floor-export" else None)
    else:
        def timed() -> dict[str, Any]:
            return _export(exporter, model, inputs, spec, path)
    if exporter == "oxport-export":
        _time_capture_calls(result)
    start = time.perf_counter()
    try:
        result.update(_at_depth(depth, timed))
    except Exception as exc:  # noqa: BLE001 - an exporter failing is a result
        result["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
        return result
    result["seconds"] = time.perf_counter() - start
    status = _status()
    result["extra_bytes"] = max(status["VmHWM"] - before, 0)
    result["peak_bytes"] = status["VmHWM"]
    result["rss_before"] = before
    result["file_bytes"] = sum(os.path.getsize(os.path.join(out_dir, f))
                               for f in os.listdir(out_dir))
    result["files"] = len(os.listdir(out_dir))
    if verify and exporter not in floors:
        result.update(_verify(path, model, spec))
    return result


# -- the parent: interleaved runs, medians, the table --------------------------------
def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # cached bytecode, as most installs have
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_child(model: str, exporter: str, verify: bool, env: dict[str, str], timeout: float,
              warm: bool = False, depth: int = 0) -> dict[str, Any]:
    out_dir = tempfile.mkdtemp(prefix=f"bench-{model}-{exporter}-")
    command = [sys.executable, os.path.abspath(__file__), "--child", model, exporter, out_dir,
               "--depth", str(depth)]
    if verify:
        command.append("--verify")
    if warm:
        command.append("--warm")
    load = os.getloadavg()[0]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", "load": load}
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            result = json.loads(line[len(MARKER):])
            result["load"] = load
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"child exited {proc.returncode}: {tail[0][:300]}", "load": load}


#: Figures that are times: ``--best`` takes their minimum over the runs.
_TIMES = ("seconds", "trace_s", "write_s", "capture_import_s", "capture_call_s")


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None and "error" not in r]
    return statistics.median(values) if values else None


def _least(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None and "error" not in r]
    return min(values) if values else None


def summarize(model: str, runs: dict[str, list[dict[str, Any]]], best: bool = False
              ) -> dict[str, Any]:
    """Per exporter the median of each figure over the runs (``best``: times are the
    minimum, the run least slowed by other processes)."""
    summary: dict[str, Any] = {"model": model}
    for exporter, results in runs.items():
        ok = [r for r in results if "error" not in r]
        entry: dict[str, Any] = {"runs": len(results), "ok": len(ok)}
        if not ok:
            entry["error"] = results[0].get("error") if results else "not run"
        for key in ("seconds", "extra_bytes", "peak_bytes", "file_bytes", "trace_s", "write_s",
                    "capture_import_s", "capture_call_s"):
            entry[key] = (_least if best and key in _TIMES else _median)(ok, key)
        entry["run_seconds"] = [r.get("seconds") for r in results]
        first = next((r for r in ok if "nodes" in r), None)
        if first:
            for key in ("nodes", "max_err", "ort_ok", "dyn_err", "dyn_ok", "files", "ort_error",
                        "dyn_error"):
                if key in first:
                    entry[key] = first[key]
        if exporter in ("oxport", "oxport-export") and ok:
            phases = [r["phases"] for r in ok if "phases" in r]
            pick = min if best else statistics.median
            entry["phases"] = {k: pick(p.get(k, 0.0) for p in phases)
                               for k in phases[0]} if phases else {}
        if ok:
            summary["weight_bytes"] = ok[0]["weight_bytes"]
        summary[exporter] = entry
    for name in ("floor", "floor-export"):
        floor = summary.get(name, {})
        if floor.get("trace_s") is not None:
            floor["seconds"] = floor["trace_s"] + floor["write_s"]
    export, floor = summary.get("oxport-export", {}), summary.get("floor-export", {})
    if export.get("capture_call_s") is not None and floor.get("write_s") is not None:
        # Each run's export over its own capture call plus the floor's write.
        export["over_own_capture"] = statistics.median(
            r["seconds"] / (r["capture_call_s"] + floor["write_s"])
            for r in runs["oxport-export"] if "error" not in r)
    summary["load"] = statistics.mean(r.get("load", 0.0) for rs in runs.values() for r in rs)
    return summary


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "–"


def _mb(n: float | None) -> str:
    return f"{n / 1e6:,.0f}" if n else "–"


def _per_weight(entry: dict[str, Any], key: str, weights: int) -> str:
    value = entry.get(key)
    return f"{value / weights:.2f}" if value is not None and weights else "–"


def _peer(peer: dict[str, Any], ox: dict[str, Any]) -> str:
    """A peer's time over oxport's; "fail" where the peer ran and failed, "–" if not run."""
    if peer.get("seconds"):
        return _ratio(peer["seconds"], ox.get("seconds"))
    return "fail" if peer else "–"


def _secs(entry: dict[str, Any]) -> str:
    return f"{entry['seconds']:.2f}" if entry.get("seconds") else "fail"


def _check(entry: dict[str, Any], key: str) -> str:
    if entry.get("seconds") is None:
        return "–"
    value = entry.get(key)
    if value == "fp32":
        return "fp32"
    return "–" if value is None else ("yes" if value else "**no**")


def tables(summaries: list[dict[str, Any]]) -> str:
    """The Markdown tables: time ratios, then memory, size, graph and numerics (for a run
    with oxport's TorchScript front end), then the torch.export front end's table."""
    time_rows = ["| model | weights MB | floor s (trace + write) | oxport s | oxport ÷ floor "
                 "| TorchScript ÷ oxport | dynamo ÷ oxport |",
                 "|---|--:|--:|--:|--:|--:|--:|"]
    other_rows = ["| model | extra mem ÷ weights (floor / ox / TS / dy) | file ÷ weights "
                  "(ox / TS / dy) | nodes (ox / TS / dy) | ORT max abs err (ox) | matches "
                  "eager, 2nd shape (ox / TS / dy) |", "|---|--:|--:|--:|--:|--:|"]
    for s in summaries:
        w = s.get("weight_bytes", 0)
        ox, ts, dy, fl = (s.get(k, {}) for k in ("oxport", "ts", "dynamo", "floor"))
        floor_text = (f"{fl['seconds']:.2f} ({fl['trace_s']:.2f} + {fl['write_s']:.2f})"
                      if fl.get("seconds") else "–")
        time_rows.append(
            f"| {s['model']} | {_mb(w)} | {floor_text} | {_secs(ox)} | "
            f"{_ratio(ox.get('seconds'), fl.get('seconds'))} | "
            f"{_peer(ts, ox)} | {_peer(dy, ox)} |")
        trio = (ox, ts, dy)
        mem = " / ".join(_per_weight(e, "extra_bytes", w) for e in (fl, *trio))
        size = " / ".join(_per_weight(e, "file_bytes", w) for e in trio)
        nodes = " / ".join(str(e.get("nodes", "–")) for e in trio)
        err = ox.get("max_err")
        err_text = "–" if err is None else f"{err:.1e}" + {
            True: "", "fp32": " (fp32)"}.get(ox.get("ort_ok"), " **(over)**")
        dyn = " / ".join(_check(e, "dyn_ok") for e in trio)
        other_rows.append(f"| {s['model']} | {mem} | {size} | {nodes} | {err_text} | {dyn} |")
    text = ("\n".join(time_rows) + "\n\n" + "\n".join(other_rows) + "\n"
            if any("oxport" in s for s in summaries) else "")
    if any("oxport-export" in s for s in summaries):
        text += ("\n" if text else "") + _export_front_end_table(summaries)
    return text


def _cold(entry: dict[str, Any]) -> float | None:
    """Seconds of an export in a process that has not imported torch.export's machinery."""
    if entry.get("seconds") is None or entry.get("capture_import_s") is None:
        return None
    return entry["seconds"] + entry["capture_import_s"]


def _export_front_end_table(summaries: list[dict[str, Any]]) -> str:
    """oxport's torch.export front end against its floor (torch.export.export + the
    weights written once), torch's dynamo exporter and oxport's TorchScript front end."""
    rows = ["| model | export floor s (export + write) | oxport (torch.export) s | ÷ floor | "
            "÷ its own capture + write | "
            "dynamo ÷ it | TorchScript front end ÷ it | extra mem ÷ weights (export floor / "
            "it / dy) | nodes (it / dy) | matches eager, 2nd shape | torch.export imports s "
            "(untimed) | with them: ÷ floor / dynamo ÷ it |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for s in summaries:
        w = s.get("weight_bytes", 0)
        ex, fl, dy, ox = (s.get(k, {}) for k in ("oxport-export", "floor-export", "dynamo",
                                                 "oxport"))
        floor_text = (f"{fl['seconds']:.2f} ({fl['trace_s']:.2f} + {fl['write_s']:.2f})"
                      if fl.get("seconds") else "–")
        rows.append(
            f"| {s['model']} | {floor_text} | {_secs(ex)} | "
            f"{_ratio(ex.get('seconds'), fl.get('seconds'))} | "
            f"{_ratio(ex.get('over_own_capture'), 1.0)} | {_peer(dy, ex)} | "
            f"{_peer(ox, ex)} | "
            f"{' / '.join(_per_weight(e, 'extra_bytes', w) for e in (fl, ex, dy))} | "
            f"{ex.get('nodes', '–')} / {dy.get('nodes', '–')} | {_check(ex, 'dyn_ok')} | "
            f"{_ratio(ex.get('capture_import_s'), 1.0)} | "
            f"{_ratio(*map(_cold, (ex, fl)))} / {_ratio(*map(_cold, (dy, ex)))} |")
    return "\n".join(rows) + "\n"


def failures(summaries: list[dict[str, Any]]) -> str:
    lines = []
    for s in summaries:
        for exporter in ("oxport", "ts", "dynamo", "oxport-export"):
            entry = s.get(exporter, {})
            for key in ("error", "ort_error", "dyn_error"):
                if entry.get(key):
                    text = re.sub(r"\x1b\[[0-9;]*m", "", entry[key])  # terminal colours
                    lines.append(f"- {s['model']}, {LABELS[exporter]}: {text}")
    return "\n".join(lines)


def machine() -> str:
    import onnx
    import onnxruntime
    import torch

    with open("/proc/meminfo") as handle:
        total = int(re.search(r"MemTotal:\s+(\d+)", handle.read()).group(1)) * 1024
    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo") as handle:
        found = re.search(r"model name\s*:\s*(.+)", handle.read())
    if found:
        cpu = found.group(1).strip()
    return (f"{os.cpu_count()} cores ({cpu}), {total / 2**30:.0f} GiB RAM, Linux "
            f"{platform.release()}, Python {platform.python_version()}, torch {torch.__version__}, "
            f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, "
            f"opset {OPSET}")


def write_readme(text: str, mode: str) -> None:
    path = os.path.join(HERE, "README.md")
    with open(path) as handle:
        readme = handle.read()
    start, end = f"<!-- results:{mode} -->", f"<!-- /results:{mode} -->"
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in readme:
        readme = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, readme,
                        flags=re.S)
    else:
        readme = readme.rstrip() + "\n\n" + block + "\n"
    with open(path, "w") as handle:
        handle.write(readme)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "EXPORTER", "DIR"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--depth", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true",
                        help="time a second export: each child first exports a two-layer "
                             "model with the same exporter (no first-call costs)")
    parser.add_argument("--quick", action="store_true", help="small models, 1 repeat")
    parser.add_argument("--full", action="store_true", help="include the > 2 GB model")
    parser.add_argument("--models", nargs="+", help="only these models (by name)")
    parser.add_argument("--exporters", nargs="+", choices=EXPORTERS[1:],
                        default=list(EXPORTERS[1:]), help="the floor always runs")
    parser.add_argument("--repeat", type=int, help="runs per exporter (default 3, quick 1)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per child")
    parser.add_argument("--best", action="store_true",
                        help="times are the best (minimum) of the runs, not the median")
    parser.add_argument("--json", help="also write the summaries to this file (rewritten "
                                       "after each model, so an interrupted run keeps them)")
    parser.add_argument("--readme", action="store_true",
                        help="write the tables into benchmarks/README.md")
    parser.add_argument("--section", help="with --readme: the README block to write "
                                          "(<!-- results:SECTION -->; default: the run's mode, "
                                          "full for --report)")
    parser.add_argument("--report", nargs="+", metavar="JSON",
                        help="run nothing: print (and with --readme write) the tables of "
                             "earlier --json files, models in file order")
    args = parser.parse_args(argv)

    if args.report:
        results = []
        for path in args.report:
            with open(path) as handle:
                results.append(json.load(handle))
        summaries = [s for r in results for s in r["summaries"]]
        repeats = sorted({r["repeat"] for r in results})
        publish(summaries, "–".join(str(n) for n in dict.fromkeys((repeats[0], repeats[-1]))),
                results[0]["machine"],
                args.section or "full", args.readme, all(r.get("best") for r in results),
                all(r.get("warm") for r in results))
        return 0

    if args.child:
        result = child(*args.child, verify=args.verify, warm=args.warm, depth=args.depth)
        print(MARKER + json.dumps(result), flush=True)
        return 0

    from benchmarks.models import BY_NAME, MODELS

    if args.models:
        unknown = [m for m in args.models if m not in BY_NAME]
        if unknown:
            parser.error(f"unknown models {unknown}; choose from {sorted(BY_NAME)}")
        specs = [BY_NAME[m] for m in args.models]
    elif args.quick:
        specs = [s for s in MODELS if s.quick]
    else:
        specs = [s for s in MODELS if args.full or not s.full_only]
    repeat = args.repeat or (1 if args.quick else 3)
    exporters = ["floor", *(["floor-export"] if "oxport-export" in args.exporters else []),
                 *args.exporters]
    mode = "quick" if args.quick else "full" if args.full else "default"

    env = _child_env()
    print(machine(), flush=True)
    for exporter in exporters:  # warm bytecode and file caches; not recorded
        run_child(specs[0].name, exporter, False, env, args.timeout, args.warm)
    started = time.perf_counter()
    summaries = []
    for spec in specs:
        runs: dict[str, list[dict[str, Any]]] = {e: [] for e in exporters}
        for rep in range(repeat):
            for exporter in exporters:
                result = run_child(spec.name, exporter, rep == 0, env, args.timeout,
                                   args.warm, CALL_DEPTHS[rep % len(CALL_DEPTHS)])
                runs[exporter].append(result)
                shown = (f"{result['seconds']:.2f} s" if "seconds" in result
                         else f"FAILED: {result.get('error')}")
                print(f"  {spec.name:18} {LABELS[exporter]:11} run {rep + 1}: {shown} "
                      f"(load {result['load']:.1f})", flush=True)
        summaries.append(summarize(spec.name, runs, args.best))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"machine": machine(), "mode": mode, "repeat": repeat,
                           "best": args.best, "warm": args.warm, "summaries": summaries}, handle, indent=1)
    elapsed = time.perf_counter() - started

    print(f"{len(specs)} models, {repeat} run(s) each, {elapsed:.0f} s")
    publish(summaries, repeat, machine(), args.section or mode, args.readme, args.best,
            args.warm)
    return 0


def publish(summaries: list[dict[str, Any]], repeat: int | str, described: str, mode: str,
            readme: bool, best: bool = False, warm: bool = False) -> None:
    """Print the tables; with ``readme``, write them into README.md under ``mode``."""
    text = tables(summaries)
    problems = failures(summaries)
    load = statistics.mean(s["load"] for s in summaries)
    print("\n" + text + ("\n" + problems if problems else ""))
    print(f"mean load average {load:.1f}")
    if readme:
        note = (f"{described}. {repeat} interleaved run(s) per exporter"
                f"{', each the second export of its process (warm)' if warm else ''}, "
                f"{'best time, median memory' if best else 'median'}; mean load "
                f"average {load:.1f} during the runs ({time.strftime('%Y-%m-%d')}).")
        write_readme(note + "\n\n" + text + ("\nFailures:\n\n" + problems if problems else ""),
                     mode)


if __name__ == "__main__":
    sys.exit(main())
