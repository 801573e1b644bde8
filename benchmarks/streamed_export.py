"""A checkpoint larger than the memory limit exported with streamed weights (issue #33).

Builds a Llama checkpoint with random bf16 weights (one tensor in memory at a time, written
as safetensors shards by this script), then in a child process under a memory limit builds
the model on the meta device (``oxport.empty_weights()``) and exports it with
``dynamo=True, weights=CKPT`` to fp32 (or fp16) with external data; reports the child's
peak RSS, the export's time beside the time of copying the checkpoint's bytes on the same
disk, and (``--generate``) greedy ids from ONNX Runtime against transformers' ``generate``.

    python benchmarks/streamed_export.py --preset 1.3b --limit 2G --generate
    python benchmarks/streamed_export.py --preset tiny          # a quick check of the script
    python benchmarks/streamed_export.py --preset 7b --dtype float16 --limit 2G

The limit is a cgroup (``systemd-run --scope -p MemoryMax=``) where systemd runs, else
``RLIMIT_DATA`` on the child (``prlimit --data``: private writable memory, the heap; the
memory-mapped checkpoint and the libraries' code are not counted, as a cgroup would let the
kernel drop those pages). Writes WORK/ckpt, WORK/onnx; reuses a checkpoint already there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from typing import Any

PRESETS = {
    # name: (layers, hidden, intermediate, heads, kv heads, vocab)
    "tiny": (2, 256, 512, 8, 2, 1000),
    "350m": (4, 2048, 5632, 32, 4, 49152),
    "1.3b": (24, 2048, 5632, 32, 4, 49152),
    "7b": (32, 4096, 11008, 32, 32, 32000),
}
SHARD_BYTES = 1 << 30
PROMPT = [1, 415, 293, 906, 285, 114, 287, 754, 272, 178]  # below every preset's vocab


def _config(preset: str):
    import transformers

    layers, hidden, intermediate, heads, kv_heads, vocab = PRESETS[preset]
    return transformers.LlamaConfig(
        hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
        max_position_embeddings=2048, tie_word_embeddings=False, bos_token_id=1,
        eos_token_id=2, dtype="bfloat16")


# -- the checkpoint ---------------------------------------------------------------------
def make_checkpoint(folder: str, preset: str, tiled: bool = False) -> None:
    """Random bf16 weights as safetensors shards of about SHARD_BYTES, one tensor at a time
    (``tiled``: each tensor tiled from one random block, at a random offset, which writes a
    7 B checkpoint in minutes where ``randn`` of every weight takes most of an hour)."""
    import torch
    import transformers

    config = _config(preset)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    shapes = [(name, tuple(t.shape)) for name, t in model.state_dict().items()]
    os.makedirs(folder, exist_ok=True)
    config.save_pretrained(folder)
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, shape in shapes:
        nbytes = 2 * _numel(shape)
        if size and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
        size += nbytes
    weight_map = {}
    generator = torch.Generator().manual_seed(0)
    for index, shard in enumerate(shards):
        file = f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        _write_shard(os.path.join(folder, file), shard, generator, tiled)
        weight_map.update((name, file) for name, _ in shard)
    total = sum(2 * _numel(shape) for _, shape in shapes)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as handle:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, handle, indent=1)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


#: The random block tiled weights repeat (a prime length: rows of a weight do not line up).
TILE_ELEMENTS = 1_000_003


def _random(shape: tuple[int, ...], generator, tiled: bool):
    """A bf16 tensor of ``shape``: normal(0, 0.02), or tiled from one random block."""
    import torch

    if not tiled:
        return (0.02 * torch.randn(shape, generator=generator)).to(torch.bfloat16)
    block = (0.02 * torch.randn(TILE_ELEMENTS, generator=generator)).to(torch.bfloat16)
    count = _numel(shape)
    start = int(torch.randint(TILE_ELEMENTS, (1,), generator=generator))
    flat = block.roll(-start).repeat(count // TILE_ELEMENTS + 1)[:count]
    return flat.view(shape)


def _write_shard(path: str, tensors: list[tuple[str, tuple[int, ...]]], generator,
                 tiled: bool = False) -> None:
    import torch

    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        nbytes = 2 * _numel(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        for name, shape in tensors:
            if name.endswith("norm.weight"):
                tensor = (1 + 0.1 * torch.randn(shape, generator=generator)).to(torch.bfloat16)
            else:
                tensor = _random(shape, generator, tiled)
            handle.write(memoryview(tensor.view(torch.int16).numpy()).cast("B"))
            del tensor


def copy_seconds(folder: str, scratch: str) -> float:
    """The time to copy the checkpoint's shards on the same disk (synced)."""
    os.makedirs(scratch, exist_ok=True)
    start = time.perf_counter()
    for file in sorted(os.listdir(folder)):
        if file.endswith(".safetensors"):
            shutil.copyfile(os.path.join(folder, file), os.path.join(scratch, file))
    os.sync()
    seconds = time.perf_counter() - start
    shutil.rmtree(scratch)
    return seconds


