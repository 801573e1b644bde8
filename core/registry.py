"""The symbolic registry: who converts which operator at which opset.

A symbolic registered ``since=N`` serves every opset >= N until its provider
registers a newer variant. Registrations live in three layers; at a given
opset the highest layer that serves the op wins:

* ``BUILTIN`` -- the packs shipped in the ``oxport`` distribution;
* ``INSTALLED`` -- packs of other distributions, found through entry points;
* ``RUNTIME`` -- ``register_custom_op_symbolic`` calls.

Two providers of one layer claiming the same op is an error at load time,
unless one of them says ``override=True``.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import importlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol

from oxport import torch_onnx_compat
from oxport.advice import RegistryError
from oxport.hookspecs import hookimpl
from oxport.opset_versions import MAX_OPSET, MIN_OPSET

_QUALIFIED_NAME = re.compile(r"^[A-Za-z_][\w.\-]*::[A-Za-z_]\w*(\.\w+)?$")


def newest_known_opset() -> int:
    """The newest ai.onnx opset the installed ``onnx`` package knows."""
    import onnx  # here, not at the top: listing plugins imports this module, not onnx

    return onnx.defs.onnx_opset_version()


class Layer(enum.IntEnum):
    """Registration layers; a higher layer shadows a lower one."""

    BUILTIN = 0
    INSTALLED = 1
    RUNTIME = 2


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Where a registration comes from."""

    plugin: str
    distribution: str | None = None
    version: str | None = None
    layer: Layer = Layer.INSTALLED

    def __str__(self) -> str:
        dist = f" ({self.distribution} {self.version})" if self.distribution else ""
        return f"{self.plugin}{dist}"


@dataclasses.dataclass(eq=False)
class SymbolicEntry:
    """One registered symbolic: an op, the first opset it serves, and its function."""

    name: str
    fn: Callable[..., Any]
    since: int
    provenance: Provenance
    override: bool = False
    until: int | None = None  # last opset served; None means "every newer opset"
    #: Whether it takes complex tensors (carried as real pairs); the walker declines complex
    #: inputs for the others.
    accepts_complex: bool = False
    #: Whether :func:`vet_symbolic` passed it (done when it is first looked up).
    vetted: bool = dataclasses.field(default=False, repr=False)

    @property
    def layer(self) -> Layer:
        return self.provenance.layer

    def serves(self, opset: int) -> bool:
        return self.since <= opset and (self.until is None or opset <= self.until)

    def __repr__(self) -> str:
        upper = "" if self.until is None else f"..{self.until}"
        return f"<symbolic {self.name} since={self.since}{upper} from {self.provenance}>"


class DeclaredSymbolic(NamedTuple):
    """A symbolic an :class:`OpPack` declares, as it registers it."""

    name: str
    fn: Callable[..., Any]
    since: int
    override: bool = False
    accepts_complex: bool = False


#: What the walker asks of a fallback (see :class:`oxport.walk.Fallback`).
FALLBACK_MEMBERS = ("preempt", "keeps_autograd_functions", "claims", "convert")


@dataclasses.dataclass(frozen=True)
class IOType:
    """How values of the type at ``path`` (``"module.Class"``) cross the model boundary:
    see :func:`oxport.hookspecs.oxport_register_io_types`."""

    path: str
    flatten: Callable[[Any], tuple[list[tuple[str, Any]], Any]]
    unflatten: Callable[[list[Any], Any], Any]
    provenance: Provenance


