"""The public API: ``export`` and its companions, with torch.onnx's signatures and semantics.

Each checks its arguments once into an :class:`~oxport.exporter.options.ExportOptions` and hands
it to :func:`oxport.exporter.pipeline.convert`, which runs the export's phases.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import IO, Any

import torch

from oxport import plugin_manager as plugin_loader
from oxport import serialize, targets
from oxport.errors import InvalidExportArgumentError
from oxport.exporter import pipeline, progress
from oxport.exporter.options import ExportOptions, check_target, with_kwargs
from oxport.exporter.pretty import pretty
from oxport.exporter.result import ExportResult
from oxport.exporter.state import gc_paused
from oxport.registry import Layer, Provenance
from oxport.types import MIN_OPSET, OperatorExportTypes, TrainingMode
from oxport.walk import Unconvertible


@gc_paused
def export(model: torch.nn.Module | torch.jit.ScriptModule | torch.jit.ScriptFunction,
           args: Any = (), f: str | os.PathLike[str] | IO[bytes] | None = None,
           export_params: bool = True, verbose: bool | None = False,
           training: TrainingMode = TrainingMode.EVAL,
           input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
           operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
           opset_version: int | None = None, do_constant_folding: bool = True,
           dynamic_axes: Mapping[str, Any] | None = None,
           keep_initializers_as_inputs: bool | None = None,
           custom_opsets: Mapping[str, int] | None = None,
           export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = False,
           autograd_inlining: bool = True, *, kwargs: Mapping[str, Any] | None = None,
           dynamo: bool = False, dynamic_shapes: Any = None,
           external_data: bool | str | None = None,
           report: bool | str | os.PathLike[str] | None = None, verify: bool = False,
           optimize: bool = True, profile: bool = False, dump_exported_program: bool = False,
           artifacts_dir: str | os.PathLike[str] = ".",
           custom_translation_table: Mapping[Callable[..., Any], Any] | None = None,
           fallbacks: Sequence[str] | None = None, plugins: Sequence[str] | None = None,
           disable_plugins: Sequence[str] | None = None, autoload_plugins: bool | None = None,
           weights: str | os.PathLike[str] | Mapping[str, Any] | None = None,
           target: str | None = None, dtype: str | None = None,
           quantize: str | Mapping[str, Any] | None = None, quantize_block_size: int = 32
           ) -> ExportResult:
    """Export ``model`` to ONNX, written to ``f`` (a path or a binary file object).

    The parameters are those of torch.onnx's ``export`` with ``dynamo=False`` (the
    TorchScript path), positionally as in torch 2.1 or by keyword as in torch 2.13;
    torch.onnx's ``TrainingMode`` and ``OperatorExportTypes`` members are accepted. ``args``
    is a tuple of inputs, a single tensor, or a tuple ending in a dict of named arguments
    (end with an empty dict to pass a dict positionally); ``kwargs`` adds named arguments.
    Nested tuples, lists and dicts of tensors are flattened into graph inputs in order.
    See docs/export.md for every parameter.

    ``dynamo=True`` captures the model with ``torch.export.export`` (non-strict) and converts
    its graph with the same op packs; ``dynamic_shapes`` then gives its dynamic dims
    (``torch.export.Dim``s and strings in their place name the ONNX dims; ``dynamic_axes``
    is translated when it is not given). An ``ExportedProgram`` as ``model`` is converted as it is. ``optimize``,
    ``profile``, ``dump_exported_program``, ``artifacts_dir`` and
    ``custom_translation_table`` do nothing here, as in torch.onnx with ``dynamo=False``.
    ``verify=True`` checks the model with ONNX Runtime against eager PyTorch before it is
    written (:func:`oxport.diagnose.verification.verify`'s checks; a failure raises
    :class:`oxport.diagnose.verification.VerificationError` and writes nothing).

    oxport adds: ``external_data`` (force it on or off; by default it is used past 2 GB,
    as one file beside the model; ``"per_tensor"`` writes one file per weight), ``report``
    (True prints an :class:`oxport.diagnose.report.ExportReport`; a path writes it there, as JSON
    when the path ends in ``.json``, else as text), ``fallbacks`` (fallback plugins by
    name, in order), ``plugins`` / ``disable_plugins`` / ``autoload_plugins`` (which
    plugins load), ``weights`` (for a model whose parameters are on the meta device, with
    ``dynamo=True``: a safetensors checkpoint folder or file, or a mapping from parameter
    names to tensors or functions returning them; the model is captured without weights and
    each weight streamed into the file: see docs/large_models.md), ``target`` (a runtime profile a plugin registers: ``"onnx"``, ``"ort"``,
    ``"ort==1.17"`` caps the opset and IR version at what that version loads; see
    docs/targets.md), ``dtype`` (``"fp16"``/``"bf16"``: weights and compute in that type),
    ``quantize`` (``"int4"``/``"int8"`` weight-only, ``quantize_block_size`` per block; a
    dict ``{"format", "block_size", "lm_head", "embeddings"}`` for the head and embeddings).
    ``f=None`` converts without writing anything.

    Nothing is left at ``f`` when the export fails, except after a :class:`CheckerError`:
    then the invalid model is still written, for inspection.

    Returns an :class:`ExportResult` (torch.onnx returns None with ``dynamo=False``), which
    offers torch.onnx's ``ONNXProgram`` surface too: ``.model_proto``, ``.save(path)``,
    calling it on inputs (ONNX Runtime), ``.optimize()``.
    """
    options = ExportOptions.of(
        model, export_params=export_params, verbose=verbose, training=training,
        input_names=input_names, output_names=output_names,
        operator_export_type=operator_export_type, opset_version=opset_version,
        do_constant_folding=do_constant_folding, dynamic_axes=dynamic_axes,
        keep_initializers_as_inputs=keep_initializers_as_inputs, custom_opsets=custom_opsets,
        export_modules_as_functions=export_modules_as_functions,
        autograd_inlining=autograd_inlining, fallbacks=fallbacks, plugins=plugins,
        disable_plugins=disable_plugins, autoload_plugins=autoload_plugins,
        dynamo=dynamo, dynamic_shapes=dynamic_shapes, weights=weights,
        target=targets.request(target, dtype, quantize, quantize_block_size))
    args = with_kwargs(args, kwargs)
    if f is not None:
        check_target(f)
    if verify and weights is not None:
        raise InvalidExportArgumentError(
            "verify=True runs the model in eager PyTorch, which needs its weights in memory; "
            "with weights= verify the written file against the model loaded elsewhere.")
    result = pipeline.convert(model, args, options, check=False)
    if verify:
        from oxport.diagnose.verification import verify_result
        verify_result(model, args, result, dynamic_axes=dynamic_axes, training=training)
    if f is not None:
        result.save(f, external_data=external_data)
    with progress.phase("check", result.timings):
        serialize.check(result.serialized)
    if report:
        result.report(model).emit(None if report is True else report)
    return result


@gc_paused
def convert(model: Any, args: Any, *, export_params: bool = True, verbose: bool = False,
            training: TrainingMode = TrainingMode.EVAL,
            input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
            operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
            opset_version: int | None = None, do_constant_folding: bool = True,
            dynamic_axes: Mapping[str, Any] | None = None,
            keep_initializers_as_inputs: bool | None = None,
            custom_opsets: Mapping[str, int] | None = None,
            export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = False,
            autograd_inlining: bool = True, fallbacks: Sequence[str] | None = None,
            plugins: Sequence[str] | None = None, disable_plugins: Sequence[str] | None = None,
            autoload_plugins: bool | None = None, check: bool = True,
            add_node_names: bool = True, dynamo: bool = False,
            dynamic_shapes: Any = None, target: str | None = None, dtype: str | None = None,
            quantize: str | Mapping[str, Any] | None = None, quantize_block_size: int = 32
            ) -> ExportResult:
    """Convert without writing a file; same parameters as :func:`export`."""
    options = ExportOptions.of(
        model, export_params=export_params, verbose=verbose, training=training,
        input_names=input_names, output_names=output_names,
        operator_export_type=operator_export_type, opset_version=opset_version,
        do_constant_folding=do_constant_folding, dynamic_axes=dynamic_axes,
        keep_initializers_as_inputs=keep_initializers_as_inputs, custom_opsets=custom_opsets,
        export_modules_as_functions=export_modules_as_functions,
        autograd_inlining=autograd_inlining, fallbacks=fallbacks, plugins=plugins,
        disable_plugins=disable_plugins, autoload_plugins=autoload_plugins,
        dynamo=dynamo, dynamic_shapes=dynamic_shapes, add_node_names=add_node_names,
        target=targets.request(target, dtype, quantize, quantize_block_size))
    return pipeline.convert(model, args, options, check=check)


@gc_paused
def export_to_pretty_string(model: Any, args: Any, export_params: bool = True,
                            verbose: bool = False, training: TrainingMode = TrainingMode.EVAL,
                            input_names: Sequence[str] | None = None,
                            output_names: Sequence[str] | None = None,
                            operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
                            export_type: Any = None, google_printer: bool = False,
                            opset_version: int | None = None,
                            keep_initializers_as_inputs: bool | None = None,
                            custom_opsets: Mapping[str, int] | None = None,
                            add_node_names: bool = True, do_constant_folding: bool = True,
                            dynamic_axes: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    """Like :func:`export`, but returns a readable text form of the model."""
    options = ExportOptions.of(
        model, export_params=export_params, verbose=False, training=training,
        input_names=input_names, output_names=output_names,
        operator_export_type=operator_export_type, opset_version=opset_version,
        keep_initializers_as_inputs=keep_initializers_as_inputs, custom_opsets=custom_opsets,
        do_constant_folding=do_constant_folding, dynamic_axes=dynamic_axes,
        add_node_names=add_node_names, **kwargs)
    result = pipeline.convert(model, args, options, check=False)
    if google_printer:
        return str(result.model_proto)
    return pretty(result.serialized)


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable[..., Any],
                                opset_version: int) -> None:
    """Register ``symbolic_fn`` for ``symbolic_name`` at every opset >= ``opset_version``.

    Runtime registrations shadow every plugin at the opsets they cover.
    """
    from oxport.registry import Registrar

    registrar = Registrar(plugin_loader.runtime_registry(),
                          Provenance("register_custom_op_symbolic", None, None, Layer.RUNTIME))
    registrar.register(symbolic_name, symbolic_fn, _runtime_since(opset_version), override=True)


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    """Remove a registration made by :func:`register_custom_op_symbolic`."""
    if not plugin_loader.runtime_registry().remove(symbolic_name, _runtime_since(opset_version)):
        raise InvalidExportArgumentError(
            f"No custom symbolic is registered for {symbolic_name!r} at opset {opset_version}.")


def _runtime_since(opset_version: Any) -> Any:
    """torch.onnx takes any opset from 1 (the seeds register prim::PythonOp at 1): below
    the oldest opset oxport exports, it means every opset."""
    if isinstance(opset_version, int) and not isinstance(opset_version, bool) \
            and 1 <= opset_version < MIN_OPSET:
        return MIN_OPSET
    return opset_version


def unconvertible_ops(model: Any, args: Any, training: TrainingMode = TrainingMode.EVAL,
                      opset_version: int | None = None, *, dynamo: bool = False
                      ) -> tuple[Any, list[str]]:
    """The source graph (TorchScript's; with ``dynamo=True`` the torch.export front end's
    view) and every op kind that would fail to convert (one entry per failing node, so
    ``set(...)`` gives the kinds). See :func:`unconvertible_op_details` for counts, source
    lines and minimum opsets."""
    graph, details = pipeline.collect_unconvertible(model, args, training, opset_version,
                                                   dynamo)
    return graph, [info.kind for info in details for _ in range(info.count)]


def unconvertible_op_details(model: Any, args: Any, training: TrainingMode = TrainingMode.EVAL,
                             opset_version: int | None = None, *, dynamo: bool = False
                             ) -> list[Unconvertible]:
    """Every op kind that would fail to convert: its count, source lines, the reason, and
    ``min_opset``, the lowest opset at which some symbolic serves it (None if none does).
    ``dynamo=True`` reads the model through the torch.export front end."""
    return pipeline.collect_unconvertible(model, args, training, opset_version, dynamo)[1]


__all__ = [
    "convert", "export", "export_to_pretty_string", "register_custom_op_symbolic",
    "unconvertible_op_details", "unconvertible_ops", "unregister_custom_op_symbolic",
]
