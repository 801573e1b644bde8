"""Every causal-LM class of the installed transformers through ``text-generation-with-past``.

For each model type of transformers' causal-LM mapping (deduplicated by class): build a small
config from the defaults (2 layers, hidden 32, 4 heads...), random weights, check that eager
``generate`` is deterministic, ``save_pretrained`` it, export it with
``oxport.export_task(..., "text-generation-with-past", verify=True)`` on each front end
(greedy generation of 12 tokens in ONNX Runtime against transformers' ``generate``), and
record the verdict or why not. A worker process runs them in turn (a hang or crash is one
row, and a new worker goes on), results are appended to a JSON-lines file, and a run
resumes where it stopped.

    python benchmarks/causal_lm_sweep.py --out benchmarks/results/causal_lm_sweep.jsonl
    python benchmarks/causal_lm_sweep.py --out ... --only llama,gpt2 --front-ends trace
    python benchmarks/causal_lm_sweep.py --out ... --markdown docs/transformers.md

``--markdown`` rewrites the table between the sweep markers of that file from the results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

#: Small sizes, set where the default config has the attribute.
SMALL: dict[str, Any] = {
    "hidden_size": 32, "n_embd": 32, "d_model": 32, "embed_dim": 32, "word_embed_proj_dim": 32,
    "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2, "n_layers": 2, "decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "decoder_attention_heads": 4,
    "num_key_value_heads": 2, "multi_query_group_num": 2,
    "intermediate_size": 64, "ffn_dim": 64, "n_inner": 64, "decoder_ffn_dim": 64,
    "ffn_hidden_size": 64, "d_ff": 64, "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16, "head_dim": 8, "kv_channels": 8,
    "vocab_size": 128, "max_position_embeddings": 128, "n_positions": 128, "n_ctx": 128,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
    "v_head_dim": 8, "rotary_dim": 4, "sliding_window": 8, "attention_chunk_size": 8,
}
#: A small config that still builds more parameters than this is not run (a table the
#: sizes above do not reach would fill the memory of the machine).
MAX_PARAMETERS = 50_000_000
TIMEOUT = 600
FRONT_ENDS = ("trace", "dynamo")
BEGIN, END = "<!-- causal-lm-sweep:begin -->", "<!-- causal-lm-sweep:end -->"


def architectures() -> dict[str, str]:
    """Class name -> its config's model type, every causal-LM class transformers has."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    found: dict[str, str] = {}
    for model_type, name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        cls = getattr(transformers, name, None)
        own = getattr(getattr(cls, "config_class", None), "model_type", None)
        found.setdefault(name, own or model_type)
    return found


#: Second tries, for configs that refuse :data:`SMALL` (head sizes tied to the hidden size,
#: head counts to the kv heads...): the first that builds the model is used.
FALLBACKS: list[dict[str, Any]] = [
    {**SMALL, "hidden_size": 64, "n_embd": 64, "d_model": 64, "embed_dim": 64,
     "word_embed_proj_dim": 64, "num_key_value_heads": 4, "multi_query_group_num": 4,
     "head_dim": 16, "kv_channels": 16, "intermediate_size": 128},
    {k: v for k, v in SMALL.items() if k not in (
        "head_dim", "kv_channels", "num_key_value_heads", "multi_query_group_num",
        "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "kv_lora_rank", "q_lora_rank",
        "rotary_dim")},
]


#: Per model type, what :data:`SMALL` alone leaves inconsistent (set whatever the default):
#: counts tied to the layer count that the config's validator does not check (Dory's 8 input
#: and 8 output layers of 2 make a negative recurrent section), layer lists of the default
#: depth (Zamba's; two of its layers share the hybrid transformer), and MLA models whose
#: released configs have as many kv heads as heads (MiniCPM3 expands its latent keys to every
#: head, and transformers' SDPA path repeats them again when ``num_key_value_heads`` is lower
#: and a padding mask is given).
OVERRIDES: dict[str, dict[str, Any]] = {
    "dory": {"num_hidden_layers": 3, "n_input_layers": 1, "n_output_layers": 1},
    "minicpm3": {"num_key_value_heads": 4},
    "zamba": {"num_hidden_layers": 3,
              "layer_types": ["linear_attention", "hybrid", "hybrid"]},
}


