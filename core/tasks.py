"""Tasks: export a model source into a folder of ONNX files laid out for a use.

A task (``text-generation-with-past``, ``fill-mask``, ...) knows which model a source holds,
which inputs and outputs its ONNX files have, and what goes beside them. Plugins register
tasks in their ``oxport_register_tasks`` hook (``registry.register_task(task)``); core knows
no model library: a source is whatever the task accepts (a checkpoint folder path, or a model
object), handed over as it is.

:func:`export_task` (``oxport.export_task``) runs one; ``task="auto"`` asks every registered
task how well it fits the source (:meth:`Task.match`) and runs the best fit.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from oxport.advice import RegistryError
from oxport.errors import InvalidExportArgumentError, OnnxExporterError

#: The task name that picks the registered task fitting the source best.
AUTO = "auto"
_TASK_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclasses.dataclass(frozen=True)
class TaskOptions:
    """How a task exports: the choices common to every task, and the task's own extras."""

    #: Capture with torch.export (True) or trace (False).
    dynamo: bool = False
    #: The ai.onnx opset (None: oxport's default).
    opset: int | None = None
    #: Check the written files with ONNX Runtime against the source model (the task says how).
    verify: bool = False
    #: Which plugins the exports load (as ``oxport.export``'s arguments).
    plugins: Sequence[str] | None = None
    disable_plugins: Sequence[str] | None = None
    #: Options only some tasks understand (a task refuses one it does not know).
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Build the model of a checkpoint folder on the meta device and stream its weights
    #: from the checkpoint into the file (``oxport.export(..., weights=)``; with dynamo:
    #: :func:`export_task` sets it for a folder of safetensors unless told not to).
    stream_weights: bool = False
    #: The runtime profile, precision and weight quantization (as ``oxport.export``'s
    #: ``target``, ``dtype``, ``quantize`` and ``quantize_block_size``; docs/targets.md).
    target: str | None = None
    dtype: str | None = None
    quantize: str | None = None
    quantize_block_size: int = 32

    def export_kwargs(self) -> dict[str, Any]:
        """The ``oxport.export`` keywords these options fix."""
        return {"dynamo": self.dynamo, "opset_version": self.opset, "plugins": self.plugins,
                "disable_plugins": self.disable_plugins, "target": self.target,
                "dtype": self.dtype, "quantize": self.quantize,
                "quantize_block_size": self.quantize_block_size}


