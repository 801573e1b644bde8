"""Encoder tasks: one ``model.onnx`` from a text or image model, named as optimum names them.

=======================  =====================================  ==============================
task                     inputs                                 outputs
=======================  =====================================  ==============================
feature-extraction       input_ids, attention_mask,             last_hidden_state
                         token_type_ids (where the model takes  [batch_size, sequence_length,
                         it): [batch_size, sequence_length]     hidden]
fill-mask                (same)                                 logits [batch_size,
                                                                sequence_length, vocab]
text-classification      (same)                                 logits [batch_size, labels]
token-classification     (same)                                 logits [batch_size,
                                                                sequence_length, labels]
question-answering       (same)                                 start_logits, end_logits
                                                                [batch_size, sequence_length]
image-classification     pixel_values [batch_size, channels,    logits [batch_size, labels]
                         height, width] (the config's size)
=======================  =====================================  ==============================

A checkpoint folder is loaded with the task's transformers auto class (a ``BertForMaskedLM``
checkpoint exported for ``feature-extraction`` gives its ``BertModel``); a model object is
taken as it is (its base model for ``feature-extraction``). The config and the tokenizer or
preprocessor files are copied beside. ``verify`` runs ONNX Runtime at the example sizes and at
a second batch and sequence length against eager PyTorch.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.plugins.hf.tasks import common
from oxport.tasks import TaskOptions, TaskResult

BATCH, SEQUENCE = "batch_size", "sequence_length"
TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: (batch, sequence) of the example, then of the verification's second size.
SIZES = ((2, 8), (3, 13))
#: ONNX Runtime against eager PyTorch: |onnx - torch| <= ATOL + RTOL * |torch|.
RTOL, ATOL = 1e-3, 1e-4


class EncoderTask(common.HfTask):
    """A task whose file maps the model's inputs to some of its output fields."""

    auto_class: str = "AutoModel"
    #: output field -> its dynamic axes beyond the batch (``{1: SEQUENCE}``)
    outputs: ClassVar[Mapping[str, Mapping[int, str]]] = {}
    image = False

    def export(self, source: Any, output_dir: Path, options: TaskOptions) -> TaskResult:
        if options.extra:
            raise InvalidExportArgumentError(
                f"The task {self.name!r} takes no option {', '.join(sorted(options.extra))}.")
        loaded = self.load(source)
        names = self.input_names(loaded.model)
        module = flat_module(loaded.model, names, list(self.outputs))
        example = self.example(loaded.model, *SIZES[0])
        exported = common.export_onnx(module, tuple(example[n] for n in names),
                                      output_dir / "model.onnx", names, list(self.outputs),
                                      self.dynamic_axes(names), options)
        files = exported.files + common.write_companions(loaded, output_dir)
        kept = exported.inputs  # an input the model ignores is dropped
        result = TaskResult(self.name, output_dir, files, details={
            "architecture": loaded.architecture, "inputs": kept,
            "outputs": list(self.outputs)})
        if options.verify:
            result.verification = verify(self, loaded.model, output_dir / "model.onnx", names)
        return result

    def load(self, source: Any) -> common.Source:
        """The model for this task: a folder through the auto class, an object as given."""
        import transformers

        folder = common.folder_of(source)
        if folder is None:
            if not isinstance(source, transformers.PreTrainedModel):
                raise InvalidExportArgumentError(
                    f"The source is a {type(source).__name__}: give a checkpoint folder "
                    "(written by save_pretrained) or a transformers PreTrainedModel.")
            return common.Source(self.adopt(source).eval(), None)
        common.read_config(folder)
        try:
            model = getattr(transformers, self.auto_class).from_pretrained(folder)
        except ValueError as exc:
            raise InvalidExportArgumentError(
                f"{str(folder)!r} holds no model for {self.name!r} (transformers' "
                f"{self.auto_class} cannot load it): {exc}") from exc
        return common.Source(model.eval(), folder)

    def adopt(self, model: Any) -> Any:
        """A model object given for this task (refused when it has another head)."""
        if not type(model).__name__.endswith(tuple(self.suffixes)):
            raise InvalidExportArgumentError(
                f"The task {self.name!r} takes a *{' or *'.join(self.suffixes)} model, not a "
                f"{type(model).__name__}: pick the task for it (`oxport tasks`) or 'auto'.")
        return model

    def input_names(self, model: Any) -> list[str]:
        if self.image or getattr(model, "main_input_name", None) == "pixel_values":
            return ["pixel_values"]
        parameters = inspect.signature(model.forward).parameters
        return [name for name in TEXT_INPUTS if name in parameters]

    def dynamic_axes(self, names: Sequence[str]) -> dict[str, dict[int, str]]:
        axes = {name: {0: BATCH} if name == "pixel_values" else {0: BATCH, 1: SEQUENCE}
                for name in names}
        for output, more in self.outputs.items():
            axes[output] = {0: BATCH, **more}
        return axes

    def example(self, model: Any, batch: int, sequence: int) -> dict[str, Any]:
        """Inputs of ``batch`` rows (the first padded at its end) of ``sequence`` tokens, or
        ``batch`` images of the config's size."""
        import torch

        generator = torch.Generator().manual_seed(batch * 100 + sequence)
        config = model.config
        if self.input_names(model) == ["pixel_values"]:
            size = config.image_size if isinstance(config.image_size, int) \
                else tuple(config.image_size)
            height, width = (size, size) if isinstance(size, int) else size
            return {"pixel_values": torch.randn(batch, config.num_channels, height, width,
                                                generator=generator)}
        vocab = config.get_text_config().vocab_size
        mask = torch.ones(batch, sequence, dtype=torch.long)
        mask[0, -2:] = 0
        return {"input_ids": torch.randint(0, vocab, (batch, sequence), generator=generator),
                "attention_mask": mask,
                "token_type_ids": torch.zeros(batch, sequence, dtype=torch.long)}


