"""What a first export's extra memory is made of, step by step, in fresh processes.

Each step runs in its own process, after the model is built and run once (as in
``bench_export.py``): its peak RSS (``VmHWM``, reset just before) minus the RSS before,
divided by the model's unique weight bytes.

* ``capture``: ``torch.export.export`` alone, with the model's dynamic axes;
* ``capture + schemas``: the same, then onnx's operator schema registry loaded (what any
  exporter that runs ``onnx.checker`` in its process loads);
* ``oxport``: ``oxport.export(..., dynamo=True)`` (capture, conversion, write, check).

The first two are a floor no exporter that captures with torch.export and checks its
model can go under; the last row's difference from the second is oxport's own share.

    python benchmarks/memory_floor.py                      # ResNet-50, 5 runs per step
    python benchmarks/memory_floor.py --models resnet-50 bert-base --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.bench_export import (  # noqa: E402
    OPSET, _child_env, _dynamic_shapes, _reset_peak, _status)

STEPS = ("capture", "capture + schemas", "oxport")


def _child(model_name: str, step: str, out_dir: str) -> dict[str, float]:
    import torch

    from benchmarks.models import BY_NAME, unique_weight_bytes

    warnings.simplefilter("ignore")
    spec = BY_NAME[model_name]
    torch.manual_seed(0)
    model = spec.build().eval()
    inputs = spec.inputs()
    with torch.no_grad():
        model(*inputs)
    import onnx  # noqa: F401 - imported before the step by oxport too
    import torch.export._trace  # noqa: F401 - torch.export's machinery, as bench_export

    import oxport
    import oxport.frontends.exported  # noqa: F401
    oxport.export  # noqa: B018 - the public names load on first use
    before = _status()["VmRSS"]
    _reset_peak()
    if step == "oxport":
        oxport.export(model, inputs, os.path.join(out_dir, "model.onnx"), dynamo=True,
                      input_names=spec.input_names, output_names=spec.output_names,
                      dynamic_axes=spec.dynamic_axes, opset_version=OPSET)
    else:
        torch.export.export(model, inputs, dynamic_shapes=_dynamic_shapes(model, spec),
                            strict=False)
        if step == "capture + schemas":
            onnx.defs.get_schema("Conv", OPSET)
    return {"extra_bytes": _status()["VmHWM"] - before,
            "weight_bytes": unique_weight_bytes(model)}


def measure(model_name: str, runs: int) -> dict[str, dict[str, float]]:
    """Median extra bytes per step, and each run's (steps interleaved run by run)."""
    samples: dict[str, list[dict[str, float]]] = {step: [] for step in STEPS}
    for _ in range(runs):
        for step in STEPS:
            with tempfile.TemporaryDirectory() as out_dir:
                done = subprocess.run(
                    [sys.executable, __file__, "--child", model_name, step, out_dir],
                    capture_output=True, text=True, env=_child_env(), check=True)
            samples[step].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {step: {"extra_bytes": statistics.median(s["extra_bytes"] for s in runs_),
                   "weight_bytes": runs_[0]["weight_bytes"],
                   "runs": [s["extra_bytes"] for s in runs_]}
            for step, runs_ in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet-50"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="also write the medians to this file")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    results = {}
    print("| model | " + " | ".join(f"{step}: MB (÷ weights)" for step in STEPS) + " |")
    print("|---|" + "--:|" * len(STEPS))
    for model_name in args.models:
        results[model_name] = measure(model_name, args.runs)
        cells = [f"{r['extra_bytes'] / 1e6:.1f} ({r['extra_bytes'] / r['weight_bytes']:.3f})"
                 for r in results[model_name].values()]
        print(f"| {model_name} | " + " | ".join(cells) + " |", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"runs": args.runs, "models": results}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
