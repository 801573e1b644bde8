"""Encoder-decoder generation tasks: ``text2text-generation(-with-past)`` (T5, BART and their
kin) and ``automatic-speech-recognition(-with-past)`` (Whisper), in optimum's layout of
separate encoder and decoder files (the one before its merged decoder; ONNX Runtime and
transformers.js read it):

* ``encoder_model.onnx``: ``input_ids``, ``attention_mask`` ``[batch_size,
  encoder_sequence_length]`` (Whisper: ``input_features [batch_size, feature_size,
  frames]``, the frames its config fixes) -> ``last_hidden_state``.
* ``decoder_model.onnx`` (the first step): ``encoder_attention_mask`` (text models),
  ``input_ids [batch_size, decoder_sequence_length]``, ``encoder_hidden_states`` ->
  ``logits``, and with past ``present.{i}.decoder.key|value`` (self-attention) and
  ``present.{i}.encoder.key|value`` (cross-attention) ``[batch_size, heads, length,
  head_dim]``.
* ``decoder_with_past_model.onnx`` (with past; the next steps): ``encoder_attention_mask``
  (text models), ``input_ids``, ``past_key_values.{i}.decoder.key|value`` and
  ``past_key_values.{i}.encoder.key|value`` -> ``logits``, ``present.{i}.decoder.key|value``
  (the cross-attention past is reused as it is).
* beside them the config, generation config and tokenizer or feature extractor files.

``verify`` generates greedily in ONNX Runtime (the presents fed back) and compares the ids
with transformers' ``generate`` as plain greedy search (no forced or banned tokens) and the
logits at each step: :func:`compare_generation`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.plugins.hf import io_types
from oxport.plugins.hf.tasks import common
from oxport.tasks import TaskOptions, TaskResult

BATCH = "batch_size"
ENCODER, DECODER = "encoder_sequence_length", "decoder_sequence_length"
PAST = "past_decoder_sequence_length"
TOTAL = f"{PAST} + {DECODER}"
ENCODER_OUT = "encoder_sequence_length_out"
#: Example sizes (none 0 or 1: torch.export specializes those).
EXAMPLE_BATCH, EXAMPLE_ENCODER, EXAMPLE_DECODER, EXAMPLE_PAST = 2, 7, 2, 3
NEW_TOKENS = 12
#: transformers' ``generate`` as plain greedy search, the files' own loop: no early stop, and
#: none of the logits processors a config may ask for (a forced last EOS, n-gram bans).
PLAIN_GREEDY = {"do_sample": False, "num_beams": 1, "eos_token_id": None, "min_new_tokens": 0,
                "forced_eos_token_id": None, "forced_bos_token_id": None,
                "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
                "repetition_penalty": 1.0, "bad_words_ids": None}
RTOL, ATOL = 1e-3, 1e-4


class Seq2SeqModel:
    """What the files of one encoder-decoder model take and give."""

    def __init__(self, model: Any, with_past: bool) -> None:
        self.model = model
        self.with_past = with_past
        self.speech = getattr(model, "main_input_name", "") == "input_features"
        self.cache_argument = "cache" if "cache" in inspect.signature(
            model.forward).parameters else "past_key_values"
        config = model.config
        self.layers = config.decoder_layers if hasattr(config, "decoder_layers") \
            else config.num_decoder_layers if hasattr(config, "num_decoder_layers") \
            else config.num_layers
        self.hidden = config.d_model

    # -- names ------------------------------------------------------------------------
    def encoder_inputs(self) -> list[str]:
        return ["input_features"] if self.speech else ["input_ids", "attention_mask"]

    def decoder_inputs(self, past: bool) -> list[str]:
        names = [] if self.speech else ["encoder_attention_mask"]
        names.append("input_ids")
        if not past:
            return [*names, "encoder_hidden_states"]
        return names + [f"past_key_values.{i}.{part}.{kv}" for i in range(self.layers)
                        for part in ("decoder", "encoder") for kv in ("key", "value")]

    def decoder_outputs(self, past: bool) -> list[str]:
        if not self.with_past:
            return ["logits"]
        parts = ("decoder",) if past else ("decoder", "encoder")
        return ["logits"] + [f"present.{i}.{part}.{kv}" for i in range(self.layers)
                             for part in parts for kv in ("key", "value")]

    def axes(self) -> dict[str, dict[int, str]]:
        encoder = {0: BATCH} if self.speech else {0: BATCH, 1: ENCODER}
        axes = {"input_features": {0: BATCH}, "input_ids": encoder, "attention_mask": encoder,
                "encoder_attention_mask": encoder, "last_hidden_state": encoder,
                "encoder_hidden_states": encoder, "logits": {0: BATCH, 1: DECODER}}
        encoder_out = ENCODER_OUT if not self.speech else None
        for i in range(self.layers):
            for kv in ("key", "value"):
                axes[f"past_key_values.{i}.decoder.{kv}"] = {0: BATCH, 2: PAST}
                axes[f"past_key_values.{i}.encoder.{kv}"] = \
                    {0: BATCH, 2: encoder_out} if encoder_out else {0: BATCH}
                axes[f"present.{i}.encoder.{kv}"] = {0: BATCH, 2: ENCODER} \
                    if encoder_out else {0: BATCH}
        return axes

    def axes_of(self, names: Sequence[str], past: bool) -> dict[str, dict[int, str]]:
        axes = self.axes()
        for i in range(self.layers):
            for kv in ("key", "value"):
                axes[f"present.{i}.decoder.{kv}"] = {0: BATCH, 2: TOTAL if past else DECODER}
        axes["input_ids"] = {0: BATCH, 1: DECODER}
        return {name: axes[name] for name in names}

    # -- modules ----------------------------------------------------------------------
    def encoder_module(self) -> Any:
        import torch

        encoder, names = self.model.get_encoder(), self.encoder_inputs()

        class Encoder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.encoder = encoder

            def forward(self, *args: Any) -> Any:
                return self.encoder(**dict(zip(names, args)), return_dict=True).last_hidden_state

        return Encoder().eval()

    def decoder_module(self, past: bool) -> Any:
        import torch

        plan, names = self, self.decoder_inputs(past)

        class Decoder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = plan.model

            def forward(self, *args: Any) -> tuple[Any, ...]:
                return plan.run_decoder(self.model, dict(zip(names, args)), past)

        return Decoder().eval()

    def run_decoder(self, model: Any, inputs: dict[str, Any], past: bool) -> tuple[Any, ...]:
        """One decoder call on the files' inputs; returns the files' outputs."""
        import torch

        kwargs: dict[str, Any] = {"decoder_input_ids": inputs["input_ids"],
                                  "use_cache": self.with_past, "return_dict": True}
        if not self.speech:
            kwargs["attention_mask"] = inputs["encoder_attention_mask"]
        if past:
            flat = [inputs[name] for name in self.decoder_inputs(True) if
                    name.startswith("past_key_values.")]
            kwargs[self.cache_argument] = io_types.unflatten_encoder_decoder_cache(
                flat, self.layers)
            key = flat[2]  # the cross-attention keys: their length is the encoder's
            # The cross-attention reads the past, not the states: a placeholder of their shape.
            hidden = torch.zeros(key.shape[0], key.shape[2], self.hidden, dtype=key.dtype)
        else:
            hidden = inputs["encoder_hidden_states"]
        out = model(encoder_outputs=(hidden,), **kwargs)
        if not self.with_past:
            return (out.logits,)
        cache = getattr(out, "cache", None) or out.past_key_values
        children, _ = io_types.flatten_encoder_decoder_cache(cache)
        presents = [tensor for name, tensor in children
                    if not past or ".decoder." in name]
        return (out.logits, *presents)

    # -- examples ---------------------------------------------------------------------
    def encoder_example(self, batch: int = EXAMPLE_BATCH) -> dict[str, Any]:
        """Encoder inputs: text with the first row padded at its end, or random features."""
        import torch

        config = self.model.config
        generator = torch.Generator().manual_seed(batch)
        if self.speech:
            frames = 2 * config.max_source_positions
            return {"input_features": torch.randn(batch, config.num_mel_bins, frames,
                                                  generator=generator)}
        mask = torch.ones(batch, EXAMPLE_ENCODER, dtype=torch.long)
        mask[0, -2:] = 0
        ids = torch.randint(0, config.vocab_size, (batch, EXAMPLE_ENCODER), generator=generator)
        return {"input_ids": ids, "attention_mask": mask}

    def decoder_example(self, past: bool) -> dict[str, Any]:
        import torch

        encoder_inputs = self.encoder_example()
        with torch.no_grad():
            hidden = self.encoder_module()(*encoder_inputs.values())
        vocab = self.model.config.vocab_size
        generator = torch.Generator().manual_seed(1)
        ids = torch.randint(0, vocab, (EXAMPLE_BATCH, EXAMPLE_PAST + EXAMPLE_DECODER),
                            generator=generator)
        example: dict[str, Any] = {"input_ids": ids[:, -EXAMPLE_DECODER:],
                                   "encoder_hidden_states": hidden}
        if not self.speech:
            example["encoder_attention_mask"] = encoder_inputs["attention_mask"]
        if past:
            first = Seq2SeqModel(self.model, True)
            with torch.no_grad():
                presents = first.run_decoder(self.model, {**example,
                                                          "input_ids": ids[:, :EXAMPLE_PAST]},
                                             False)[1:]
            example.update(zip([n.replace("present.", "past_key_values.")
                                for n in first.decoder_outputs(False)[1:]], presents))
        # Copies, not views: torch.export guards a view input on its base, which its
        # decomposition then cannot read.
        return {name: example[name].clone() for name in self.decoder_inputs(past)}


class Seq2SeqTask(common.HfTask):
    """An encoder-decoder task: the encoder file, the first-step decoder and, with past, the
    decoder of the next steps."""

    auto_class = "AutoModelForSeq2SeqLM"
    with_past = False
    speech = False

    def export(self, source: Any, output_dir: Path, options: TaskOptions) -> TaskResult:
        unknown = sorted(options.extra)
        if unknown:
            raise InvalidExportArgumentError(
                f"The task {self.name!r} takes no option {', '.join(unknown)}.")
        loaded = self.load(source)
        plan = Seq2SeqModel(loaded.model, self.with_past)
        if plan.speech != self.speech:
            raise InvalidExportArgumentError(
                f"{loaded.architecture} takes {plan.encoder_inputs()[0]}: export it with "
                f"task={'automatic-speech-recognition' if plan.speech else 'text2text-generation'}"
                f"{'-with-past' if self.with_past else ''}.")
        files = []
        encoder_names = plan.encoder_inputs()
        encoder_example = plan.encoder_example()
        files += common.export_onnx(
            plan.encoder_module(), tuple(encoder_example.values()),
            output_dir / "encoder_model.onnx", encoder_names, ["last_hidden_state"],
            {n: plan.axes()[n] for n in [*encoder_names, "last_hidden_state"]}, options).files
        for past, filename in ((False, "decoder_model.onnx"),
                               (True, "decoder_with_past_model.onnx"))[:1 + self.with_past]:
            names, outputs = plan.decoder_inputs(past), plan.decoder_outputs(past)
            example = plan.decoder_example(past)
            files += common.export_onnx(plan.decoder_module(past), tuple(example.values()),
                                        output_dir / filename, names, outputs,
                                        plan.axes_of([*names, *outputs], past),
                                        options).files
        files += common.write_companions(loaded, output_dir)
        result = TaskResult(self.name, output_dir, files,
                            details={"architecture": loaded.architecture})
        if options.verify:
            result.verification = compare_generation(loaded.model, output_dir,
                                                     plan.encoder_example()) \
                if self.with_past else compare_first_step(plan, output_dir)
        return result

    def load(self, source: Any) -> common.Source:
        """The model: a folder loaded by the class its config names, an object as given."""
        loaded = common.load(source, self.auto_class, tuple(self.suffixes))
        if not hasattr(loaded.model, "get_encoder"):
            raise InvalidExportArgumentError(
                f"{loaded.architecture} has no encoder: export a decoder-only model with "
                "task='text-generation-with-past'.")
        return loaded


def _sessions(folder: Path) -> dict[str, Any]:
    import onnxruntime as ort

    return {path.stem: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            for path in sorted(folder.glob("*.onnx"))}


def generate(folder: Path, encoder_inputs: Mapping[str, Any], new_tokens: int,
             start_token: int) -> tuple[Any, list[Any]]:
    """Greedy generation with the files of ``folder``: the ids (the start token first) and
    the logits of each step."""
    import numpy as np

    sessions = _sessions(folder)
    feeds = {name: np.asarray(value) for name, value in encoder_inputs.items()}
    hidden = sessions["encoder_model"].run(None, feeds)[0]
    mask = feeds.get("attention_mask")
    ids = np.full((hidden.shape[0], 1), start_token, dtype=np.int64)
    first, later = sessions["decoder_model"], sessions["decoder_with_past_model"]
    extra = {"encoder_attention_mask": mask} if mask is not None else {}
    outputs = first.run(None, {"input_ids": ids, "encoder_hidden_states": hidden, **extra})
    names = [o.name for o in first.get_outputs()]
    past = {name.replace("present.", "past_key_values."): value
            for name, value in zip(names[1:], outputs[1:])}
    step_logits = []
    for _ in range(new_tokens):
        logits = outputs[0][:, -1]
        step_logits.append(logits)
        ids = np.concatenate([ids, logits.argmax(-1)[:, None]], axis=1)
        if len(step_logits) == new_tokens:
            break
        outputs = later.run(None, {"input_ids": ids[:, -1:], **extra, **past})
        names = [o.name for o in later.get_outputs()]
        past.update({name.replace("present.", "past_key_values."): value
                     for name, value in zip(names[1:], outputs[1:])})
    return ids, step_logits


def compare_generation(model: Any, folder: Path, encoder_inputs: Mapping[str, Any],
                       new_tokens: int = NEW_TOKENS) -> dict[str, Any]:
    """Greedy generation in ONNX Runtime against transformers' ``generate``: the ids, and the
    logits at each step; the first step that differs is named."""
    import numpy as np
    import torch

    start = model.generation_config.decoder_start_token_id
    if start is None:
        start = model.config.decoder_start_token_id
    with torch.no_grad():
        expected = model.generate(**encoder_inputs, **PLAIN_GREEDY, max_new_tokens=new_tokens,
                                  output_logits=True, return_dict_in_generate=True)
    ids, logits = generate(folder, {k: v.numpy() for k, v in encoder_inputs.items()},
                           new_tokens, start)
    want = expected.sequences.numpy()[:, -new_tokens:]
    got = ids[:, -new_tokens:]
    for step in range(new_tokens):
        same_ids = np.array_equal(got[:, step], want[:, step])
        same_logits = np.allclose(logits[step], expected.logits[step].numpy(),
                                  rtol=RTOL, atol=ATOL)
        if not (same_ids and same_logits):
            what = "ids" if not same_ids else "logits"
            return {"ok": False, "first_differing_step": step, "ids": got.tolist(),
                    "expected_ids": want.tolist(),
                    "report": f"step {step} differs ({what}): ONNX Runtime "
                              f"{got[:, step].tolist()}, transformers {want[:, step].tolist()}"}
    return {"ok": True, "ids": got.tolist(),
            "report": f"{new_tokens} tokens generated greedily as transformers does"}


def compare_first_step(plan: Seq2SeqModel, folder: Path) -> dict[str, Any]:
    """The decoder's logits against eager PyTorch at the example."""
    import numpy as np
    import torch

    session = _sessions(folder)["decoder_model"]
    example = plan.decoder_example(False)
    with torch.no_grad():
        expected = plan.run_decoder(plan.model, example, False)[0].numpy()
    got = session.run(None, {k: v.numpy() for k, v in example.items()})[0]
    ok = got.shape == expected.shape and bool(np.allclose(got, expected, rtol=RTOL, atol=ATOL))
    return {"ok": ok, "report": f"decoder logits {'match' if ok else 'DIFFER from'} eager"}


