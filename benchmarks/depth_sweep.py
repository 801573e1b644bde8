"""Export time against model depth: oxport and torch.onnx (TorchScript path) side by side.

Exports a stack of ``depth`` Linear+ReLU blocks for each depth (10, 100, 1000 by
default) with ``oxport.export`` and, in the same run, ``torch.onnx.export(dynamo=False)``;
prints seconds per layer, oxport's phases, and the ratio. Linear scaling means the
seconds per layer stay flat as depth grows; the script exits non-zero when oxport's
per-layer time at the deepest model is more than ``--tolerance`` times the one at
the middle depth (the shallowest is dominated by fixed costs).

    python benchmarks/depth_sweep.py [--depths 10 100 1000] [--repeat 3] [--no-torch]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import oxport  # noqa: E402
from tests.models.mlp import mlp_stack  # noqa: E402


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _oxport(model: torch.nn.Module, x: torch.Tensor) -> dict[str, float]:
    result = oxport.export(model, (x,), io.BytesIO())
    return result.timings


def _torch_onnx(model: torch.nn.Module, x: torch.Tensor) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), io.BytesIO(), dynamo=False, opset_version=20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    parser.add_argument("--no-torch", action="store_true", help="skip torch.onnx")
    parser.add_argument("--tolerance", type=float, default=2.0,
                        help="allowed growth of seconds per layer, middle to deepest")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    oxport.export(mlp_stack(2, args.width), torch.randn(2, args.width), io.BytesIO())  # warm up
    print(f"{'layers':>7} {'oxport s':>9} {'ms/layer':>9} {'torch.onnx s':>13} {'ms/layer':>9} "
          f"{'ratio':>6}  oxport phases (s)")
    per_layer: list[float] = []
    for depth in args.depths:
        model = mlp_stack(depth, args.width).eval()
        x = torch.randn(2, args.width)
        phases: dict[str, float] = {}

        def run_oxport() -> None:
            phases.update(_oxport(model, x))

        ours = _best(run_oxport, args.repeat)
        per_layer.append(ours / depth)
        theirs = None if args.no_torch else _best(lambda: _torch_onnx(model, x), args.repeat)
        phase_text = " ".join(f"{k}={v:.3f}" for k, v in phases.items() if v >= 0.0005)
        torch_text = (f"{theirs:13.3f} {theirs / depth * 1e3:9.3f} {theirs / ours:6.2f}"
                      if theirs is not None else f"{'-':>13} {'-':>9} {'-':>6}")
        print(f"{depth:7d} {ours:9.3f} {ours / depth * 1e3:9.3f} {torch_text}  {phase_text}",
              flush=True)

    if len(per_layer) >= 2:
        growth = per_layer[-1] / per_layer[-2]
        linear = growth <= args.tolerance
        print(f"oxport ms/layer grows x{growth:.2f} from {args.depths[-2]} to {args.depths[-1]} "
              f"layers: {'linear' if linear else 'NOT linear'} (tolerance x{args.tolerance})")
        return 0 if linear else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