@dataclasses.dataclass
class OpCase:
    """A small declared test case for one op: run by ``oxport.testing``."""

    op: str
    model: Any
    inputs: Any = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""
    dynamic_axes: dict[str, Any] | None = None
    input_names: list[str] | None = None
    script: bool = False
    training: bool = False
    rtol: float = 1e-3
    atol: float = 1e-5
    #: ``"values"`` compares values, dtypes and shapes; ``"shape"`` only dtypes and shapes
    #: (for random ops such as rand, randn or multinomial).
    check: str = "values"
    min_opset: int | None = None
    max_opset: int | None = None
    export_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Why torch.export cannot capture the case (its runs through that front end are left
    #: out, and the support table lists the reason); empty when it can.
    not_exportable: str = ""
    #: Why the TorchScript front end cannot capture the case (a construct only torch.export
    #: has, such as its scan higher-order op): it runs through torch.export alone, whichever
    #: front ends are asked for; empty when it can.
    not_traceable: str = ""
    #: What the export of the case's model, scripted, fails with (a construct scripted code
    #: cannot export, named by the error): its runs through the ``script`` front end expect
    #: an error containing this text; empty when it exports.
    not_scriptable: str = ""
    provenance: Provenance | None = None

    def __str__(self) -> str:
        return f"{self.op}[{self.name}]" if self.name else self.op


def validate_name(name: Any) -> str:
    """Check a qualified op name (``namespace::op`` or ``namespace::op.overload``)."""
    example = "e.g. 'aten::elu', 'aten::max.other' or 'custom_ops::foo_forward'"
    if not isinstance(name, str):
        raise RegistryError(
            f"Op names are strings, not {type(name).__name__} ({name!r}): use a qualified "
            f"name 'namespace::op', {example}.")
    if not _QUALIFIED_NAME.match(name):
        problem = ("it has no namespace" if "::" not in name
                   else "it is not of the form 'namespace::op[.overload]'")
        raise RegistryError(
            f"Malformed op name {name!r}: {problem}. Use a qualified name 'namespace::op' "
            f"with an optional '.overload', {example}.")
    return name


def validate_since(since: Any, name: str) -> int:
    """Check that ``since`` is an ai.onnx opset oxport exports (MIN_OPSET to MAX_OPSET): a
    variant from a newer opset would never serve an export."""
    if isinstance(since, bool) or not isinstance(since, int) \
            or not MIN_OPSET <= since <= MAX_OPSET:
        raise RegistryError(
            f"{name}: since={since!r} is not a supported opset: pass an int from {MIN_OPSET} "
            f"(the oldest opset oxport exports) to {MAX_OPSET} (the newest).")
    return since


def validate_symbolic(fn: Any, name: str, where: object) -> None:
    """Check that a symbolic is callable."""
    if not callable(fn):
        raise RegistryError(
            f"{name}: the symbolic from {where} is {fn!r}, which is not callable: register "
            "a function fn(g, *inputs, **attributes) that returns the output Value(s).")


def vet_symbolic(entry: SymbolicEntry) -> None:
    """Check that a symbolic is not written against torch.onnx's modules: at once for
    ``register_custom_op_symbolic``, for a pack's symbolic when it is first looked up (so
    loading a pack does not read the code of every symbolic it has)."""
    if entry.vetted:
        return
    advice = torch_onnx_compat.torch_onnx_advice(entry.fn)
    if advice:
        raise RegistryError(
            f"{entry.name}: the symbolic {getattr(entry.fn, '__qualname__', entry.fn)!r} from "
            f"{entry.provenance} cannot run in oxport. {advice}")
    entry.vetted = True


class ShadowingWarning(UserWarning):
    """A higher layer hides a symbolic of a lower one without ``override=True``."""


def _warn_shadowing(higher: SymbolicEntry, lower: SymbolicEntry) -> None:
    _warn_at(higher.fn, ShadowingWarning(
        f"{higher.provenance} shadows {higher.name} from {lower.provenance}; pass "
        "override=True to do it on purpose and silence this warning."))


def _warn_at(fn: Callable[..., Any], warning: Warning) -> None:
    """Warn at the line that defines ``fn`` (the pack's file, where the fix goes), shown once
    per line as a ``warnings.warn`` from there would be."""
    fn = inspect.unwrap(fn)
    fn = getattr(fn, "__func__", fn)  # a bound method's function
    code = getattr(fn, "__code__", None)
    if code is None:  # a partial or a callable object: no line of its own
        warnings.warn(warning, stacklevel=2)
        return
    module_globals = fn.__globals__
    warnings.warn_explicit(
        warning, type(warning), code.co_filename, code.co_firstlineno,
        module=module_globals.get("__name__"),
        registry=module_globals.setdefault("__warningregistry__", {}),
        module_globals=module_globals)


class OnDemandLoader(Protocol):
    """What a registry asks to load the plugins serving an op before it answers about it
    (:class:`oxport.plugin_manager.PluginManager`: plugins that load on demand)."""

    def load_serving(self, op: str | None) -> None:
        """Load the plugins that declare ``op`` (every plugin not loaded yet for None)."""


class _Lookup:
    """What both a registry and a view over several registries answer from ``entries``."""

    def entries(self, name: str | None = None) -> Iterator[SymbolicEntry]:
        raise NotImplementedError

    def shadowed_by(self, entry: SymbolicEntry) -> list[SymbolicEntry]:
        """The entries that ``entry`` hides at some opset."""
        return [
            other for other in self.entries(entry.name)
            if other is not entry and (other.layer, other.override) < (entry.layer, entry.override)
            and _overlap(other, entry)
        ]


class SymbolicRegistry(_Lookup):
    """Every symbolic, fallback and custom-domain default known to one export session.

    ``loader``, when given, loads the plugins serving an op before the registry answers
    about it (see :class:`OnDemandLoader`)."""

    def __init__(self, loader: OnDemandLoader | None = None) -> None:
        self._loader = loader
        self._entries: dict[str, list[SymbolicEntry]] = {}
        self.fallbacks: dict[str, Any] = {}
        #: fallback name -> who registered it (kept here, not on the plugin's object).
        self.fallback_providers: dict[str, Provenance] = {}
        self.domain_versions: dict[str, int] = {}
        self.domain_providers: dict[str, Provenance] = {}
        self._cases: list[OpCase] = []
        self._case_sources: list[tuple[Provenance, Callable[[], Iterable[OpCase]]]] = []
        self.passes: list[tuple[str, Callable[..., Any], Provenance]] = []
        #: op name -> (its capture kernel, who registered it): see Registrar.register_capture_kernel
        self.capture_kernels: dict[str, tuple[Callable[..., Any], Provenance]] = {}
        #: op name -> (its argument reader, who registered it): see Registrar.register_arguments
        self.argument_readers: dict[str, tuple[Callable[..., Any], Provenance]] = {}
        #: type path -> how it crosses the model boundary: see Registrar.register_io_type
        self.io_types: dict[str, IOType] = {}
        #: task name -> the task and who registered it: see Registrar.register_task
        self.tasks: dict[str, Any] = {}
        #: target name -> (its profile, who registered it): see Registrar.register_target
        self.targets: dict[str, tuple[Any, Provenance]] = {}

    def _demand(self, name: str | None) -> None:
        if self._loader is not None:
            self._loader.load_serving(name)

    # -- registration -----------------------------------------------------
    def add(self, entry: SymbolicEntry) -> None:
        """Add an entry, enforcing the layer and conflict rules."""
        validate_name(entry.name)
        validate_since(entry.since, entry.name)
        validate_symbolic(entry.fn, entry.name, entry.provenance)
        if entry.layer == Layer.RUNTIME:
            vet_symbolic(entry)
        same_name = self._entries.setdefault(entry.name, [])
        for other in same_name:
            if other.layer != entry.layer:
                continue
            if other.provenance == entry.provenance:
                if other.since == entry.since and entry.layer != Layer.RUNTIME:
                    raise RegistryError(
                        f"{entry.name} is registered twice with since={entry.since} by "
                        f"{entry.provenance}: give each variant its own since=."
                    )
                continue
            if entry.override == other.override:
                raise RegistryError(
                    f"Conflict: {entry.name} is claimed by both {other.provenance} and "
                    f"{entry.provenance}, two {entry.layer.name.lower()} plugins. Uninstall "
                    f"or block one of them (e.g. OXPORT_DISABLE_PLUGINS="
                    f"{entry.provenance.plugin}), or register the one that should win with "
                    "override=True."
                )
        if entry.layer == Layer.RUNTIME:
            same_name[:] = [e for e in same_name if not (
                e.layer == Layer.RUNTIME and e.since == entry.since)]
        else:  # in either order: a pack loaded on demand may come after the one hiding it
            lower = [e for e in same_name if e.layer < entry.layer]
            higher = [e for e in same_name if e.layer > entry.layer
                      and e.layer != Layer.RUNTIME and not e.override]
            if lower and not entry.override:
                _warn_shadowing(entry, lower[0])
            if higher:
                _warn_shadowing(higher[0], entry)
        same_name.append(entry)
        self._seal(entry.name)

    def remove(self, name: str, since: int, layer: Layer = Layer.RUNTIME) -> bool:
        """Remove the entry of ``layer`` registered for ``name`` at ``since``."""
        entries = self._entries.get(name, [])
        kept = [e for e in entries if not (e.layer == layer and e.since == since)]
        if len(kept) == len(entries):
            return False
        self._entries[name] = kept
        self._seal(name)
        return True

    def discard(self, provenance: Provenance) -> None:
        """Forget everything ``provenance`` registered (a plugin that broke half-way)."""
        for name, entries in self._entries.items():
            kept = [e for e in entries if e.provenance != provenance]
            if len(kept) != len(entries):
                self._entries[name] = kept
                self._seal(name)
        for name in [n for n, p in self.fallback_providers.items() if p == provenance]:
            del self.fallbacks[name]
            del self.fallback_providers[name]
        for domain in [d for d, p in self.domain_providers.items() if p == provenance]:
            del self.domain_providers[domain]
            del self.domain_versions[domain]
        self._cases = [c for c in self._cases if c.provenance != provenance]
        self._case_sources = [s for s in self._case_sources if s[0] != provenance]
        self.passes = [p for p in self.passes if p[2] != provenance]
        self.capture_kernels = {n: k for n, k in self.capture_kernels.items()
                                if k[1] != provenance}
        self.argument_readers = {n: r for n, r in self.argument_readers.items()
                                 if r[1] != provenance}
        self.io_types = {n: t for n, t in self.io_types.items() if t.provenance != provenance}
        self.tasks = {n: t for n, t in self.tasks.items() if t.provenance != provenance}
        self.targets = {n: t for n, t in self.targets.items() if t[1] != provenance}

    def _seal(self, name: str) -> None:
        """Recompute each entry's last opset within its provider's version ladder."""
        by_provider: dict[tuple[Provenance, bool], list[SymbolicEntry]] = {}
        for entry in self._entries[name]:
            by_provider.setdefault((entry.provenance, entry.override), []).append(entry)
        for ladder in by_provider.values():
            ladder.sort(key=lambda e: e.since)
            for lower, upper in zip(ladder, ladder[1:]):
                lower.until = upper.since - 1
            ladder[-1].until = None

    # -- lookup -----------------------------------------------------------
    def lookup(self, name: str, opset: int) -> SymbolicEntry | None:
        """The symbolic that converts ``name`` at ``opset``, or None."""
        best = self.winner(name, opset)
        if best is not None:
            vet_symbolic(best)
        return best

    def winner(self, name: str, opset: int) -> SymbolicEntry | None:
        """:meth:`lookup`'s entry, not vetted yet (another registry's may hide it)."""
        self._demand(name)
        best: SymbolicEntry | None = None
        for entry in self._entries.get(name, ()):
            if not entry.serves(opset):
                continue
            if best is None or (entry.layer, entry.override) > (best.layer, best.override):
                best = entry
        return best

    def min_opset(self, name: str) -> int | None:
        """The lowest opset at which any symbolic serves ``name``."""
        self._demand(name)
        entries = self._entries.get(name)
        return min(e.since for e in entries) if entries else None

    def registers(self, name: str) -> bool:
        """Whether a symbolic for ``name`` is registered now (no plugin loads on demand)."""
        return bool(self._entries.get(name))

    def registered_names(self) -> list[str]:
        """The ops registered now, without loading the plugins that load on demand."""
        return [name for name, entries in self._entries.items() if entries]

    def entries_from(self, provenance: Provenance) -> list[SymbolicEntry]:
        """The entries ``provenance`` (that very object) registered, loading nothing."""
        return [e for entries in self._entries.values() for e in entries
                if e.provenance is provenance]

    def names(self) -> list[str]:
        self._demand(None)
        return sorted(n for n, entries in self._entries.items() if entries)

    def entries(self, name: str | None = None) -> Iterator[SymbolicEntry]:
        self._demand(name)
        names = [name] if name is not None else self.names()
        for each in names:
            yield from sorted(self._entries.get(each, ()), key=lambda e: (e.layer, e.since))

    @property
    def cases(self) -> list[OpCase]:
        """Every declared test case; lazily declared ones are gathered on first access."""
        self._demand(None)
        while self._case_sources:
            provenance, source = self._case_sources[0]
            try:
                declared = list(source())
            except Exception as exc:
                raise RegistryError(
                    f"The test cases of {provenance} could not be declared: "
                    f"{type(exc).__name__}: {exc}. Fix the pack's cases module.") from exc
            del self._case_sources[0]
            for case in declared:
                self._add_case(case, provenance)
        return self._cases

    def _add_case(self, case: OpCase, provenance: Provenance) -> None:
        validate_name(case.op)
        case = copy.copy(case)
        case.provenance = provenance
        self._cases.append(case)


def _overlap(a: SymbolicEntry, b: SymbolicEntry) -> bool:
    a_hi = a.until if a.until is not None else 10**6
    b_hi = b.until if b.until is not None else 10**6
    return a.since <= b_hi and b.since <= a_hi


class Registrar:
    """What a plugin's registration hooks receive: a registry bound to its provenance."""

    def __init__(self, registry: SymbolicRegistry, provenance: Provenance) -> None:
        self._registry = registry
        self.provenance = provenance

    def register(self, name: str, fn: Callable[..., Any], since: int = MIN_OPSET, *,
                 override: bool = False, accepts_complex: bool = False) -> None:
        """Register ``fn`` as the symbolic of ``name`` from opset ``since`` on;
        ``accepts_complex``: it takes complex tensors, as real pairs."""
        self._registry.add(SymbolicEntry(name, fn, since, self.provenance, override,
                                         accepts_complex=accepts_complex))

    def register_fallback(self, name: str, fallback: Any) -> None:
        """Register a fallback mode (see :class:`oxport.walk.Fallback`) under ``name``."""
        if name in self._registry.fallbacks:
            raise RegistryError(
                f"Fallback {name!r} is registered by both "
                f"{self._registry.fallback_providers[name]} and {self.provenance}: block one "
                "of the two plugins."
            )
        missing = [m for m in FALLBACK_MEMBERS if not hasattr(fallback, m)]
        if missing:
            raise RegistryError(
                f"The fallback {name!r} from {self.provenance} has no {', '.join(missing)}: "
                "implement the oxport.walk.Fallback protocol.")
        self._registry.fallbacks[name] = fallback
        self._registry.fallback_providers[name] = self.provenance

    def register_domain(self, domain: str, version: int = 1) -> None:
        """Declare the default opset version of a custom domain this plugin emits."""
        if not isinstance(domain, str) or not domain or "::" in domain:
            raise RegistryError(f"Malformed domain name {domain!r}: use e.g. 'com.microsoft'.")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RegistryError(f"Domain {domain!r}: version must be an int >= 1, not {version!r}.")
        previous = self._registry.domain_providers.get(domain)
        if previous is not None and previous != self.provenance and \
                self._registry.domain_versions[domain] != version:
            raise RegistryError(
                f"Domain {domain!r} is declared at version {self._registry.domain_versions[domain]} "
                f"by {previous} and at version {version} by {self.provenance}: block one of them "
                "or pick the version with export(custom_opsets=...)."
            )
        self._registry.domain_versions[domain] = version
        self._registry.domain_providers[domain] = self.provenance

    def register_pass(self, name: str, fn: Callable[..., Any]) -> None:
        """Register a graph pass ``fn(graph, context)`` run after conversion."""
        if not callable(fn):
            raise RegistryError(f"Pass {name!r} from {self.provenance} is not callable.")
        self._registry.passes.append((name, fn, self.provenance))

    def register_io_type(self, path: str, flatten: Callable[[Any], Any],
                         unflatten: Callable[[list[Any], Any], Any]) -> None:
        """Declare how values of the type ``path`` (``"transformers.DynamicCache"``, its
        defining module's path) cross the model boundary: see
        :func:`oxport.hookspecs.oxport_register_io_types`."""
        module, _, name = path.rpartition(".")
        if not module or not name.isidentifier():
            raise RegistryError(f"I/O type {path!r} from {self.provenance}: name the type by "
                                "its import path, e.g. 'mylib.cache.Cache'.")
        if not callable(flatten) or not callable(unflatten):
            raise RegistryError(f"I/O type {path!r} from {self.provenance}: flatten and "
                                "unflatten must be callables.")
        previous = self._registry.io_types.get(path)
        if previous is not None and previous.provenance != self.provenance:
            raise RegistryError(f"I/O type {path!r} is declared by both {previous.provenance} "
                                f"and {self.provenance}: block one of the two plugins.")
        self._registry.io_types[path] = IOType(path, flatten, unflatten, self.provenance)

    def register_task(self, task: Any) -> None:
        """Register an export task (an :class:`oxport.tasks.Task`) under its ``name``: see
        :func:`oxport.hookspecs.oxport_register_tasks`."""
        from oxport.tasks import RegisteredTask, validate_task

        name = validate_task(task, self.provenance)
        previous = self._registry.tasks.get(name)
        if previous is not None and previous.provenance != self.provenance:
            raise RegistryError(f"Task {name!r} is registered by both {previous.provenance} "
                                f"and {self.provenance}: block one of the two plugins.")
        self._registry.tasks[name] = RegisteredTask(task, self.provenance)

    def register_target(self, name: str, target: Any) -> None:
        """Register a runtime profile (an :class:`oxport.targets.Target`) that
        ``export(target=name)`` selects: see :func:`oxport.hookspecs.oxport_register_targets`."""
        from oxport.targets import Target

        if not isinstance(target, Target) or target.name != name:
            raise RegistryError(f"Target {name!r} from {self.provenance}: register an "
                                f"oxport.targets.Target named {name!r}.")
        previous = self._registry.targets.get(name)
        if previous is not None and previous[1] != self.provenance:
            raise RegistryError(f"Target {name!r} is registered by both {previous[1]} and "
                                f"{self.provenance}: block one of the two plugins.")
        self._registry.targets[name] = (target, self.provenance)

    def register_capture_kernel(self, name: str, fn: Callable[..., Any]) -> None:
        """Keep the ATen op ``name`` (``aten::lstm.input``) whole when torch.export captures
        a model, where torch would decompose it (an LSTM unrolled over a fixed number of
        steps): ``fn`` takes the op's arguments and returns its outputs, empty, in their
        shapes. Applies where a symbolic serves ``name`` at the export's opset, asked when
        the model calls the op (a pack that declares its ops and serves it loads only then;
        kernels, needed before the capture, come from a plugin loaded with every export)."""
        validate_name(name)
        if not callable(fn):
            raise RegistryError(f"The capture kernel of {name} from {self.provenance} is not "
                                "callable: register fn(*op_arguments) -> outputs.")
        previous = self._registry.capture_kernels.get(name)
        if previous is not None and previous[1] != self.provenance:
            raise RegistryError(
                f"{name} has capture kernels from both {previous[1]} and {self.provenance}: "
                "block one of the two plugins.")
        self._registry.capture_kernels[name] = (fn, self.provenance)

    def register_arguments(self, name: str, fn: Callable[..., Any]) -> None:
        """Read the call arguments of op ``name``'s nodes with ``fn(node, inputs) -> (args,
        kwargs)``, for every symbolic of the op (instead of its inputs and attributes): for
        an op whose node keeps arguments outside its inputs (an autograd Function's)."""
        validate_name(name)
        if not callable(fn):
            raise RegistryError(f"The argument reader of {name} from {self.provenance} is not "
                                "callable: register fn(node, inputs) -> (args, kwargs).")
        previous = self._registry.argument_readers.get(name)
        if previous is not None and previous[1] != self.provenance:
            raise RegistryError(
                f"{name} has argument readers from both {previous[1]} and {self.provenance}: "
                "block one of the two plugins.")
        self._registry.argument_readers[name] = (fn, self.provenance)

    def add_case(self, case: OpCase) -> None:
        """Declare a test case for an op (see :meth:`OpPack.case`)."""
        self._registry._add_case(case, self.provenance)

    def add_cases(self, source: Callable[[], Iterable[OpCase]]) -> None:
        """Declare test cases lazily: ``source()`` returns them when a test runner first
        asks (so exporting never builds test models)."""
        if not callable(source):
            raise RegistryError(f"The case source from {self.provenance} is not callable.")
        self._registry._case_sources.append((self.provenance, source))


class OpPack:
    """A named set of symbolics, declared explicitly and registered by the plugin manager.

    Example::

        pack = oxport.OpPack("my-pack")

        @pack.symbolic("custom_ops::foo_forward", since=9)
        def foo_forward(g, x):
            return g.op("custom_domain::Foo", x)

        pack.case("custom_ops::foo_forward", MyModel(), (2, 3))

    Expose ``pack`` as an ``oxport`` entry point; nothing registers on import.
    ``cases="my_pack.cases"`` names a module of ``pack.case(...)`` calls that is
    imported only when a test runner asks for the cases, so that exporting never
    builds test models.
    """

    def __init__(self, name: str, *, domains: dict[str, int] | None = None,
                 cases: str | None = None) -> None:
        self.name = name
        self.domains = dict(domains or {})
        self.cases_module = cases
        self._symbolics: list[DeclaredSymbolic] = []
        self._capture_kernels: dict[str, Callable[..., Any]] = {}
        self._argument_readers: dict[str, Callable[..., Any]] = {}
        self._cases: list[OpCase] = []

    def symbolic(self, name: str, since: int = MIN_OPSET, *, override: bool = False,
                 accepts_complex: bool = False
                 ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: ``fn`` converts op ``name`` from opset ``since`` on;
        ``accepts_complex``: it takes complex tensors, carried as real pairs (a trailing axis
        of 2), which the walker declines for every other symbolic."""
        validate_name(name)
        validate_since(since, name)

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            validate_symbolic(fn, name, f"pack {self.name!r}")
            self._symbolics.append(DeclaredSymbolic(name, fn, since, override, accepts_complex))
            return fn

        return decorate

    def capture_kernel(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: ``fn`` stands for op ``name`` while torch.export captures, keeping it
        whole (see :meth:`Registrar.register_capture_kernel`)."""
        validate_name(name)

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._capture_kernels[name] = fn
            return fn

        return decorate

    def arguments(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: ``fn(node, inputs) -> (args, kwargs)`` reads the call arguments of op
        ``name``'s nodes (see :meth:`Registrar.register_arguments`)."""
        validate_name(name)

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._argument_readers[name] = fn
            return fn

        return decorate

    def alias(self, fn: Callable[..., Any], *names: str, since: int = MIN_OPSET) -> None:
        """Register one function for several op names (e.g. in-place variants)."""
        for name in names:
            self.symbolic(name, since)(fn)

    def case(self, op: str | Iterable[str], model: Any, *inputs: Any, **options: Any) -> None:
        """Declare a test case: ``model(*inputs)`` must export ``op`` and match eager.

        ``model`` is a module, a function, or an ``nn.Module`` subclass taking no
        arguments, built when the case runs (so loading the pack does not build it).

        ``inputs`` are tensors, shape tuples (random float32), or one zero-argument
        callable returning the input tuple. ``options`` are :class:`OpCase` fields.
        """
        for name in [op] if isinstance(op, str) else op:
            self._cases.append(OpCase(validate_name(name), model, inputs, **options))

    def symbolics(self) -> list[DeclaredSymbolic]:
        return list(self._symbolics)

    def declared_cases(self) -> list[OpCase]:
        """Every case declared, importing the ``cases`` module first if there is one."""
        if self.cases_module is not None:
            importlib.import_module(self.cases_module)
        return list(self._cases)

    def register_into(self, registrar: Registrar) -> None:
        """Register everything this pack declares (its cases lazily)."""
        for domain, version in self.domains.items():
            registrar.register_domain(domain, version)
        for name, fn, since, override, accepts_complex in self._symbolics:
            registrar.register(name, fn, since, override=override,
                               accepts_complex=accepts_complex)
        for name, fn in self._capture_kernels.items():
            registrar.register_capture_kernel(name, fn)
        for name, fn in self._argument_readers.items():
            registrar.register_arguments(name, fn)
        registrar.add_cases(self.declared_cases)

    @hookimpl
    def oxport_register_symbolics(self, registry: Registrar) -> None:
        self.register_into(registry)

    def __repr__(self) -> str:
        return f"<OpPack {self.name}: {len(self._symbolics)} symbolics>"


class RegistryView(_Lookup):
    """Several registries read as one (the loaded plugins plus runtime registrations)."""

    def __init__(self, *registries: SymbolicRegistry) -> None:
        self.registries = registries

    def lookup(self, name: str, opset: int) -> SymbolicEntry | None:
        found = [e for r in self.registries if (e := r.winner(name, opset)) is not None]
        best = max(found, key=lambda e: (e.layer, e.override), default=None)
        if best is not None:
            vet_symbolic(best)
        return best

    def min_opset(self, name: str) -> int | None:
        mins = [m for r in self.registries if (m := r.min_opset(name)) is not None]
        return min(mins, default=None)

    def names(self) -> list[str]:
        return sorted({n for r in self.registries for n in r.names()})

    def entries(self, name: str | None = None) -> Iterator[SymbolicEntry]:
        for registry in self.registries:
            yield from registry.entries(name)

    @property
    def fallbacks(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for registry in self.registries:
            merged.update(registry.fallbacks)
        return merged

    @property
    def fallback_providers(self) -> dict[str, Provenance]:
        merged: dict[str, Provenance] = {}
        for registry in self.registries:
            merged.update(registry.fallback_providers)
        return merged

    @property
    def domain_versions(self) -> dict[str, int]:
        merged: dict[str, int] = {}
        for registry in self.registries:
            merged.update(registry.domain_versions)
        return merged

    @property
    def passes(self) -> list[tuple[str, Callable[..., Any], Provenance]]:
        return [p for registry in self.registries for p in registry.passes]

    @property
    def capture_kernels(self) -> dict[str, Callable[..., Any]]:
        return {name: fn for registry in self.registries
                for name, (fn, _) in registry.capture_kernels.items()}

    @property
    def argument_readers(self) -> dict[str, Callable[..., Any]]:
        return {name: fn for registry in self.registries
                for name, (fn, _) in registry.argument_readers.items()}

    @property
    def io_types(self) -> dict[str, IOType]:
        return {path: t for registry in self.registries for path, t in registry.io_types.items()}

    @property
    def tasks(self) -> dict[str, Any]:
        return {name: t for registry in self.registries for name, t in registry.tasks.items()}

    @property
    def targets(self) -> dict[str, Any]:
        return {name: t for registry in self.registries for name, (t, _) in
                registry.targets.items()}

    @property
    def cases(self) -> list[OpCase]:
        return [c for registry in self.registries for c in registry.cases]