class Text2TextGeneration(Seq2SeqTask):
    name = "text2text-generation"
    description = "encoder-decoder LM (encoder_model.onnx, decoder_model.onnx)"
    suffixes: ClassVar[Mapping[str, int]] = {"ForConditionalGeneration": 10, "MTModel": 10}


class Text2TextGenerationWithPast(Text2TextGeneration):
    name = "text2text-generation-with-past"
    description = ("encoder-decoder LM with its KV cache (encoder_model.onnx, "
                   "decoder_model.onnx, decoder_with_past_model.onnx)")
    suffixes: ClassVar[Mapping[str, int]] = {"ForConditionalGeneration": 20, "MTModel": 20}
    with_past = True


class SpeechRecognition(Seq2SeqTask):
    name = "automatic-speech-recognition"
    description = "Whisper-style speech-to-text (encoder_model.onnx, decoder_model.onnx)"
    auto_class = "AutoModelForSpeechSeq2Seq"
    speech = True
    suffixes: ClassVar[Mapping[str, int]] = {}

    def match(self, source: Any) -> int:
        architecture = common.architecture_of(source) or ""
        return (15 + 10 * self.with_past) if architecture.startswith("Whisper") \
            and architecture.endswith("ForConditionalGeneration") else 0


class SpeechRecognitionWithPast(SpeechRecognition):
    name = "automatic-speech-recognition-with-past"
    description = ("Whisper-style speech-to-text with its KV cache (encoder_model.onnx, "
                   "decoder_model.onnx, decoder_with_past_model.onnx)")
    with_past = True


TASKS = (Text2TextGeneration, Text2TextGenerationWithPast, SpeechRecognition,
         SpeechRecognitionWithPast)


@oxport.hookimpl
def oxport_register_tasks(registry: Any) -> None:
    """The encoder-decoder tasks."""
    for task in TASKS:
        registry.register_task(task())
