"""An export's options, checked once: :class:`ExportOptions` and the argument checks."""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch

from oxport import serialize, targets
from oxport.errors import InvalidExportArgumentError
from oxport.frontends.base import FrontEnd
from oxport.passes import functions
from oxport.types import (
    DEFAULT_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    OperatorExportTypes,
    TrainingMode,
)


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """What :func:`oxport.export` was asked to do, checked: torch.onnx's parameters (under
    their names unless said) as the conversion's phases read them. Build it with
    :meth:`of`, which checks every parameter."""

    opset: int = DEFAULT_OPSET
    export_params: bool = True
    verbose: bool = False
    training: TrainingMode = TrainingMode.EVAL
    input_names: Sequence[str] | None = None
    output_names: Sequence[str] | None = None
    export_type: OperatorExportTypes = OperatorExportTypes.ONNX
    do_constant_folding: bool = True
    dynamic_axes: Mapping[str, Any] | None = None
    #: Resolved: torch.onnx's default for the export type, always True below opset 9.
    keep_initializers_as_inputs: bool = False
    custom_opsets: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: ``export_modules_as_functions`` checked: False, True or a frozenset of module types.
    as_functions: bool | frozenset[type] = False
    autograd_inlining: bool = True
    fallbacks: tuple[str, ...] = ()
    plugins: Sequence[str] | None = None
    disable_plugins: Sequence[str] | None = None
    autoload_plugins: bool | None = None
    add_node_names: bool = True
    dynamo: bool = False
    dynamic_shapes: Any = None
    #: Whether the torch.export front end reads the model (``dynamo=True`` or an
    #: ``ExportedProgram``), else the TorchScript one.
    exported: bool = False
    #: Where the values of a meta-device model's weights are (``weights=``): streamed
    #: into the file (:mod:`oxport.serialize.streamed`).
    weights: Any = None
    #: The runtime target, dtype and weight format asked for (None: a plain export), and
    #: whether ``opset_version`` was given (else the target's runtime may lower the default).
    target: targets.TargetRequest | None = None
    opset_given: bool = True

    @property
    def params_are_inputs(self) -> bool:
        """Whether parameters stay run-time inputs, so nothing may fold them."""
        return self.keep_initializers_as_inputs or not self.export_params

    @classmethod
    def of(cls, model: Any, *, opset_version: int | None = None,
           training: TrainingMode = TrainingMode.EVAL,
           operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
           keep_initializers_as_inputs: bool | None = None,
           custom_opsets: Mapping[str, int] | None = None,
           export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = False,
           fallbacks: Sequence[str] | None = None, verbose: bool | None = False,
           dynamo: bool = False, dynamic_shapes: Any = None,
           target: targets.TargetRequest | None = None, **given: Any) -> ExportOptions:
        """Check the parameters of :func:`oxport.convert` for ``model``; the others
        (``export_params``, ``input_names``...) are kept as given."""
        opset = check_opset(opset_version)
        check_model(model)
        check_front_end_options(model, dynamo, dynamic_shapes)
        check_weights(model, dynamo, given.get("weights"))
        if isinstance(model, torch.export.ExportedProgram) and export_modules_as_functions:
            raise InvalidExportArgumentError(
                "export_modules_as_functions needs the model's modules, which an "
                "ExportedProgram does not hold: pass the nn.Module with dynamo=True instead.")
        export_type = check_export_type(operator_export_type)
        training = check_training(training)
        checked_opsets = check_custom_opsets(custom_opsets)
        as_functions = functions.check_option(export_modules_as_functions, opset, model)
        if keep_initializers_as_inputs is None:
            keep_initializers_as_inputs = export_type != OperatorExportTypes.ONNX
        if opset < 9:  # IR 3: every initializer must also be a graph input
            keep_initializers_as_inputs = True
        return cls(opset=opset, training=training, export_type=export_type,
                   keep_initializers_as_inputs=keep_initializers_as_inputs,
                   custom_opsets=checked_opsets, as_functions=as_functions,
                   fallbacks=tuple(fallbacks or ()), verbose=bool(verbose), dynamo=dynamo,
                   dynamic_shapes=dynamic_shapes,
                   exported=dynamo or isinstance(model, torch.export.ExportedProgram),
                   target=target, opset_given=opset_version is not None, **given)


# -- checks ---------------------------------------------------------------------------
def check_opset(opset_version: Any) -> int:
    """``opset_version`` as the opset to export at (None: the default)."""
    if opset_version is None:
        return DEFAULT_OPSET
    if isinstance(opset_version, bool) or not isinstance(opset_version, int) or \
            not MIN_OPSET <= opset_version <= MAX_OPSET:
        raise InvalidExportArgumentError(
            f"opset_version={opset_version!r} is not supported: use an int from {MIN_OPSET} "
            f"to {MAX_OPSET} (default {DEFAULT_OPSET}).")
    return opset_version


