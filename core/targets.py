"""Runtime targets: profiles a plugin contributes (``registry.register_target``) that shape
an export for where it runs, selected with ``oxport.export(..., target="ort")`` or
``oxport export --target ort``.

A :class:`Target` brings graph passes (fusions into the runtime's fused ops, weight
quantization), symbolic overrides that apply only while it is selected, and the newest
opset each version of the runtime loads (``target="ort==1.17"`` caps the export at it).
``dtype`` (``"fp16"``/``"bf16"``) exports the model's weights and compute in that type;
``quantize`` (``"int4"``/``"int8"``) asks the target's passes for weight-only quantization.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from oxport.errors import InvalidExportArgumentError, UnsupportedOperatorError
from oxport.ir import Graph

#: The dtype names ``dtype=`` takes.
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16,
                                  "bf16": torch.bfloat16}
#: The weight formats ``quantize=`` takes.
QUANTIZE_FORMATS = ("int4", "int8")
_SPEC = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]*?)(?:==(?P<version>\d+(?:\.\d+)*))?$")

#: A target's graph pass: ``fn(graph, context)``, returning how many rewrites it made.
TargetPass = Callable[[Graph, "TargetContext"], Any]


@dataclasses.dataclass(frozen=True)
class Target:
    """A runtime profile.

    :param name: what ``target=`` selects it by.
    :param passes: ``(name, fn(graph, context))`` pairs run in order on the converted,
        constant-folded graph (after those of the target it ``extends``).
    :param symbolics: symbolics (``OpPack.symbolics`` entries or
        ``(op, fn, since)`` tuples) that win over every plugin while the target is selected.
    :param domains: custom domains the passes emit, with their versions.
    :param versions: runtime version (``"1.17"``) -> ``(newest opset, newest IR version)``
        it loads; ``target="name==X.Y"`` caps the export at the newest version <= X.Y.
    :param extends: the name of a target whose passes and symbolics come first.
    :param default_opset: the opset of an export that gives none (lowered to what the
        requested runtime version loads); None keeps oxport's default.
    :param installed: returns the version of the runtime installed here (None if it is
        not): ``target=name`` without a version targets that one, so the file loads in it.
    """

    name: str
    description: str = ""
    passes: Sequence[tuple[str, TargetPass]] = ()
    symbolics: Sequence[Any] = ()
    domains: Mapping[str, int] = dataclasses.field(default_factory=dict)
    versions: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    extends: str | None = None
    default_opset: int | None = None
    installed: Callable[[], str | None] | None = None


@dataclasses.dataclass(frozen=True)
class TargetRequest:
    """What the caller asked for: a target (and its runtime version), a dtype, a weight
    format. Built and checked by :func:`request`."""

    name: str = "onnx"
    version: tuple[int, ...] | None = None
    dtype: torch.dtype | None = None
    quantize: str | None = None
    block_size: int = 32
    quantize_embeddings: bool = False
    quantize_lm_head: bool = True

    @property
    def label(self) -> str:
        return self.name + (f"=={'.'.join(map(str, self.version))}" if self.version else "")


@dataclasses.dataclass
class TargetContext:
    """What a target's pass reads: the request, the export's opset, the conversion (its
    GraphContext-facing state), the model as exported (in the requested dtype; a pass may
    read facts the graph lost, such as a rotary embedding's tables), and ``applied``,
    where passes count their rewrites."""

    target: Target
    request: TargetRequest
    opset: int
    conversion: Any = None
    model: Any = None
    applied: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The installed runtime's version, when ``target=`` names none.
    runtime: tuple[int, ...] | None = None

    @property
    def dtype(self) -> torch.dtype | None:
        return self.request.dtype

    @property
    def quantize(self) -> str | None:
        return self.request.quantize

    def runtime_at_least(self, version: str) -> bool:
        """Whether the targeted runtime version (the requested one, else the installed one,
        else the newest) is at least ``version``: for a fused op that version added."""
        runtime = self.request.version or self.runtime
        return runtime is None or runtime >= _version(version)


def request(target: str | None, dtype: str | None = None,
            quantize: str | Mapping[str, Any] | None = None, block_size: int = 32,
            quantize_embeddings: bool = False, quantize_lm_head: bool = True
            ) -> TargetRequest | None:
    """The checked request for ``export(target=, dtype=, quantize=...)``; None when
    nothing was asked (a plain export). ``quantize`` is a format (``"int4"``) or a dict
    ``{"format": "int4", "block_size": 32, "lm_head": True, "embeddings": False}``."""
    if isinstance(quantize, Mapping):
        unknown = set(quantize) - {"format", "block_size", "lm_head", "embeddings"}
        if unknown or "format" not in quantize:
            raise InvalidExportArgumentError(
                f"quantize={dict(quantize)!r}: give 'format' ('int4' or 'int8') and optionally "
                "'block_size', 'lm_head', 'embeddings'" +
                (f" (unknown: {', '.join(sorted(unknown))})." if unknown else "."))
        block_size = quantize.get("block_size", block_size)
        quantize_lm_head = bool(quantize.get("lm_head", quantize_lm_head))
        quantize_embeddings = bool(quantize.get("embeddings", quantize_embeddings))
        quantize = quantize["format"]
    if target is None and dtype in (None, "fp32") and quantize is None:
        return None
    match = _SPEC.match(target or "onnx") if isinstance(target or "onnx", str) else None
    if match is None:
        raise InvalidExportArgumentError(
            f"target={target!r} is not a target name: pass e.g. 'onnx', 'ort' or 'ort==1.17'.")
    version = tuple(int(p) for p in match["version"].split(".")) if match["version"] else None
    if dtype is not None and dtype not in DTYPES:
        raise InvalidExportArgumentError(
            f"dtype={dtype!r} is not supported: pass one of {', '.join(DTYPES)}.")
    if quantize is not None and quantize not in QUANTIZE_FORMATS:
        raise InvalidExportArgumentError(
            f"quantize={quantize!r} is not supported: pass one of "
            f"{', '.join(QUANTIZE_FORMATS)} (weight-only).")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 16 \
            or block_size & (block_size - 1):
        raise InvalidExportArgumentError(
            f"quantize_block_size={block_size!r} is not supported: pass a power of two >= 16 "
            "(default 32).")
    return TargetRequest(match["name"], version, DTYPES.get(dtype or "fp32"), quantize,
                         block_size, quantize_embeddings, quantize_lm_head)


def resolve(targets: Mapping[str, Target], wanted: TargetRequest) -> list[Target]:
    """The chain of targets ``wanted`` selects, base first (``extends``)."""
    chain: list[Target] = []
    name: str | None = wanted.name
    while name is not None:
        target = targets.get(name)
        if target is None:
            known = ", ".join(sorted(targets)) or "none"
            raise InvalidExportArgumentError(
                f"Unknown target {name!r} (known: {known}). Install the plugin that provides "
                "it, or pick a known one (`oxport plugins` lists what is installed).")
        if target in chain:
            raise InvalidExportArgumentError(f"Target {name!r} extends itself.")
        chain.insert(0, target)
        name = target.extends
    return chain


def limits(chain: Sequence[Target], wanted: TargetRequest) -> tuple[int, int] | None:
    """The (newest opset, newest IR version) the requested runtime version loads; None
    when no version is asked, or it is newer than every release the target lists (what it
    loads is not known: nothing is capped)."""
    if wanted.version is None:
        return None
    table = {tuple(int(p) for p in v.split(".")): caps
             for target in chain for v, caps in target.versions.items()}
    if not table:
        raise InvalidExportArgumentError(
            f"Target {wanted.name!r} lists no runtime versions: drop "
            f"'{wanted.label.removeprefix(wanted.name)}'.")
    if wanted.version[:2] > max(table)[:2]:
        return None
    older = [v for v in table if v <= wanted.version]
    if not older:
        oldest = ".".join(map(str, min(table)))
        raise InvalidExportArgumentError(
            f"{wanted.label}: the oldest version target {wanted.name!r} knows is {oldest}.")
    return table[max(older)]


def settle_opset(opset: int, given: bool, caps: tuple[int, int] | None, label: str,
                 default: int | None = None) -> int:
    """The export's opset under the runtime's cap: the default (the target's, else
    ``opset``) lowered to it, a given opset above it refused."""
    if not given:
        opset = default or opset
        return opset if caps is None else min(opset, caps[0])
    if caps is None:
        return opset
    if opset > caps[0]:
        raise InvalidExportArgumentError(
            f"opset_version={opset} is newer than {label} loads (opset {caps[0]}, IR version "
            f"{caps[1]}): export with opset_version={caps[0]} or lower, or target a newer "
            "runtime version.")
    return opset


def explain_unsupported(exc: UnsupportedOperatorError, caps: tuple[int, int] | None,
                        label: str) -> UnsupportedOperatorError:
    """``exc`` with the ops that need a newer opset than the target runtime loads named."""
    needs = [op for op in exc.ops if getattr(op, "min_opset", None) and caps
             and op.min_opset > caps[0]]
    if not needs:
        return exc
    named = ", ".join(f"{op.kind} (opset {op.min_opset})" for op in needs)
    return UnsupportedOperatorError(
        f"{label} loads opset {caps[0]} at most, but the model needs {named}: target a newer "
        f"runtime version, or change the model so it avoids these ops.\n{exc}", exc.ops)


def check_ir_version(ir_version: int, caps: tuple[int, int] | None, label: str) -> None:
    """Refuse a file whose IR version the target runtime does not load."""
    if caps is not None and ir_version > caps[1]:
        raise InvalidExportArgumentError(
            f"The exported file has IR version {ir_version}, newer than {label} loads "
            f"({caps[1]}): export at a lower opset or target a newer runtime version.")


def run_passes(graph: Graph, chain: Sequence[Target], context: TargetContext) -> None:
    """Each target's passes in order, base target first; the counts go to
    ``context.applied`` and the graph's metadata."""
    for target in chain:
        for name, target_pass in target.passes:
            count = target_pass(graph, context)
            if count:
                context.applied[name] = context.applied.get(name, 0) + int(count)
    for domain, version in (d for t in chain for d in t.domains.items()):
        if domain in graph.opset_imports:
            graph.opset_imports[domain] = max(graph.opset_imports[domain] or 0, version)
    if context.applied:
        graph.metadata["oxport.target"] = context.request.label
        graph.metadata["oxport.target_passes"] = ",".join(
            f"{k}={v}" for k, v in context.applied.items())


def in_dtype(model: Any, args: Any, dtype: torch.dtype | None) -> tuple[Any, Any]:
    """A copy of ``model`` and ``args`` with floating weights and inputs in ``dtype``
    (the model's code keeps what it computes in float32 on purpose, such as norms and
    softmax); the model itself is left as it is."""
    if dtype is None or dtype == torch.float32:
        return model, args
    if not isinstance(model, torch.nn.Module):
        raise InvalidExportArgumentError(
            f"dtype= converts an nn.Module's weights, not a {type(model).__name__}'s: pass the "
            "nn.Module, or convert the model to the dtype before capturing it.")
    model = copy.deepcopy(model).to(dtype)

    def cast(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(dtype) if tensor.is_floating_point() else tensor

    return model, torch.utils._pytree.tree_map_only(torch.Tensor, cast, args)


def symbolic_entries(chain: Sequence[Target]) -> list[tuple[str, Callable[..., Any], int]]:
    """The ``(op, fn, since)`` symbolic overrides of a chain of targets."""
    found = []
    for target in chain:
        for item in target.symbolics:
            name, fn, since = (item.name, item.fn, item.since) if hasattr(item, "fn") \
                else tuple(item)[:3]
            found.append((name, fn, since))
    return found


@dataclasses.dataclass
class Selection:
    """The targets an export selected, as the pipeline applies them."""

    chain: list[Target]
    request: TargetRequest
    caps: tuple[int, int] | None
    context: TargetContext | None = None
    model: Any = None
    runtime: tuple[int, ...] | None = None

    def view(self, registry: Any) -> Any:
        """``registry`` (a RegistryView) with the chain's symbolic overrides on top of
        every plugin (below ``register_custom_op_symbolic``'s)."""
        entries = symbolic_entries(self.chain)
        if not entries:
            return registry
        from oxport.registry import Layer, Provenance, RegistryView, SymbolicEntry, SymbolicRegistry

        overrides = SymbolicRegistry()
        provenance = Provenance(f"target {self.request.name}", None, None, Layer.RUNTIME)
        for name, fn, since in entries:
            overrides.add(SymbolicEntry(name, fn, since, provenance, override=True))
        return RegistryView(*registry.registries, overrides)

    def opset(self, opset: int, given: bool) -> int:
        default = next((t.default_opset for t in reversed(self.chain) if t.default_opset),
                       None)
        return settle_opset(opset, given, self.caps, self.request.label, default)

    def prepare(self, model: Any, args: Any) -> tuple[Any, Any]:
        """The model and arguments to export, in the requested dtype (see
        :func:`in_dtype`); the passes see that model."""
        model, args = in_dtype(model, args, self.request.dtype)
        self.model = model
        return model, args

    def run(self, graph: Graph, conversion: Any, opset: int) -> dict[str, int]:
        """Run the chain's passes on ``graph``; returns what they applied."""
        self.context = TargetContext(self.chain[-1], self.request, opset, conversion,
                                     self.model, runtime=self.runtime)
        run_passes(graph, self.chain, self.context)
        return self.context.applied

    def explain(self, exc: UnsupportedOperatorError) -> UnsupportedOperatorError:
        return explain_unsupported(exc, self.caps, self.request.label)

    def check(self, ir_version: int) -> None:
        check_ir_version(ir_version, self.caps, self.request.label)


def select(registered: Mapping[str, Target], wanted: TargetRequest | None) -> Selection | None:
    """The selection for ``wanted`` among the registered targets (None: no target)."""
    if wanted is None:
        return None
    chain = resolve(registered, wanted)
    if wanted.version is not None:
        return Selection(chain, wanted, limits(chain, wanted))
    runtime = _installed(chain)
    caps = None
    if runtime is not None:  # the installed runtime's caps, when the table knows it
        with contextlib.suppress(InvalidExportArgumentError):
            caps = limits(chain, dataclasses.replace(wanted, version=runtime))
    return Selection(chain, wanted, caps, runtime=runtime)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _installed(chain: Sequence[Target]) -> tuple[int, ...] | None:
    """The version of the runtime installed here, from the nearest target that knows."""
    for target in reversed(chain):
        if target.installed is not None:
            found = target.installed()
            return _version(found) if found else None
    return None


__all__ = [
    "DTYPES",
    "QUANTIZE_FORMATS",
    "Selection",
    "Target",
    "TargetContext",
    "TargetPass",
    "TargetRequest",
    "check_ir_version",
    "explain_unsupported",
    "in_dtype",
    "limits",
    "request",
    "resolve",
    "run_passes",
    "select",
    "settle_opset",
    "symbolic_entries",
]
