"""What the transformers tasks share: the architecture a source names (cheaply, for
``task="auto"``), loading the model of a checkpoint folder, writing the ONNX files, and
copying the files that go beside them (config, generation config, tokenizer)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from oxport.errors import InvalidExportArgumentError
from oxport.plugins.hf import quirks as hf_quirks
from oxport.tasks import TaskOptions

#: The files of a checkpoint folder a runtime reads beside the model (tokenizers,
#: processors, chat templates); copied when present.
COMPANION_FILES = (
    "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
    "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "chat_template.jinja",
    "chat_template.json", "preprocessor_config.json", "processor_config.json",
)


def folder_of(source: Any) -> Path | None:
    """The checkpoint folder ``source`` names, or None when it is a model object."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source)
    return None


def read_config(folder: Path) -> dict[str, Any]:
    """The folder's ``config.json``; a folder without one is refused with what to give."""
    path = folder / "config.json"
    if not folder.is_dir():
        raise InvalidExportArgumentError(
            f"{str(folder)!r} is not a folder: give the folder a transformers model was saved "
            "to with save_pretrained (config.json and the weights).")
    if not path.is_file():
        raise InvalidExportArgumentError(
            f"{str(folder)!r} has no config.json: give the folder a transformers model was "
            "saved to with save_pretrained.")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def architecture_of(source: Any) -> str | None:
    """The model class a source holds (``"LlamaForCausalLM"``): its config's first
    ``architectures`` entry for a folder, its class name for a transformers model; None when
    it is neither (no config.json, another kind of object)."""
    folder = folder_of(source)
    if folder is None:
        return type(source).__name__ if hasattr(source, "config") else None
    try:
        architectures = read_config(folder).get("architectures") or [None]
    except (InvalidExportArgumentError, ValueError):
        return None
    return architectures[0]


class HfTask:
    """A transformers task: its ``name``, ``description`` and, for ``task="auto"``, the
    architecture class-name suffixes it fits with their scores (``{"ForCausalLM": 20}``)."""

    name: str = ""
    description: str = ""
    suffixes: ClassVar[Mapping[str, int]] = {}

    def match(self, source: Any) -> int:
        architecture = architecture_of(source)
        if not architecture:
            return 0
        return max((score for suffix, score in self.suffixes.items()
                    if architecture.endswith(suffix)), default=0)

    def export(self, source: Any, output_dir: Path, options: TaskOptions) -> Any:
        raise NotImplementedError


class Source:
    """A loaded source: the model in eval mode, its checkpoint folder (None for a model
    object), its architecture and the quirks that apply to it."""

    def __init__(self, model: Any, folder: Path | None, streamed: bool = False) -> None:
        self.model = model
        self.folder = folder
        #: Where the weights of a model built on the meta device are (``weights=``).
        self.weights = str(folder) if streamed else None
        self.architecture = type(model).__name__
        self.quirks = hf_quirks.for_architecture(self.architecture)
        self.model = hf_quirks.apply(self.quirks, "prepare_model", model)

    @property
    def config(self) -> Any:
        return self.model.config


def load(source: Any, auto_class: str, accepted: Sequence[str] = (),
         also: Collection[str] = (), stream: bool = False) -> Source:
    """The model of ``source``: a folder is loaded with the class its config names (or
    transformers' ``auto_class`` when it names none); a model object is taken as it is.
    ``accepted``: the class-name suffixes the task takes, ``also`` other class names it
    takes; anything else is refused. ``stream``: a folder's model is built on the meta
    device, in the dtype ``from_pretrained`` gives it, its weights left in the checkpoint
    (``Source.weights``)."""
    import transformers

    folder = folder_of(source)
    if folder is None:
        if not isinstance(source, transformers.PreTrainedModel):
            raise InvalidExportArgumentError(
                f"The source is a {type(source).__name__}: give a checkpoint folder (written by "
                "save_pretrained) or a transformers PreTrainedModel.")
        model = source
    else:
        architecture = read_config(folder).get("architectures") or [None]
        cls = getattr(transformers, architecture[0] or "", None) or getattr(transformers,
                                                                            auto_class)
        model = _on_meta(cls, folder) if stream else cls.from_pretrained(folder)
    name = type(model).__name__
    if accepted and not name.endswith(tuple(accepted)) and name not in also:
        raise InvalidExportArgumentError(
            f"This task takes a *{' or *'.join(accepted)} model, not a {name}: pick the task "
            "for it (`oxport tasks` lists them) or task='auto'.")
    return Source(model.eval(), folder, streamed=stream and folder is not None)


def _on_meta(cls: Any, folder: Path) -> Any:
    """``cls``'s model for the checkpoint ``folder`` with its parameters on the meta device."""
    import transformers

    import oxport

    config = transformers.AutoConfig.from_pretrained(folder)
    with oxport.empty_weights():
        return cls._from_config(config, dtype=getattr(config, "dtype", None))


def write_companions(source: Source, output_dir: Path) -> list[str]:
    """Copy the checkpoint's config, generation config and tokenizer files into
    ``output_dir`` (for a model object, its config and generation config are saved); returns
    the names written."""
    written = []
    if source.folder is None:
        source.config.to_json_file(output_dir / "config.json")
        written.append("config.json")
        generation = getattr(source.model, "generation_config", None)
        if generation is not None:
            generation.to_json_file(output_dir / "generation_config.json")
            written.append("generation_config.json")
        return written
    for name in ("config.json", *COMPANION_FILES):
        path = source.folder / name
        if path.is_file():
            if path.resolve() != (output_dir / name).resolve():
                shutil.copyfile(path, output_dir / name)
            written.append(name)
    return written


@dataclasses.dataclass
class Exported:
    """What :func:`export_onnx` wrote: the files, and the graph's inputs and op types (read
    from the export, not from the file: a file under 2 GB holds its weights)."""

    files: list[str]
    inputs: list[str]
    op_types: frozenset[tuple[str, str]]  # (domain, op type)


def export_onnx(model: Any, args: tuple[Any, ...], path: Path, input_names: list[str],
                output_names: list[str], dynamic_axes: dict[str, dict[int, str]],
                options: TaskOptions, weights: str | None = None) -> Exported:
    """Export ``model(*args)`` to ``path`` with these names and dynamic axes (``weights``:
    where a meta-device model's weights are); returns the files written (the model, and its
    external data when it has any) with the graph's inputs and op types."""
    import oxport

    result = oxport.export(model, args, str(path), input_names=input_names,
                           output_names=output_names, dynamic_axes=dynamic_axes,
                           weights=weights, **options.export_kwargs())
    files = [path.name]
    data = path.with_name(path.name + ".data")
    if data.is_file():
        files.append(data.name)
    graph = result.serialized.model.graph  # weightless
    return Exported(files, [value.name for value in graph.input],
                    frozenset((node.domain, node.op_type) for node in graph.node))