# -- the export (in the child) ----------------------------------------------------------
def export(folder: str, out: str, dtype: str) -> None:
    import torch
    import transformers

    import oxport

    start = time.perf_counter()
    config = transformers.AutoConfig.from_pretrained(folder)
    with oxport.empty_weights():
        model = transformers.LlamaForCausalLM(config).eval()
    model.to(getattr(torch, dtype))
    ids = torch.tensor([PROMPT[:4]])
    result = oxport.export(
        model, (ids,), out, kwargs={"use_cache": False}, dynamo=True, weights=folder,
        input_names=["input_ids"], output_names=["logits"], external_data=True,
        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                      "logits": {0: "batch", 1: "sequence"}})
    seconds = time.perf_counter() - start
    synced = time.perf_counter()
    os.sync()  # as the copy is timed: until the bytes are on the disk
    sync_seconds = time.perf_counter() - synced
    with open("/proc/self/status") as handle:
        status = handle.read()
    hwm = int(status.split("VmHWM:")[1].split()[0]) * 1024
    peak_virtual = int(status.split("VmPeak:")[1].split()[0]) * 1024
    print(json.dumps({"export_seconds": seconds, "sync_seconds": sync_seconds, "peak_rss": hwm, "peak_virtual": peak_virtual,
                      "phases": {k: round(v, 2) for k, v in result.timings.items()},
                      "weight_bytes": sum(w.nbytes for w in result.serialized.weights)}))


# -- generation (in children) ------------------------------------------------------------
def ort_ids(out: str, tokens: int) -> list[int]:
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    ids = list(PROMPT)
    for _ in range(tokens):
        (logits,) = session.run(None, {"input_ids": np.array([ids], dtype=np.int64)})
        ids.append(int(logits[0, -1].argmax()))
    return ids[len(PROMPT):]


def transformers_ids(folder: str, tokens: int, dtype: str) -> list[int]:
    import torch
    import transformers

    model = transformers.LlamaForCausalLM.from_pretrained(
        folder, dtype=getattr(torch, dtype)).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=tokens, do_sample=False,
                             min_new_tokens=tokens)
    return out[0, len(PROMPT):].tolist()


