"""What the baked-size warning costs an export with dynamic axes (``oxport.frontends.torchscript.baked_sizes``).

For each model of ``benchmarks/models.py`` (BERT, GPT-2, the LSTM LM, T5, the LLaMA-style
decoder by default) with its dynamic axes: ``oxport.convert`` with the recorder on and off,
interleaved (``--repeat`` each, medians), and, in the runs with it on, the time spent in the
mechanism itself (recording conversions while tracing, and the warning step after the
conversion with the shape inference it needs when no other warning does), as a share of
the export. The medians move with the machine's load; the mechanism's own time does not.

    python benchmarks/baked_sizes_overhead.py [--models bert-base t5-small] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import oxport  # noqa: E402
from benchmarks.models import BY_NAME  # noqa: E402
from oxport.exporter import pipeline  # noqa: E402
from oxport.frontends.torchscript import baked_sizes  # noqa: E402

DEFAULT = ["bert-base", "gpt2-small", "lstm-lm", "t5-small", "llama-style"]


class _Meter:
    """Times the recorder's calls and the warning step: :func:`baked_sizes.warn`, and the
    shape inference before it when the baked sizes alone asked for one."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.records = 0
        record, warn = baked_sizes.Recorder.record, baked_sizes.warn
        warn_step = pipeline._warn_traced_sizes_of_dynamic_axes
        warned: list[float] = []

        def timed_record(recorder, *args):
            start = time.perf_counter()
            record(recorder, *args)
            self.seconds += time.perf_counter() - start
            self.records += 1

        def timed_warn(*args):
            start = time.perf_counter()
            warn(*args)
            warned.append(time.perf_counter() - start)

        def timed_warn_step(graph, conversion, dynamic_inputs, front_graph, baked):
            warned.clear()
            start = time.perf_counter()
            warn_step(graph, conversion, dynamic_inputs, front_graph, baked)
            whole = time.perf_counter() - start
            self.seconds += sum(warned) if conversion.traced_size_uses else whole

        baked_sizes.Recorder.record = timed_record
        baked_sizes.warn = timed_warn
        pipeline._warn_traced_sizes_of_dynamic_axes = timed_warn_step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT, choices=sorted(BY_NAME))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    recorder = baked_sizes.Recorder
    meter = _Meter()
    print("| model | recorder on (s) | off (s) | on/off | conversions | mechanism (ms) | share |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models:
        spec = BY_NAME[name]
        model, inputs = spec.build().eval(), spec.inputs()
        options = dict(input_names=spec.input_names, output_names=spec.output_names,
                       dynamic_axes=spec.dynamic_axes)
        oxport.convert(model, inputs, **options)  # plugins loaded, caches warm
        times: dict[bool, list[float]] = {True: [], False: []}
        meter.seconds, meter.records = 0.0, 0
        for run in range(args.repeat):
            for on in (True, False) if run % 2 == 0 else (False, True):
                baked_sizes.Recorder = recorder if on else (lambda: None)  # type: ignore
                start = time.perf_counter()
                oxport.convert(model, inputs, **options)
                times[on].append(time.perf_counter() - start)
        baked_sizes.Recorder = recorder  # type: ignore[misc]
        on, off = statistics.median(times[True]), statistics.median(times[False])
        mechanism = meter.seconds / args.repeat
        print(f"| {name} | {on:.2f} | {off:.2f} | {on / off:.3f} | "
              f"{meter.records // args.repeat} | {mechanism * 1000:.0f} | "
              f"{mechanism / on * 100:.1f}% |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