def small_config(model_type: str, sizes: dict[str, Any] = SMALL) -> Any:
    """The model type's default config with ``sizes`` where it has them, and its
    :data:`OVERRIDES`."""
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    default = cls()
    kwargs = {k: v for k, v in sizes.items() if getattr(default, k, None) is not None}
    kwargs.update(OVERRIDES.get(model_type, {}))
    if getattr(default, "rotary_dim", None) is None:
        kwargs.pop("rotary_dim", None)
    if hasattr(default, "is_decoder"):  # encoders' causal-LM heads need it for a cache
        kwargs["is_decoder"] = True
    config = cls(**kwargs)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value >= SMALL["vocab_size"]:
            setattr(config, name, 1 if name != "pad_token_id" else 0)
    return config


def build(name: str, model_type: str) -> Any:
    """The model from the first of :data:`SMALL` and :data:`FALLBACKS` it builds with and
    runs a forward pass on (the first one's error otherwise)."""
    import torch
    import transformers

    first: Exception | None = None
    for sizes in (SMALL, *FALLBACKS):
        try:
            config = small_config(model_type, sizes)
            with torch.device("meta"):  # sized before any memory is taken
                parameters = sum(p.numel() for p in getattr(transformers, name)(config)
                                 .parameters())
            if parameters > MAX_PARAMETERS:
                raise ValueError(f"{parameters / 1e6:.0f} M parameters from the small config "
                                 f"(sizes it does not shrink), over {MAX_PARAMETERS / 1e6:.0f} M")
            torch.manual_seed(0)
            model = getattr(transformers, name)(config).eval()
            with torch.no_grad():
                model(torch.ones(1, 3, dtype=torch.long))
            return model
        except Exception as exc:  # noqa: BLE001 - the next sizes may do
            first = first or exc
    raise first


def run_one(model_type: str, name: str, front_end: str) -> dict[str, Any]:
    """Build, check, export and verify one architecture on one front end."""
    import torch
    import transformers

    import oxport

    row: dict[str, Any] = {"architecture": name, "model_type": model_type,
                           "front_end": front_end}
    stage = "build"
    try:
        model = build(name, model_type)
        stage = "eager generate"
        ids = torch.randint(3, SMALL["vocab_size"], (2, 5), generator=torch.Generator()
                            .manual_seed(0))
        config = transformers.GenerationConfig(do_sample=False, max_new_tokens=12,
                                               min_new_tokens=12, eos_token_id=None,
                                               pad_token_id=0)
        with torch.no_grad():
            first = model.generate(ids, generation_config=config)
            second = model.generate(ids, generation_config=config)
        if not torch.equal(first, second):
            row.update(status="not deterministic", stage=stage,
                       reason="eager generate gives different ids on the same input")
            return row
        with tempfile.TemporaryDirectory() as folder:
            stage = "save"
            model.save_pretrained(folder)
            stage = "export"
            started = time.perf_counter()
            result = oxport.export_task(folder, Path(folder) / "onnx",
                                        "text-generation-with-past",
                                        dynamo=front_end == "dynamo", verify=True)
            row["seconds"] = round(time.perf_counter() - started, 1)
        verdict = result.verification
        row.update(status="ok" if verdict["ok"] else "mismatch", stage="verify",
                   reason="" if verdict["ok"] else verdict["report"],
                   max_logit_difference=verdict["max_logit_difference"])
    except Exception as exc:  # noqa: BLE001 - one row per architecture, whatever failed
        row.update(status="not buildable" if stage in ("build", "eager generate", "save")
                   else "export failed", stage=stage, reason=_one_line(exc),
                   traceback=traceback.format_exc(limit=-3))
    return row