@dataclasses.dataclass
class TaskResult:
    """What a task wrote."""

    task: str
    output_dir: Path
    #: Every file written, relative to ``output_dir``.
    files: list[str] = dataclasses.field(default_factory=list)
    #: The verification's verdict when asked (``ok`` and a readable ``report`` at least).
    verification: dict[str, Any] | None = None
    #: Anything else the task reports (the architecture, the input names, timings...).
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the export verified (True when no verification was asked)."""
        return self.verification is None or bool(self.verification.get("ok"))


@runtime_checkable
class Task(Protocol):
    """What a plugin registers with ``registry.register_task``."""

    #: The name users pass as ``task=`` / ``--task`` (lower case words joined by ``-``).
    name: str
    #: One line for ``oxport tasks``.
    description: str

    def match(self, source: Any) -> int:
        """How well this task fits ``source`` for ``task="auto"``: 0 when it does not, higher
        for a better fit (a with-past task over its plain form). Must be cheap: no export."""

    def export(self, source: Any, output_dir: Path, options: TaskOptions) -> TaskResult:
        """Export ``source`` into ``output_dir`` (which exists) and return what was written;
        a source the task cannot take raises :class:`InvalidExportArgumentError` saying why."""


@dataclasses.dataclass(frozen=True)
class RegisteredTask:
    """A task and the plugin that registered it."""

    task: Task
    provenance: Any

    @property
    def name(self) -> str:
        return self.task.name


def validate_task(task: Any, where: object) -> str:
    """Check that ``task`` has what :class:`Task` asks; returns its name."""
    missing = [m for m in ("name", "description", "match", "export") if not hasattr(task, m)]
    if missing:
        raise RegistryError(f"The task {task!r} from {where} has no {', '.join(missing)}: "
                            "implement the oxport.tasks.Task protocol.")
    name = task.name
    if not isinstance(name, str) or not _TASK_NAME.match(name) or name == AUTO:
        raise RegistryError(f"Task name {name!r} from {where}: use lower-case words joined by "
                            f"'-' (e.g. 'text-generation-with-past'), other than {AUTO!r}.")
    return name


def registered_tasks(plugins: Sequence[str] | None = None,
                     disable_plugins: Sequence[str] | None = None) -> dict[str, RegisteredTask]:
    """Every task the selected plugins register, by name."""
    from oxport import plugin_manager

    manager = plugin_manager.load(allow=plugins, block=disable_plugins)
    return dict(sorted(manager.registry.tasks.items()))


def resolve(task: str, source: Any, tasks: dict[str, RegisteredTask]) -> RegisteredTask:
    """The registered task named ``task``, or for ``"auto"`` the best fit of ``source``."""
    if task != AUTO:
        found = tasks.get(task)
        if found is None:
            known = ", ".join(tasks) or "none (install a plugin that registers tasks)"
            raise InvalidExportArgumentError(
                f"No task {task!r} is registered: pick one of {known}, or {AUTO!r}.")
        return found
    scores = [(entry.task.match(source), name) for name, entry in tasks.items()]
    best = max((score for score, _ in scores), default=0)
    if best <= 0:
        raise InvalidExportArgumentError(
            f"No registered task recognizes {_describe(source)}: name one with task=... "
            f"(--task): {', '.join(tasks) or 'none is registered'}.")
    winners = [name for score, name in scores if score == best]
    if len(winners) > 1:
        raise InvalidExportArgumentError(
            f"Tasks {', '.join(winners)} fit {_describe(source)} equally well: name one with "
            "task=... (--task).")
    return tasks[winners[0]]


def export_task(source: Any, output_dir: str | os.PathLike[str], task: str = AUTO, *,
                dynamo: bool = False, opset: int | None = None, verify: bool = False,
                plugins: Sequence[str] | None = None,
                disable_plugins: Sequence[str] | None = None,
                stream_weights: bool | None = None, target: str | None = None,
                dtype: str | None = None, quantize: str | None = None,
                quantize_block_size: int = 32, **task_options: Any) -> TaskResult:
    """Export ``source`` for ``task`` into the folder ``output_dir`` (created if needed).

    ``source`` is what the task takes: for the transformers tasks, a folder written by
    ``save_pretrained`` (config.json and weights) or a ``PreTrainedModel``. ``task="auto"``
    picks the registered task that fits the source best (``oxport tasks`` lists them).
    ``dynamo`` captures with torch.export instead of tracing; ``opset`` is the ai.onnx opset;
    ``verify`` checks the files with ONNX Runtime against the source model (for the
    generation tasks: greedy generation compared token by token); ``plugins`` and
    ``disable_plugins`` select plugins as in :func:`oxport.export`. ``stream_weights``
    (with ``dynamo``, for a checkpoint folder) builds the model on the meta device and
    streams each weight from the checkpoint into the file, so a model larger than memory
    exports (docs/large_models.md); None (the default) streams a folder of safetensors
    with ``dynamo`` (loading the model instead, with a warning, when it cannot run without
    its weights) and loads the model otherwise; False always loads it. ``target``,
    ``dtype``, ``quantize`` and ``quantize_block_size`` pick the runtime profile, precision
    and weight quantization of every file written, as in :func:`oxport.export`
    (docs/targets.md). Other keywords go to the task. Returns a :class:`TaskResult`; a
    failed verification is in ``result.verification``
    (the files stay written, for inspection).
    """
    tasks = registered_tasks(plugins, disable_plugins)
    chosen = resolve(task, source, tasks)
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise InvalidExportArgumentError(
            f"The output folder {str(folder)!r} is a file: give a folder path (created if "
            "needed).")
    folder.mkdir(parents=True, exist_ok=True)
    if stream_weights and not dynamo:
        raise InvalidExportArgumentError(
            "stream_weights (--stream-weights) captures the model without its weights, which "
            "needs dynamo=True (--dynamo).")
    options = TaskOptions(dynamo=dynamo, opset=opset, verify=verify, plugins=plugins,
                          disable_plugins=disable_plugins, extra=dict(task_options),
                          stream_weights=bool(stream_weights), target=target, dtype=dtype,
                          quantize=quantize, quantize_block_size=quantize_block_size)
    if stream_weights is None and dynamo and _holds_safetensors(source):
        result = _streamed_else_loaded(chosen.task, source, folder, options)
    else:
        result = chosen.task.export(source, folder, options)
    if not isinstance(result, TaskResult):
        raise OnnxExporterError(
            f"The task {chosen.name!r} from {chosen.provenance} returned "
            f"{type(result).__name__}, not an oxport.tasks.TaskResult: fix the plugin.")
    return result


def _streamed_else_loaded(task: Task, source: Any, folder: Path,
                          options: TaskOptions) -> TaskResult:
    """``task``'s export of the checkpoint ``source`` with its weights streamed; where the
    model cannot run without its weights (code that reads weight values while capturing,
    such as a mixture of experts routing by ``nonzero``), a warning and the export of the
    model loaded in memory."""
    try:
        return task.export(source, folder, dataclasses.replace(options, stream_weights=True))
    except InvalidExportArgumentError:
        raise  # the request itself is wrong: loading the model would not change that
    except Exception as exc:  # noqa: BLE001 - the model's own code raised: retry loaded
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        warnings.warn(
            f"oxport: capturing {source} without its weights failed ({type(exc).__name__}: "
            f"{first_line}); exported with the model loaded in memory instead. Pass "
            "stream_weights=False (--no-stream-weights) to skip the attempt, or "
            "stream_weights=True (--stream-weights) to see the error.", UserWarning,
            stacklevel=3)
    return task.export(source, folder, dataclasses.replace(options, stream_weights=False))


def _holds_safetensors(source: Any) -> bool:
    """Whether ``source`` is a folder holding safetensors weights (streamed by default)."""
    if not isinstance(source, (str, os.PathLike)) or not os.path.isdir(source):
        return False
    return any(name.endswith(".safetensors") for name in os.listdir(source))


def _describe(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return f"the folder {os.fspath(source)!r}"
    return f"the {type(source).__name__} given"