# -- the parent -------------------------------------------------------------------------
def _parse_limit(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units \
        else int(text)


def _limited(command: list[str], limit: str | None, rlimit: str = "data"
             ) -> tuple[list[str], str]:
    """``command`` under the memory limit, and how it is enforced."""
    if not limit:
        return command, "none"
    if shutil.which("systemd-run") and subprocess.run(
            ["systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={limit}", "true"],
            capture_output=True, check=False).returncode == 0:
        return (["systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={limit}",
                 "-p", "MemorySwapMax=0", *command], f"cgroup MemoryMax={limit}")
    return (["prlimit", f"--{rlimit}={_parse_limit(limit)}", *command],
            f"RLIMIT_{rlimit.upper()}={limit} (prlimit --{rlimit}; systemd is not running)")


def _child(args: list[str], limit: str | None = None, rlimit: str = "data"
           ) -> tuple[Any, str]:
    """What a child running this script prints last (JSON), and how it was limited."""
    command, how = _limited([sys.executable, os.path.abspath(__file__), *args], limit, rlimit)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"child {args[0]} failed ({done.returncode}) under {how}")
    last = done.stdout.strip().splitlines()[-1]
    return json.loads(last), how


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=PRESETS, default="1.3b")
    parser.add_argument("--work", default="/tmp/oxport-streamed")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--limit", default="2G", help="memory limit of the export ('' none)")
    parser.add_argument("--rlimit", choices=["data", "as"], default="data",
                        help="without systemd: limit the heap (data, default) or the whole "
                             "address space (as: the mapped checkpoint counts too)")
    parser.add_argument("--generate", action="store_true",
                        help="compare ONNX Runtime's greedy ids with transformers' generate")
    parser.add_argument("--tokens", type=int, default=12)
    parser.add_argument("--keep", action="store_true", help="keep the ONNX files")
    parser.add_argument("--repeat", type=int, default=1,
                        help="copy and export this many times, one after the other (the "
                             "machine is shared: the ratios vary from run to run)")
    parser.add_argument("--save", metavar="JSON", help="also write the runs to this file")
    parser.add_argument("--tiled", action=argparse.BooleanOptionalAction, default=None,
                        help="write the checkpoint's weights tiled from one random block "
                             "(fast; default for the 7b preset)")
    options, rest = parser.parse_known_args()
    if rest:  # a child
        {"_export": lambda: export(rest[1], rest[2], rest[3]),
         "_ort": lambda: print(json.dumps(ort_ids(rest[1], int(rest[2])))),
         "_hf": lambda: print(json.dumps(transformers_ids(rest[1], int(rest[2]), rest[3])))
         }[rest[0]]()
        return
    folder = os.path.join(options.work, f"ckpt-{options.preset}")
    out_dir = os.path.join(options.work, f"onnx-{options.preset}-{options.dtype}")
    if not os.path.exists(os.path.join(folder, "model.safetensors.index.json")):
        start = time.perf_counter()
        tiled = options.preset == "7b" if options.tiled is None else options.tiled
        make_checkpoint(folder, options.preset, tiled)
        print(f"checkpoint written in {time.perf_counter() - start:.1f} s")
    ckpt_bytes = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
                     if f.endswith(".safetensors"))
    out = os.path.join(out_dir, "model.onnx")
    runs = []
    for _ in range(options.repeat):
        copy = copy_seconds(folder, os.path.join(options.work, "copy"))
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        stats, how = _child(["_export", folder, out, options.dtype], options.limit or None,
                            options.rlimit)
        writing = stats["phases"].get("write", 0.0) + stats["sync_seconds"]
        runs.append((copy, stats, writing))
        print(f"copy {copy:.1f} s; export {stats['export_seconds']:.1f} s, writing the "
              f"weights {writing:.1f} s with the sync: {writing / copy:.2f}x the copy; peak "
              f"RSS {stats['peak_rss'] / 2**30:.2f} GiB", flush=True)
    data = os.path.getsize(out + ".data")
    copy, stats, writing = sorted(runs, key=lambda run: run[2] / run[0])[len(runs) // 2]
    ratios = ", ".join(f"{w / c:.2f}x" for c, _, w in runs)
    rows = [
        ("checkpoint", f"{options.preset} Llama, bf16, {ckpt_bytes / 1e9:.2f} GB"),
        ("exported to", f"{options.dtype}, {data / 1e9:.2f} GB of external data in one file"),
        ("memory limit", how),
        ("peak RSS of the export (VmHWM)",
         f"{max(r[1]['peak_rss'] for r in runs) / 2**30:.2f} GiB"),
        ("peak address space (VmPeak)",
         f"{max(r[1]['peak_virtual'] for r in runs) / 2**30:.2f} GiB"),
        ("export time", (f"{stats['export_seconds']:.1f} s (phases: {stats['phases']}; "
                         f"then sync {stats['sync_seconds']:.1f} s)")),
        ("copying the checkpoint's shards (synced)", f"{copy:.1f} s"),
        ("writing the weights (write phase + sync) / copying",
         f"**{writing / copy:.2f}x** (median of {len(runs)}: {ratios})"),
        ("whole export (+ sync) / copying",
         f"{(stats['export_seconds'] + stats['sync_seconds']) / copy:.2f}x"),
    ]
    if options.generate:
        ort_out, _ = _child(["_ort", out, str(options.tokens)])
        hf_out, _ = _child(["_hf", folder, str(options.tokens), options.dtype])
        same = ort_out == hf_out
        first = next((i for i, (a, b) in enumerate(zip(ort_out, hf_out)) if a != b), None)
        verdict = "identical" if same else f"differ from step {first}"
        rows.append(("greedy ids, ONNX Runtime vs transformers",
                     f"{verdict} ({len(ort_out)} tokens: {ort_out})"))
    if options.save:
        with open(options.save, "w") as handle:
            json.dump({"preset": options.preset, "dtype": options.dtype,
                       "checkpoint_bytes": ckpt_bytes, "data_bytes": data, "limit": how,
                       "runs": [{"copy_seconds": round(c, 2), "write_and_sync_seconds":
                                 round(w, 2), "ratio": round(w / c, 2), **st}
                                for c, st, w in runs],
                       "table": dict(rows)}, handle, indent=1)
    if not options.keep:
        shutil.rmtree(out_dir)
    print("| | |\n| --- | --- |")
    for key, value in rows:
        print(f"| {key} | {value} |")


if __name__ == "__main__":
    main()