def flat_module(model: Any, inputs: Sequence[str], outputs: Sequence[str]) -> Any:
    """``model`` as a module of positional inputs returning the named output fields."""
    import torch

    class FlatEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args: Any) -> tuple[Any, ...]:
            out = self.model(**dict(zip(inputs, args)), return_dict=True)
            return tuple(out[name] for name in outputs)

    return FlatEncoder().eval()


def verify(task: EncoderTask, model: Any, path: Path, names: Sequence[str]) -> dict[str, Any]:
    """ONNX Runtime against eager PyTorch at the example sizes and a second size."""
    import numpy as np
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    module = flat_module(model, names, list(task.outputs))
    lines, worst, ok = [], 0.0, True
    for batch, sequence in SIZES:
        example = task.example(model, batch, sequence)
        with torch.no_grad():
            expected = [t.numpy() for t in module(*(example[n] for n in names))]
        got = session.run(None, {i.name: example[i.name].numpy() for i in session.get_inputs()})
        for name, g, e in zip(task.outputs, got, expected):
            same = g.shape == e.shape and bool(np.allclose(g, e, rtol=RTOL, atol=ATOL))
            diff = float(np.abs(g - e).max()) if g.shape == e.shape else float("inf")
            worst, ok = max(worst, diff), ok and same
            lines.append(f"{name} at batch {batch}, sequence {sequence}: "
                         f"{'ok' if same else 'DIFFERS'} (max abs diff {diff:.3g})")
    return {"ok": ok, "max_abs_diff": worst, "report": "\n".join(lines)}


class FeatureExtraction(EncoderTask):
    name = "feature-extraction"
    description = "encoder's last hidden state (model.onnx)"
    suffixes: ClassVar[Mapping[str, int]] = {"Model": 5}
    outputs: ClassVar[Mapping[str, Mapping[int, str]]] = {"last_hidden_state": {1: SEQUENCE}}

    def dynamic_axes(self, names: Sequence[str]) -> dict[str, dict[int, str]]:
        axes = super().dynamic_axes(names)
        if names == ["pixel_values"]:  # patches: fixed by the config's image size
            axes["last_hidden_state"] = {0: BATCH}
        return axes

    def adopt(self, model: Any) -> Any:
        return getattr(model, "base_model", model)


class FillMask(EncoderTask):
    name = "fill-mask"
    description = "masked-LM logits per token (model.onnx)"
    auto_class = "AutoModelForMaskedLM"
    suffixes: ClassVar[Mapping[str, int]] = {"ForMaskedLM": 10}
    outputs: ClassVar[Mapping[str, Mapping[int, str]]] = {"logits": {1: SEQUENCE}}


class TextClassification(EncoderTask):
    name = "text-classification"
    description = "sequence classification logits (model.onnx)"
    auto_class = "AutoModelForSequenceClassification"
    suffixes: ClassVar[Mapping[str, int]] = {"ForSequenceClassification": 10}
    outputs: ClassVar[Mapping[str, Mapping[int, str]]] = {"logits": {}}


class TokenClassification(EncoderTask):
    name = "token-classification"
    description = "per-token classification logits (model.onnx)"
    auto_class = "AutoModelForTokenClassification"
    suffixes: ClassVar[Mapping[str, int]] = {"ForTokenClassification": 10}
    outputs: ClassVar[Mapping[str, Mapping[int, str]]] = {"logits": {1: SEQUENCE}}


class QuestionAnswering(EncoderTask):
    name = "question-answering"
    description = "extractive QA start and end logits (model.onnx)"
    auto_class = "AutoModelForQuestionAnswering"
    suffixes: ClassVar[Mapping[str, int]] = {"ForQuestionAnswering": 10}
    outputs: ClassVar[Mapping[str, Mapping[int, str]]] = {"start_logits": {1: SEQUENCE},
                                                           "end_logits": {1: SEQUENCE}}


class ImageClassification(EncoderTask):
    name = "image-classification"
    description = "image classification logits, images of the config's size (model.onnx)"
    auto_class = "AutoModelForImageClassification"
    suffixes: ClassVar[Mapping[str, int]] = {"ForImageClassification": 10}
    outputs: ClassVar[Mapping[str, Mapping[int, str]]] = {"logits": {}}
    image = True


TASKS = (FeatureExtraction, FillMask, TextClassification, TokenClassification,
         QuestionAnswering, ImageClassification)


@oxport.hookimpl
def oxport_register_tasks(registry: Any) -> None:
    """The encoder tasks."""
    for task in TASKS:
        registry.register_task(task())
