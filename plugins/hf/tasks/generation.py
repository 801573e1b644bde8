"""``--verify`` for the generation tasks: greedy generation in ONNX Runtime, feeding the
presents back as the next step's past, compared with transformers' ``generate`` token by
token, and the logits of each step; the first step that differs is named."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: The new tokens generated, the prompt's batch and length.
NEW_TOKENS, BATCH, PROMPT = 12, 2, 5
#: How far a step's logits may be from eager's.
RTOL, ATOL = 1e-3, 1e-3

_NUMPY_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32,
                "tensor(float)": np.float32, "tensor(float16)": np.float16,
                "tensor(double)": np.float64}


def prompt(vocab: int, batch: int = BATCH, length: int = PROMPT, seed: int = 0) -> np.ndarray:
    """Random prompt ids (no token below 3, where special tokens usually are)."""
    return np.random.default_rng(seed).integers(min(3, vocab - 1), vocab, (batch, length))


def reference(model: Any, ids: np.ndarray, new_tokens: int = NEW_TOKENS
              ) -> tuple[np.ndarray, list[np.ndarray]]:
    """transformers' greedy ``generate``: the new ids ``[batch, new_tokens]`` and each step's
    logits ``[batch, vocab]`` (no end-of-sequence token stops it, no logits processor)."""
    import torch
    import transformers

    config = transformers.GenerationConfig(
        do_sample=False, num_beams=1, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
        eos_token_id=None, pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    saved = getattr(model, "generation_config", None)
    # generate() fills what the config leaves unset from the model's own (a forced end token,
    # a repetition penalty...): plain greedy search needs the defaults there.
    model.generation_config = transformers.GenerationConfig()
    try:
        with torch.no_grad():
            out = model.generate(torch.from_numpy(ids), generation_config=config,
                                 attention_mask=torch.ones(ids.shape, dtype=torch.long))
    finally:
        model.generation_config = saved
    new = out.sequences[:, ids.shape[1]:].numpy()
    return new, [step.float().numpy() for step in out.logits]


def onnx_greedy(path: Path, ids: np.ndarray, new_tokens: int = NEW_TOKENS
                ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Greedy generation with the decoder at ``path``: with past inputs, the prompt is the
    first step (a past of length 0: the input's static sizes, the batch, 0 past positions)
    and each new token the next, the presents fed back; without, the whole sequence runs
    each step."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    past_names = [n for n in inputs if n.startswith("past_key_values.")]
    batch = ids.shape[0]
    past = {name: np.zeros(_empty_past(inputs[name].shape, batch),
                           _NUMPY_TYPES[inputs[name].type]) for name in past_names}
    sequence, step_ids, produced, logits = ids, ids, [], []
    for _ in range(new_tokens):
        fed = sequence.shape[1] - (step_ids.shape[1] if past_names else sequence.shape[1])
        feeds = {"input_ids": step_ids if past_names else sequence,
                 "attention_mask": np.ones(sequence.shape, np.int64)}
        if "position_ids" in inputs:
            feeds["position_ids"] = np.broadcast_to(
                np.arange(fed, sequence.shape[1]), (batch, sequence.shape[1] - fed))
        feeds = {k: v.astype(_NUMPY_TYPES[inputs[k].type]) for k, v in feeds.items()
                 if k in inputs}  # a model that ignores its mask has none
        results = dict(zip(outputs, session.run(None, {**feeds, **past})))
        last = results["logits"][:, -1, :].astype(np.float32)
        token = last.argmax(-1)[:, None]
        logits.append(last)
        produced.append(token)
        sequence = np.concatenate([sequence, token], axis=1)
        step_ids = token
        past = {name: results[name.replace("past_key_values.", "present.")]
                for name in past_names}
    return np.concatenate(produced, axis=1), logits


def _empty_past(shape: Sequence[Any], batch: int) -> tuple[int, ...]:
    """``[batch, heads, past, size]`` with the batch given and no past position."""
    return (batch, shape[1], 0, *shape[3:])


def compare(expected: tuple[np.ndarray, Sequence[np.ndarray]],
            actual: tuple[np.ndarray, Sequence[np.ndarray]]) -> dict[str, Any]:
    """The verdict: ``ok``, ``first_differing_step`` (None when all agree), the largest
    logit difference, the ids, and a one-line ``report``."""
    want_ids, want_logits = expected
    got_ids, got_logits = actual
    steps = want_ids.shape[1]
    id_step = next((s for s in range(steps) if not np.array_equal(want_ids[:, s],
                                                                  got_ids[:, s])), None)
    errors = [float(np.abs(w - g).max()) for w, g in zip(want_logits, got_logits)]
    logit_step = next((s for s, (w, g) in enumerate(zip(want_logits, got_logits))
                       if not np.allclose(g, w, rtol=RTOL, atol=ATOL)), None)
    differing = min((s for s in (id_step, logit_step) if s is not None), default=None)
    if differing is None:
        report = (f"ONNX Runtime generated transformers' {steps} tokens x {want_ids.shape[0]} "
                  f"sequences; largest logit difference {max(errors):.2e}")
    else:
        what = _ids_differ(want_ids, got_ids, want_logits, differing, errors) \
            if differing == id_step and logit_step != differing else \
            f"the logits (max abs difference {errors[differing]:.2e}, rtol {RTOL}, atol {ATOL})"
        report = (f"step {differing + 1} of {steps} differs first: {what}; transformers "
                  f"generated {want_ids.tolist()}, ONNX Runtime {got_ids.tolist()}")
    return {"ok": differing is None, "first_differing_step": differing,
            "max_logit_difference": max(errors), "expected_ids": want_ids.tolist(),
            "ids": got_ids.tolist(), "report": report}


def _ids_differ(want_ids: np.ndarray, got_ids: np.ndarray, want_logits: Sequence[np.ndarray],
                step: int, errors: list[float]) -> str:
    """Why the ids of ``step`` differ while its logits agree: how close eager's top two
    logits are (a near tie flips on a rounding difference) or, when they are far apart,
    a logits processor of ``generate``."""
    row = int(np.flatnonzero(want_ids[:, step] != got_ids[:, step])[0])
    logits = want_logits[step][row]
    gap = float(logits[want_ids[row, step]] - logits[got_ids[row, step]])
    tie = abs(gap) <= 10 * max(errors[step], 1e-6)
    cause = "a near tie" if tie else "not a tie: generate changed the scores"
    return (f"the token ids, while the step's logits agree (max abs difference "
            f"{errors[step]:.2e}): eager's logit of its token is {gap:.2e} above ONNX "
            f"Runtime's pick ({cause})")
