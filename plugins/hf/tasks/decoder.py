"""Decoder-only generation tasks: ``text-generation`` (logits of the whole sequence) and
``text-generation-with-past`` (the KV cache in and out), in the layout optimum writes and
ONNX Runtime GenAI reads:

* ``model.onnx`` (+ ``model.onnx.data`` when large), inputs ``input_ids [batch, sequence]``,
  ``attention_mask [batch, past_sequence + sequence]``, ``position_ids [batch, sequence]``
  where the model takes them, and with past ``past_key_values.{i}.key|value [batch,
  kv_heads, past_sequence, head_dim]``; outputs ``logits`` and with past
  ``present.{i}.key|value``. One file serves prefill (a past of length 0) and decode.
* beside it the checkpoint's config, generation config and tokenizer files, and (with past)
  a ``genai_config.json`` with which ``onnxruntime_genai`` runs the model.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.frontends.weightless import run_weightless
from oxport.plugins.hf import quirks as hf_quirks
from oxport.plugins.hf.tasks import common, genai
from oxport.tasks import TaskOptions, TaskResult

BATCH, SEQUENCE, PAST = "batch_size", "sequence_length", "past_sequence_length"
TOTAL = "past_sequence_length + sequence_length"
#: oxport's warning on transformers' test ``padding_mask.shape[-1] > kv_length`` (in
#: ``_ignore_causal_mask_sdpa``, whose later conditions are skipped while tracing).
_MASK_LENGTH_CONDITION = r"oxport: a Python condition at .*masking_utils\.py\(\d+\): " \
    r"_ignore_causal_mask_sdpa"
#: The example's sizes: distinct, and none 0 or 1 (torch.export specializes those).
EXAMPLE_BATCH, EXAMPLE_SEQUENCE, EXAMPLE_PAST = 2, 3, 4


class DecoderInputs:
    """What a decoder's ONNX file takes and gives, and example inputs: probed from the model
    with one forward pass (the example's past)."""

    def __init__(self, model: Any, with_past: bool) -> None:
        parameters = inspect.signature(model.forward).parameters
        self.with_past = with_past
        self.position_ids = "position_ids" in parameters
        self.cache_argument = "cache" if "cache" in parameters else "past_key_values"
        self.examples = example_inputs(model, self)
        self.layers, self.kv_heads, self.head_dim = cache_sizes(model, self.examples[-1]) \
            if with_past else (0, 0, 0)

    def input_names(self) -> list[str]:
        names = ["input_ids", "attention_mask"] + (["position_ids"] if self.position_ids else [])
        return names + [f"past_key_values.{i}.{kv}" for i in range(self.layers)
                        for kv in ("key", "value")]

    def output_names(self) -> list[str]:
        return ["logits"] + [f"present.{i}.{kv}" for i in range(self.layers)
                             for kv in ("key", "value")]

    def dynamic_axes(self) -> dict[str, dict[int, str]]:
        axes = {"input_ids": {0: BATCH, 1: SEQUENCE}, "attention_mask": {0: BATCH, 1: TOTAL},
                "position_ids": {0: BATCH, 1: SEQUENCE}, "logits": {0: BATCH, 1: SEQUENCE}}
        for i in range(self.layers):
            for kv in ("key", "value"):
                axes[f"past_key_values.{i}.{kv}"] = {0: BATCH, 2: PAST}
                axes[f"present.{i}.{kv}"] = {0: BATCH, 2: TOTAL}
        return {name: axes[name] for name in self.input_names() + self.output_names()}


def cache_sizes(model: Any, cache: Any) -> tuple[int, int, int]:
    """(layers, kv heads, head size) of the cache ``model`` returned; a cache that is not
    one key and value tensor per layer is refused, naming what it holds."""
    layers = getattr(cache, "layers", None)
    kinds = sorted({type(layer).__name__ for layer in layers or ()})
    if not layers or any(getattr(layer, "keys", None) is None for layer in layers):
        raise InvalidExportArgumentError(
            f"{type(model).__name__} returns a {type(cache).__name__} ({', '.join(kinds) or 'no'} "
            "layers), not one key and value tensor per layer: it has no past in the "
            "text-generation-with-past layout. Export it with task='text-generation'.")
    _, heads, _, head_dim = layers[0].keys.shape
    return len(layers), heads, head_dim


def example_inputs(model: Any, io: DecoderInputs) -> tuple[Any, ...]:
    """Example ONNX inputs: a batch whose second row is left-padded, a past from the model."""
    import torch

    vocab = model.config.get_text_config().vocab_size
    generator = torch.Generator().manual_seed(0)
    past = EXAMPLE_PAST if io.with_past else 0
    total = past + EXAMPLE_SEQUENCE
    ids = torch.randint(0, vocab, (EXAMPLE_BATCH, total), generator=generator)
    mask = torch.ones(EXAMPLE_BATCH, total, dtype=torch.long)
    mask[1, 0] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    # Copies, not views of the longer tensors: torch.export guards on a view's base.
    inputs: list[Any] = [ids[:, past:].clone(), mask]
    if io.position_ids:
        inputs.append(positions[:, past:].clone())
    if io.with_past:
        kwargs = {"position_ids": positions[:, :past]} if io.position_ids else {}

        def prefill() -> Any:
            return model(input_ids=ids[:, :past], attention_mask=mask[:, :past], use_cache=True,
                         **kwargs)

        with torch.no_grad():
            if _weightless(model):  # streamed weights: a past of the model's shapes, zeros
                inputs.append(_past_of_shapes(model, prefill))
            else:
                out = prefill()
                inputs.append(getattr(out, "cache", None) or getattr(out, "past_key_values", None))
    return tuple(inputs)


def decoder_module(model: Any, io: DecoderInputs) -> Any:
    """``model`` as a module taking the ONNX inputs in order (the past as a DynamicCache,
    which the hf plugin's I/O type flattens into one input per key and value) and returning
    the logits, then the grown cache."""
    import torch

    def run(model: Any, input_ids: Any, attention_mask: Any, position_ids: Any,
            past: Any) -> Any:
        kwargs = {"attention_mask": attention_mask, "use_cache": io.with_past}
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if past is not None:
            kwargs[io.cache_argument] = past
        out = model(input_ids=input_ids, **kwargs)
        if not io.with_past:
            return out.logits
        return out.logits, getattr(out, "cache", None) or out.past_key_values

    class WithPositions(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
            return run(self.model, input_ids, attention_mask, position_ids, past_key_values)

    class WithoutPositions(WithPositions):
        def forward(self, input_ids, attention_mask, past_key_values=None):
            return run(self.model, input_ids, attention_mask, None, past_key_values)

    return (WithPositions if io.position_ids else WithoutPositions)().eval()


class TextGeneration(common.HfTask):
    """Logits for a whole sequence, no cache."""

    name = "text-generation"
    description = "decoder-only LM: logits of the whole sequence (model.onnx)"
    suffixes: ClassVar[Mapping[str, int]] = {"ForCausalLM": 10, "LMHeadModel": 10}
    with_past = False

    def export(self, source: Any, output_dir: Path, options: TaskOptions) -> TaskResult:
        refuse_unknown_options(self.name, options, ())
        loaded = common.load(source, "AutoModelForCausalLM", tuple(self.suffixes),
                             also=causal_lm_classes(), stream=options.stream_weights)
        io = hf_quirks.apply(loaded.quirks, "decoder_inputs",
                             DecoderInputs(loaded.model, self.with_past))
        with warnings.catch_warnings():
            # transformers compares the mask's length with the keys' before it checks for
            # tracing; the file's contract makes them equal at every size.
            warnings.filterwarnings("ignore", _MASK_LENGTH_CONDITION, UserWarning)
            exported = common.export_onnx(
                decoder_module(loaded.model, io), io.examples,
                output_dir / "model.onnx", io.input_names(), io.output_names(),
                io.dynamic_axes(), options, weights=loaded.weights)
        files = exported.files + common.write_companions(loaded, output_dir)
        if self.with_past:
            config = genai.decoder_config(loaded.model, loaded.architecture, io)
            files.append(genai.write(hf_quirks.apply(loaded.quirks, "genai_config", config),
                                     output_dir, exported.op_types))
        if options.verify and loaded.weights is not None:  # the reference needs weights
            loaded = common.load(source, "AutoModelForCausalLM", tuple(self.suffixes),
                                 also=causal_lm_classes())
        verdict = verify(loaded.model, output_dir / "model.onnx") if options.verify \
            else None
        return TaskResult(self.name, output_dir, files, verdict, details={
            "architecture": loaded.architecture, "inputs": io.input_names(),
            "outputs": io.output_names()})


def _weightless(model: Any) -> bool:
    """Whether ``model``'s parameters are on the meta device (its weights streamed)."""
    return any(p.is_meta for p in model.parameters())


def _past_of_shapes(model: Any, prefill: Any) -> Any:
    """A DynamicCache of zeros shaped as the one ``prefill()`` makes, run on fake tensors
    (``model`` has no weights)."""
    from transformers.cache_utils import DynamicCache

    def keys_and_values() -> list[tuple[Any, Any]]:
        out = prefill()
        cache = getattr(out, "cache", None) or out.past_key_values
        return [(layer.keys, layer.values) for layer in cache.layers]

    cache = DynamicCache()
    for index, (key, value) in enumerate(run_weightless(model, keys_and_values)):
        cache.update(key, value, index)
    return cache


def verify(model: Any, path: Path) -> dict[str, Any]:
    """Greedy generation in ONNX Runtime against transformers' ``generate``."""
    from oxport.plugins.hf.tasks import generation

    ids = generation.prompt(model.config.get_text_config().vocab_size)
    expected = generation.reference(model, ids)
    actual = generation.onnx_greedy(path, ids)
    return generation.compare(expected, actual)


class TextGenerationWithPast(TextGeneration):
    """Logits and the grown KV cache, from the past one: prefill and decode in one file."""

    name = "text-generation-with-past"
    description = ("decoder-only LM with its KV cache (model.onnx + genai_config.json): "
                   "prefill and decode")
    suffixes: ClassVar[Mapping[str, int]] = {"ForCausalLM": 20, "LMHeadModel": 20}
    with_past = True


def causal_lm_classes() -> frozenset[str]:
    """The class names transformers' causal-LM auto class maps to (``BertLMHeadModel``,
    ``BertGenerationDecoder``...)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return frozenset(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())


def refuse_unknown_options(task: str, options: TaskOptions, known: tuple[str, ...]) -> None:
    """A task option the task does not take is an error naming those it takes."""
    unknown = sorted(set(options.extra) - set(known))
    if unknown:
        raise InvalidExportArgumentError(
            f"The task {task!r} takes no option {', '.join(unknown)}"
            f"{': it takes ' + ', '.join(known) if known else ''}.")


@oxport.hookimpl
def oxport_register_tasks(registry: Any) -> None:
    """The decoder-only generation tasks."""
    registry.register_task(TextGeneration())
    registry.register_task(TextGenerationWithPast())
