"""Export time and peak memory of a decoder with past, side by side, on one checkpoint:
oxport's ``text-generation-with-past`` (tracing and torch.export), transformers' own
exporter (``transformers.exporters.OnnxExporter.export_for_generation``) and ONNX Runtime
GenAI's model builder (``python -m onnxruntime_genai.models.builder``).

A Llama with random weights is written by ``save_pretrained`` (no download) with a small
word-level tokenizer (the builder reads one). Each exporter runs in its own process, which
reports the seconds its export took (imports excluded), its peak resident memory and that
peak minus its memory before the export began (the imports), the figure compared with the
weights' size.

    python benchmarks/task_export_bench.py --preset 207m --out benchmarks/results/task-export.json
    python benchmarks/task_export_bench.py --preset small
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Llama sizes: the issue's 207 M-parameter checkpoint, and a small one for a quick look.
PRESETS: dict[str, dict[str, int]] = {
    "207m": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 12,
             "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000},
    "small": {"hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8000},
}
EXPORTERS = ("oxport-trace", "oxport-dynamo", "transformers", "genai-builder")


def write_checkpoint(folder: Path, sizes: dict[str, int]) -> int:
    """A random-weight Llama and a word-level tokenizer in ``folder``; returns the weights'
    bytes."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(**sizes, max_position_embeddings=2048, bos_token_id=1,
                                      eos_token_id=2, pad_token_id=0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3,
             **{f"w{i}": i for i in range(4, sizes["vocab_size"])}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>").save_pretrained(folder)
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def _rss() -> int:
    """The process's resident memory now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(exporter: str, checkpoint: str, out: str) -> dict[str, Any]:
    """Run one exporter in this process; its time and memory."""
    import torch  # every exporter imports it: not part of the export's memory
    import transformers

    before = _rss()
    started = time.perf_counter()
    if exporter.startswith("oxport"):
        import oxport

        oxport.export_task(checkpoint, out, "text-generation-with-past",
                           dynamo=exporter == "oxport-dynamo")
    elif exporter == "transformers":
        from transformers.exporters import OnnxConfig, OnnxExporter

        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
        ids = torch.ones(1, 8, dtype=torch.long)
        exported = OnnxExporter().export_for_generation(
            model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
            config=OnnxConfig(dynamic=True))
        exported.save_pretrained(out)
    else:
        sys.argv = ["builder", "-m", checkpoint, "-i", checkpoint, "-o", out, "-p", "fp32",
                    "-e", "cpu"]
        runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    files = sorted(p.name for p in Path(out).iterdir())
    size = sum(p.stat().st_size for p in Path(out).iterdir() if p.suffix in (".onnx", ".data"))
    return {"exporter": exporter, "seconds": round(seconds, 2), "peak_rss": peak,
            "rss_before": before, "peak_over_imports": peak - before, "files": files,
            "onnx_bytes": size}


def byte_compile_oxport() -> None:
    """Compile oxport's modules as installing a wheel does (pip compiles every package it
    installs, the builder's included): an editable install run with
    ``PYTHONDONTWRITEBYTECODE`` would otherwise recompile them in every child, ~0.4 s that
    no installed exporter pays."""
    import compileall

    import oxport
    import oxport.opsets
    import oxport.plugins

    for package in (oxport, oxport.plugins, oxport.opsets):
        for folder in package.__path__:
            compileall.compile_dir(folder, quiet=1)


def run(exporter: str, checkpoint: Path, timeout: int) -> dict[str, Any]:
    # The previous child's files may still be in the page cache on their way to the disk:
    # written back while this child runs, they would slow it down by as much.
    os.sync()
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, __file__, "--child", exporter, str(checkpoint), out]
        try:
            done = subprocess.run(command, check=False, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"exporter": exporter, "error": f"no result in {timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"exporter": exporter,
                "error": " ".join(done.stderr.strip().splitlines()[-1:])[:400]}
    return json.loads(lines[-1])


def table(rows: list[dict[str, Any]], weights: int) -> str:
    lines = [f"weights: {weights / 2**20:.0f} MiB", "",
             ("| exporter | export s | peak RSS MiB | peak over imports MiB | x weights | "
              "ONNX files MiB | files |"), "|---|---|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['exporter']} | failed: {row['error']} | | | | | |")
            continue
        lines.append(
            f"| {row['exporter']} | {row['seconds']} | {row['peak_rss'] / 2**20:.0f} | "
            f"{row['peak_over_imports'] / 2**20:.0f} | "
            f"{row['peak_over_imports'] / weights:.2f} | {row['onnx_bytes'] / 2**20:.0f} | "
            f"{', '.join(row['files'])} |")
    return "\n".join(lines)


def medians(rows: list[dict[str, Any]]) -> str:
    """Each exporter's median export seconds and peak over imports, over its rows."""
    lines = ["| exporter | runs | median export s | median peak over imports MiB |",
             "|---|---|---|---|"]
    for exporter in dict.fromkeys(row["exporter"] for row in rows):
        done = [row for row in rows if row["exporter"] == exporter and "error" not in row]
        if done:
            lines.append(f"| {exporter} | {len(done)} | "
                         f"{statistics.median(r['seconds'] for r in done)} | "
                         f"{statistics.median(r['peak_over_imports'] for r in done) / 2**20:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=PRESETS, default="small")
    parser.add_argument("--checkpoint", type=Path,
                        help="an existing checkpoint folder (else one is written)")
    parser.add_argument("--exporters", type=lambda s: s.split(","), default=list(EXPORTERS))
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the exporters this many times, interleaved, the order "
                             "rotated each round; the table adds each one's median")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--out", type=Path, help="write the rows here as JSON")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    byte_compile_oxport()
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = args.checkpoint or Path(scratch) / "llama"
        if args.checkpoint is None:
            write_checkpoint(checkpoint, PRESETS[args.preset])
        weights = sum(p.stat().st_size for p in checkpoint.glob("*.safetensors"))
        rows = []
        for round_ in range(args.rounds):
            shift = round_ % len(args.exporters)
            for exporter in args.exporters[shift:] + args.exporters[:shift]:
                rows.append(run(exporter, checkpoint, args.timeout))
                print(json.dumps(rows[-1]), flush=True)
    print(table(rows, weights))
    if args.rounds > 1:
        print(medians(rows))
    if args.out:
        args.out.write_text(json.dumps({"preset": args.preset, "weights": weights,
                                        "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