def check_model(model: Any) -> None:
    """Raise unless ``model`` is something oxport exports."""
    if not isinstance(model, (torch.nn.Module, torch.jit.ScriptFunction, FrontEnd,
                              torch.export.ExportedProgram)):
        raise InvalidExportArgumentError(
            f"model must be a torch.nn.Module, a torch.jit.ScriptModule, a "
            f"torch.jit.ScriptFunction or a torch.export.ExportedProgram, not "
            f"{type(model).__name__}. Wrap a plain function in an nn.Module or script it with "
            "torch.jit.script.")


def check_training(value: Any) -> TrainingMode:
    """``training`` as a :class:`TrainingMode` (oxport's or torch.onnx's member)."""
    return _enum_argument("training", TrainingMode, value)


def check_export_type(value: Any) -> OperatorExportTypes:
    """``operator_export_type`` as an :class:`OperatorExportTypes`."""
    return _enum_argument("operator_export_type", OperatorExportTypes, value)


def _enum_argument(name: str, enum_type: type[Any], value: Any) -> Any:
    """``value`` as a member of ``enum_type`` (oxport's or torch.onnx's member, or its int)."""
    try:
        return enum_type(value)
    except ValueError:
        members = ", ".join(f"{enum_type.__name__}.{m}" for m in enum_type.__members__)
        raise InvalidExportArgumentError(
            f"{name}={value!r} is not valid: pass one of {members} (from oxport or "
            "torch.onnx).") from None


def check_front_end_options(model: Any, dynamo: Any, dynamic_shapes: Any) -> None:
    """``dynamo=True`` reads torch.export graphs: it needs an ``nn.Module`` (or an
    ``ExportedProgram``), and ``dynamic_shapes`` needs it."""
    if dynamo and isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise InvalidExportArgumentError(
            "dynamo=True captures the model with torch.export, which cannot read a scripted "
            "model: pass the eager nn.Module, or export the ScriptModule with dynamo=False.")
    if dynamic_shapes is not None and not dynamo and \
            not isinstance(model, torch.export.ExportedProgram):
        raise InvalidExportArgumentError(
            "dynamic_shapes= is for dynamo=True (the torch.export front end); with "
            "dynamo=False (the TorchScript path) give dynamic dimensions with "
            "dynamic_axes={input_name: {axis: 'name'}}, as torch.onnx does.")
    if dynamic_shapes is not None and isinstance(model, torch.export.ExportedProgram):
        raise InvalidExportArgumentError(
            "dynamic_shapes= has no effect on an ExportedProgram, whose shapes were fixed when "
            "it was captured: pass dynamic_shapes to torch.export.export instead.")


def check_weights(model: Any, dynamo: bool, weights: Any) -> None:
    """``weights=`` (streamed weights) needs the torch.export front end, which captures
    the model on fake tensors; the TorchScript front end runs it on real ones."""
    if weights is not None and not dynamo and \
            not isinstance(model, torch.export.ExportedProgram):
        raise InvalidExportArgumentError(
            "weights= streams a meta-device model's weights into the file, which needs "
            "dynamo=True (torch.export captures the model without its weights); the "
            "TorchScript front end (dynamo=False) runs the model, so load its weights first.")


def check_custom_opsets(custom_opsets: Mapping[str, int] | None) -> dict[str, int]:
    """``custom_opsets`` checked: custom domain -> its version."""
    result = {}
    for domain, version in (custom_opsets or {}).items():
        if not isinstance(domain, str) or not domain or domain in ("ai.onnx",):
            raise InvalidExportArgumentError(
                f"custom_opsets key {domain!r} must name a custom domain such as 'custom_domain';"
                " set the ai.onnx version with opset_version.")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InvalidExportArgumentError(
                f"custom_opsets[{domain!r}] must be an int >= 1, not {version!r}.")
        result[domain] = version
    return result


def with_kwargs(args: Any, kwargs: Mapping[str, Any] | None) -> Any:
    """torch 2.x's ``kwargs=`` as the seed's trailing dict of named arguments."""
    if kwargs is None:
        return args
    if not isinstance(kwargs, Mapping):
        raise InvalidExportArgumentError(
            f"kwargs must be a dict of named arguments for the model, not "
            f"{type(kwargs).__name__}.")
    positional = args if isinstance(args, (tuple, list)) else (args,)
    return (*positional, dict(kwargs))


def check_target(f: Any) -> None:
    """Raise unless ``f`` is a writable path or a binary file object."""
    if isinstance(f, (str, os.PathLike)):
        serialize.check_target(os.fspath(f))
    elif not hasattr(f, "write") or isinstance(f, io.TextIOBase):
        raise InvalidExportArgumentError(
            f"f must be a file path or a binary file object such as io.BytesIO(), not "
            f"{type(f).__name__}" + (" (open the file in 'wb' mode)."
                                     if isinstance(f, io.TextIOBase) else "."))