def _one_line(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text[:400]


def sweep(out: Path, only: list[str] | None, front_ends: list[str], timeout: int) -> None:
    """Run every (architecture, front end) not in ``out`` yet, in a worker process that
    imports torch and transformers once; a row that takes longer than ``timeout`` or a
    worker that dies is recorded, and a new worker goes on with the next."""
    done = {(r["architecture"], r["front_end"]) for r in read(out)}
    todo = [(model_type, name, front_end) for name, model_type in architectures().items()
            if not only or model_type in only or name in only
            for front_end in front_ends if (name, front_end) not in done]
    while todo:
        for row in _worker_rows(todo, timeout):
            todo = todo[1:]
            with open(out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{row['architecture']:40} {row['front_end']:6} {row['status']:18} "
                  f"{row.get('reason', '')[:100]}", flush=True)


def _worker_rows(todo: list[tuple[str, str, str]], timeout: int) -> Any:
    """The rows of a worker running ``todo`` in order, until it finishes, dies or stalls
    (then that job's row says so)."""
    with tempfile.TemporaryFile("w+") as errors:  # not a pipe: a full one blocks the worker
        worker = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(todo)], stdout=subprocess.PIPE,
            stderr=errors, env={"OMP_NUM_THREADS": "1",  # tiny models: threads only contend
                                **os.environ, "TRANSFORMERS_VERBOSITY": "error"})
        lines = _lines(worker.stdout.fileno(), timeout)
        for model_type, name, front_end in todo:
            base = {"architecture": name, "model_type": model_type, "front_end": front_end}
            line = next(lines)
            if line is None:
                worker.kill()
                yield {**base, "status": "timeout", "reason": f"no result in {timeout} s"}
                return
            if line == "":  # the worker died on this job
                worker.wait()
                errors.seek(0)
                yield {**base, "status": "crashed",
                       "reason": _crash(errors.read(), worker.returncode)}
                return
            yield json.loads(line)
        worker.wait()


def _crash(stderr: str, status: int) -> str:
    """A dead worker's last error line and exit status (a signal's name when one killed
    it)."""
    import signal

    errors = [line for line in stderr.splitlines()
              if any(word in line for word in ("Error", "error", "fault", "Abort", "Killed"))]
    how = f"killed by {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
    return (f"{errors[-1].strip()} ({how})" if errors else how)[:400]


def _lines(fd: int, timeout: int) -> Any:
    """The JSON lines read from ``fd``; None when none comes within ``timeout``, '' at the
    end."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    buffer = b""
    while True:
        while b"\n" not in buffer:
            if not selector.select(timeout):
                yield None
                return
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                yield ""
                return
            buffer += chunk
        line, _, buffer = buffer.partition(b"\n")
        if line.startswith(b"{"):
            yield line.decode()


def read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a table, one row per architecture, a column per front end."""
    by_name: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_name.setdefault(row["architecture"], {})[row["front_end"]] = row
    counts = {fe: sum(1 for r in rows if r["front_end"] == fe and r["status"] == "ok")
              for fe in FRONT_ENDS}
    tried = {fe: sum(1 for r in rows if r["front_end"] == fe) for fe in FRONT_ENDS}
    total = len(architectures())
    lines = [(f"Generates transformers' ids: {counts['trace']} of {tried['trace']} "
              f"architectures traced, {counts['dynamo']} of {tried['dynamo']} through "
              f"torch.export ({len(by_name)} of the {total} causal-LM classes run)."), "",
             "| architecture | trace | torch.export | why not |", "|---|---|---|---|"]
    for name in sorted(by_name):
        cells = [by_name[name].get(fe, {}).get("status", "not run") for fe in FRONT_ENDS]
        reasons = dict.fromkeys(r.get("reason", "").split("; transformers generated")[0]
                                for r in by_name[name].values()
                                if r.get("status") != "ok" and r.get("reason"))
        why = "; ".join(reasons).replace("|", "\\|")[:300]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {why} |")
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, rows: list[dict[str, Any]]) -> None:
    """Replace the table between :data:`BEGIN` and :data:`END` in ``path``."""
    text = path.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    path.write_text(text[:start] + "\n" + markdown(rows) + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/causal_lm_sweep.jsonl"))
    parser.add_argument("--only", type=lambda s: s.split(","), help="model types or classes")
    parser.add_argument("--front-ends", type=lambda s: s.split(","), default=list(FRONT_ENDS))
    parser.add_argument("--timeout", type=int, default=TIMEOUT)
    parser.add_argument("--markdown", type=Path, help="rewrite the table in this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        warnings.simplefilter("ignore")
        for job in json.loads(args.worker):
            print(json.dumps(run_one(*job)), flush=True)
        return 0
    if args.markdown:
        write_markdown(args.markdown, read(args.out))
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sweep(args.out, args.only, args.front_ends, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
