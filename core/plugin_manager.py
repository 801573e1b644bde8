"""The plugin manager: loading plugins from the ``oxport`` entry-point group into a registry.

This module is the manager's public API (``oxport.plugin_manager``): :func:`load` returns
the :class:`PluginManager` of a selection, :func:`reset` looks for installed plugins again,
:func:`runtime_registry` holds ``register_custom_op_symbolic``'s registrations. All three
act on the :class:`PluginSession` that :func:`current_session` returns; a test isolates
itself with :func:`session_scope` (the ``oxport_plugin_session`` pytest fixture).
``oxport.plugins``, the package of the built-in mode plugins, re-exports these names for
code written against ``oxport.plugins.load()``.

Controls (environment variables, or the same as arguments of :func:`load` and
``oxport.export``):

* ``OXPORT_DISABLE_PLUGIN_AUTOLOAD=1`` (``autoload_plugins=False``) -- load no
  entry point except those the allow-list names;
* ``OXPORT_PLUGINS=a,b`` (``plugins=[...]``) -- load only these entry points;
* ``OXPORT_DISABLE_PLUGINS=a,b`` (``disable_plugins=[...]``) -- never load these;
* ``OXPORT_STRICT_PLUGINS=1`` (``strict=True``) -- a broken plugin raises
  :class:`~oxport.errors.PluginError` instead of being reported.

A plugin whose distribution declares its ops (entry-point group ``oxport.ops``) loads when
an export first meets one of them. ``oxport plugins --sync-pyproject`` writes that block
of a ``pyproject.toml``; in an editable install, an op its block misses still loads the
plugin, with a warning naming the command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import email.parser
import importlib
import json
import logging
import os
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pluggy

from oxport import hookspecs
from oxport.advice import PluginError, RegistryError, how_to_set
from oxport.registry import Layer, Provenance, Registrar, SymbolicRegistry, vet_symbolic

if sys.version_info >= (3, 12):
    from importlib import metadata as importlib_metadata
else:
    import importlib_metadata

log = logging.getLogger("oxport.plugins")

ENTRY_POINT_GROUP = "oxport"
#: Entry points named after an op (its namespace then a dot: ``aten.conv2d``) whose value is
#: the object an ``oxport`` entry point of the same distribution names
#: (``"aten.conv2d" = "oxport.opsets.nn:pack"``): that plugin loads only when an export
#: meets one of the ops it declares.
OPS_ENTRY_POINT_GROUP = "oxport.ops"
BUILTIN_DISTRIBUTION = "oxport"
#: What rewrites a pyproject.toml's ``oxport.ops`` block from the ops its packs register.
SYNC_COMMAND = "oxport plugins --sync-pyproject"
#: What a plugin that loads on demand may register, and the hooks it may implement.
_ON_DEMAND_KINDS = ("symbolics", "domains", "passes")
_ON_DEMAND_HOOKS = ("oxport_register_symbolics", "oxport_register_domains",
                    "oxport_register_passes", "oxport_graph_boundary")
_REGISTRATION_HOOKS = (
    "oxport_register_domains",
    "oxport_register_symbolics",
    "oxport_register_fallbacks",
    "oxport_register_passes",
    "oxport_register_io_types",
    "oxport_register_tasks",
    "oxport_register_targets",
)


def hook_names() -> list[str]:
    """Every hook a plugin may implement."""
    return sorted(n for n in dir(hookspecs) if n.startswith("oxport_"))


@dataclasses.dataclass
class PluginInfo:
    """What ``oxport plugins`` shows about one plugin."""

    name: str
    distribution: str | None
    version: str | None
    layer: Layer
    value: str = ""
    error: str | None = None
    #: The full traceback of the exception that broke it (``oxport plugins --verbose``).
    traceback: str | None = None
    registered: dict[str, int] = dataclasses.field(default_factory=dict)
    ops: list[str] = dataclasses.field(default_factory=list)
    #: It declares its ops (group ``oxport.ops``) and loads when one of them is met.
    on_demand: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def provenance(self) -> Provenance:
        return Provenance(self.name, self.distribution, self.version, self.layer)

    def to_json(self, verbose: bool = False) -> dict[str, Any]:
        """The fields as JSON, the traceback only when ``verbose``."""
        data = dataclasses.asdict(self)
        data["layer"] = self.layer.name.lower()
        if not verbose:
            del data["traceback"]
        return data


@dataclasses.dataclass(frozen=True)
class PluginSelection:
    """Which plugins to load; see the module docstring."""

    autoload: bool = True
    allow: tuple[str, ...] | None = None
    block: tuple[str, ...] = ()
    strict: bool = False
    extra: tuple[Any, ...] = ()

    @classmethod
    def resolve(cls, autoload: bool | None = None, allow: Iterable[str] | str | None = None,
                block: Iterable[str] | str | None = None, strict: bool | None = None,
                extra: Sequence[Any] = ()) -> PluginSelection:
        """Combine explicit arguments with the environment (arguments win; block-lists add)."""
        env = os.environ
        if autoload is None:
            autoload = env.get("OXPORT_DISABLE_PLUGIN_AUTOLOAD", "") in ("", "0")
        if allow is None and env.get("OXPORT_PLUGINS"):
            allow = env["OXPORT_PLUGINS"]
        allowed = _names(allow, "plugins") if allow is not None else None
        blocked = set(_names(env.get("OXPORT_DISABLE_PLUGINS", ""), "OXPORT_DISABLE_PLUGINS"))
        blocked.update(_names(block or (), "disable_plugins"))
        if strict is None:
            strict = env.get("OXPORT_STRICT_PLUGINS", "") not in ("", "0")
        return cls(bool(autoload), allowed, tuple(sorted(blocked)), bool(strict), tuple(extra))

    def admits(self, name: str) -> bool:
        """Whether the entry point called ``name`` loads under this selection."""
        if name in self.block:
            return False
        return self.autoload if self.allow is None else name in self.allow

    def why_not(self, name: str) -> str:
        """The setting that keeps the entry point ``name`` from loading (it must not load)."""
        if name in self.block:
            return f"{how_to_set('disable_plugins')} or OXPORT_DISABLE_PLUGINS blocks it"
        if self.allow is not None:
            return f"{how_to_set('plugins')} or OXPORT_PLUGINS does not list it"
        return "plugin autoload is off (autoload_plugins=False, OXPORT_DISABLE_PLUGIN_AUTOLOAD)"


def _names(names: Iterable[str] | str, what: str) -> tuple[str, ...]:
    """Plugin names from a comma-separated string or an iterable of strings."""
    if isinstance(names, str):
        return tuple(part.strip() for part in names.split(",") if part.strip())
    result = tuple(names)
    for name in result:
        if not isinstance(name, str) or not name.strip():
            raise PluginError(
                f"{what}: plugin names are non-empty strings (entry-point names as "
                f"`oxport plugins` lists them), not {name!r}.")
    return result


class _HookManager(pluggy.PluginManager):
    """pluggy's manager, skipping dunder attributes when it looks for hook implementations:
    it inspects every attribute of a plugin (an OpPack has ~40, most of them dunders), which
    was a third of the plugins' loading time."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if name.startswith("__"):
            return None
        return super().parse_hookimpl_opts(plugin, name)


class PluginManager:
    """Loads plugins and fills a :class:`SymbolicRegistry` from their hooks.

    The registry asks it (its loader, see :meth:`load_serving`) to load the plugins that
    declare an op before it answers about that op."""

    def __init__(self, selection: PluginSelection | None = None) -> None:
        self.selection = selection or PluginSelection.resolve()
        self.pm = _HookManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.registry = SymbolicRegistry(loader=self)
        self.plugins: list[PluginInfo] = []
        self.entry_points: list[FoundEntryPoint] = []
        #: plugin name -> (its entry point, its PluginInfo, the ops it declares), not loaded yet
        self._deferred: dict[str, tuple[FoundEntryPoint, PluginInfo, frozenset[str]]] = {}
        self._declared_by: dict[str, list[str]] = {}  # op -> deferred plugins declaring it
        self._demand_lock = threading.RLock()

    # -- loading ----------------------------------------------------------
    def load(self, entry_points: list[FoundEntryPoint] | None = None,
             declarations: list[FoundEntryPoint] | None = None) -> SymbolicRegistry:
        """Load every selected plugin (of ``entry_points``, by default the installed ones),
        register it, and check hook names. A plugin that ``declarations`` (entry points of
        the ``oxport.ops`` group) give ops for loads when the registry is first asked about
        one of them."""
        if entry_points is None:
            entry_points, declarations = installed_entry_points()
        available = self.entry_points = _sorted(entry_points)
        declared = _declared_ops(available, declarations or ())
        if self.selection.autoload or self.selection.allow:
            _check_duplicates(available)
            for entry_point in available:
                if entry_point.name in declared:
                    self._defer(entry_point, declared[entry_point.name])
                else:
                    self._load_entry_point(entry_point)
        for index, plugin in enumerate(self.selection.extra):
            name = getattr(plugin, "name", None) or getattr(plugin, "__name__", f"extra-{index}")
            self._add(plugin, PluginInfo(str(name), None, None, Layer.INSTALLED))
        # A plugin loaded now that hides ops of one loaded on demand is reported now.
        for name in [n for n in self.registry.registered_names() if n in self._declared_by]:
            self.load_serving(name)
        self.check_pending()
        self._check_selection(available)
        return self.registry

    def _info(self, entry_point: FoundEntryPoint) -> PluginInfo | None:
        """The entry point's PluginInfo, or None when it is not selected or already seen (the
        same distribution twice on sys.path)."""
        name = entry_point.name
        if not self.selection.admits(name):
            log.debug("plugin %s not selected", name)
            return None
        if any(p.name == name for p in self.plugins):
            return None
        return PluginInfo(name, entry_point.distribution, entry_point.version,
                          entry_point.layer, entry_point.value)

    def _load_entry_point(self, entry_point: FoundEntryPoint,
                          info: PluginInfo | None = None) -> None:
        info = info or self._info(entry_point)
        if info is None:
            return
        try:
            plugin = entry_point.load()
        except Exception as exc:  # a third party's import may raise anything
            self._broken(info, "import", exc)
            return
        self._add(plugin, info)

    def _defer(self, entry_point: FoundEntryPoint, ops: frozenset[str]) -> None:
        info = self._info(entry_point)
        if info is None:
            return
        info.ops, info.on_demand = sorted(ops), True
        self.plugins.append(info)
        self._deferred[info.name] = (entry_point, info, ops)
        for op in ops:
            self._declared_by.setdefault(op, []).append(info.name)

    def load_serving(self, op: str | None) -> None:
        """Load the deferred plugins that declare ``op`` (all of them for None): what the
        registry calls before it answers about ``op``.

        An op that no plugin declares nor registers loads the deferred plugins of editable
        installs, whose declarations may be older than their code."""
        if not self._deferred:
            return
        if op is None:
            self._load_deferred(list(self._deferred))
        elif op in self._declared_by:
            self._load_deferred(self._declared_by.get(op, []))
        elif not self.registry.registers(op):
            stale = [name for name, (entry_point, _, _) in self._deferred.items()
                     if entry_point.editable]
            if stale:
                self._load_deferred(stale)

    def _load_deferred(self, names: list[str]) -> None:
        with self._demand_lock:
            for name in list(names):
                pending = self._deferred.pop(name, None)
                if pending is None:
                    continue
                entry_point, info, declared = pending
                try:
                    self._load_entry_point(entry_point, info)
                    if info.ok:
                        self._check_declared(entry_point, info, declared)
                finally:
                    # Only now: another thread asking about these ops waits for the lock
                    # instead of reading the registry before the plugin is in it.
                    for each in declared:
                        self._declared_by[each].remove(name)
                        if not self._declared_by[each]:
                            del self._declared_by[each]

    def _check_declared(self, entry_point: FoundEntryPoint, info: PluginInfo,
                        declared: frozenset[str]) -> None:
        """A plugin loaded on demand registers the symbolics it declares, the default
        versions of the domains they emit and passes over what they emit (which run in the
        exports that load it), and nothing else: whatever else it registered would be
        missed by exports that never load it. An editable install's undeclared symbolics
        are only a warning: its installed declarations may predate its code."""
        problems = []
        undeclared = sorted(set(info.ops) - declared)
        if undeclared and entry_point.editable:
            log.warning("plugin %r registers %s, which the installed %s entry points of %s do "
                        "not declare, so it loaded for any op no plugin declares: run `%s` in "
                        "its source folder, then `pip install --no-deps -e .`", info.name,
                        ", ".join(undeclared), OPS_ENTRY_POINT_GROUP,
                        info.distribution or "its distribution", SYNC_COMMAND)
        elif undeclared:
            problems.append(f"symbolics for {', '.join(undeclared)}, which it does not "
                            f"declare (`{SYNC_COMMAND}` rewrites the declarations of a "
                            f"pyproject.toml; `oxport plugins --declare-ops {info.name}` "
                            "prints every entry to declare)")
        others = sorted(kind for kind in info.registered if kind not in _ON_DEMAND_KINDS)
        hooks = sorted(caller.name for caller in self.pm.get_hookcallers(
            self.pm.get_plugin(info.name)) or () if caller.name not in _ON_DEMAND_HOOKS)
        if others or hooks:
            problems.append(f"{' and '.join(others + hooks)}, which only a plugin loaded with "
                            f"every export can provide (drop its {OPS_ENTRY_POINT_GROUP} "
                            "entries, or move these to another plugin)")
        stale = sorted(declared - set(info.ops))
        if stale:
            log.warning("plugin %r declares %s in %s but registers no symbolic for them: drop "
                        "those entries (`%s`)", info.name, ", ".join(stale),
                        OPS_ENTRY_POINT_GROUP, SYNC_COMMAND)
        if problems:
            self.registry.discard(info.provenance)
            self.pm.unregister(name=info.name)
            info.error = "registers " + "; and ".join(problems)
            raise RegistryError(
                f"Plugin {info.name!r} ({info.distribution or 'not installed'}) loads on "
                f"demand, since it declares ops in the entry-point group "
                f"{OPS_ENTRY_POINT_GROUP!r}, but it {info.error}.")

    def load_deferred(self) -> None:
        """Load every plugin that would load on demand (listing or checking them all)."""
        self.load_serving(None)

    def check_symbolics(self) -> None:
        """Vet every loaded symbolic as a lookup would (``oxport plugins --check``): a plugin
        with one written against torch.onnx's modules is reported broken."""
        refused: dict[Provenance, RegistryError] = {}
        for entry in self.registry.entries():
            try:
                vet_symbolic(entry)
            except RegistryError as exc:
                refused.setdefault(entry.provenance, exc)
        for info in list(self.plugins):
            if info.ok and info.provenance in refused:
                self._broken(info, "symbolic check", refused[info.provenance])

    def _add(self, plugin: Any, info: PluginInfo) -> None:
        if info not in self.plugins:
            self.plugins.append(info)
        try:
            self.pm.register(plugin, name=info.name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            self._broken(info, "register", exc)
            return
        problem = _hook_problem(self.pm, plugin)
        if problem:
            self._broken(info, "hook check", PluginError(problem))
            return
        provenance = info.provenance
        registrar = Registrar(self.registry, provenance)
        for hook_name in _REGISTRATION_HOOKS:
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                if impl.plugin_name != info.name:
                    continue
                try:
                    impl.function(registry=registrar)
                except RegistryError as exc:
                    # Malformed registrations and conflicts are for a person to fix: always loud.
                    self.registry.discard(info.provenance)
                    raise RegistryError(
                        f"Plugin {info.name!r} ({info.distribution or 'not installed'}): {exc}"
                    ) from exc
                except Exception as exc:  # a third party's hook may raise anything
                    self._broken(info, hook_name, exc)
                    return
        self._summarize(info, provenance)

    def _summarize(self, info: PluginInfo, provenance: Provenance) -> None:
        """Count what ``provenance`` (the object its registrar stamped) registered."""
        registry = self.registry
        mine = registry.entries_from(provenance)
        ops = sorted({e.name for e in mine})
        counts = {
            "symbolics": len(mine),
            "fallbacks": sum(1 for p in registry.fallback_providers.values() if p is provenance),
            "domains": sum(1 for p in registry.domain_providers.values() if p is provenance),
            "passes": sum(1 for p in registry.passes if p[2] is provenance),
            "capture kernels": sum(1 for _, p in registry.capture_kernels.values()
                                   if p is provenance),
            "I/O types": sum(1 for io_type in registry.io_types.values()
                             if io_type.provenance is provenance),
            "tasks": sum(1 for task in registry.tasks.values() if task.provenance is provenance),
            "targets": sum(1 for _, p in registry.targets.values() if p is provenance),
        }
        info.registered = {k: n for k, n in counts.items() if n}
        info.ops = ops

    def _broken(self, info: PluginInfo, stage: str, exc: BaseException) -> None:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        info.error = f"{stage} failed: {detail}"
        info.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if info not in self.plugins:
            self.plugins.append(info)
        self.registry.discard(info.provenance)
        if self.pm.get_plugin(info.name) is not None:
            self.pm.unregister(name=info.name)
        broken = (f"oxport plugin {info.name!r} from "
                  f"{info.distribution or 'no installed distribution'} is broken ({info.error})")
        fix = f"Fix or uninstall it, or block it with OXPORT_DISABLE_PLUGINS={info.name}."
        if self.selection.strict:
            raise PluginError(f"{broken}; strict mode (OXPORT_STRICT_PLUGINS) stops the load "
                              f"here. {fix}") from exc
        log.warning("%s; the other plugins still work. %s", broken, fix)

    def check_pending(self) -> None:
        """Raise :class:`PluginError` if a registered plugin implements an unknown hook."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(
                f"{exc}: {_unknown_hint(str(exc))}valid hook names are "
                f"{', '.join(hook_names())}.") from exc

    def _check_selection(self, available: list[FoundEntryPoint]) -> None:
        installed = sorted({ep.describe() for ep in available})
        if self.selection.allow is not None:
            loaded = {p.name for p in self.plugins}
            missing = [n for n in self.selection.allow
                       if n not in loaded and n not in self.selection.block]
            if missing:
                raise PluginError(
                    f"Plugins {', '.join(missing)} were asked for ({how_to_set('plugins')} "
                    "or OXPORT_PLUGINS) but are not installed. Installed plugins: "
                    f"{', '.join(installed) or 'none'}.")
        names = {ep.name for ep in available}
        unknown = [n for n in self.selection.block if n not in names]
        if unknown:
            log.warning("OXPORT_DISABLE_PLUGINS / disable_plugins name plugins that are not "
                        "installed: %s. Installed plugins: %s.", ", ".join(unknown),
                        ", ".join(installed) or "none")


@dataclasses.dataclass(frozen=True)
class InstalledPlugin:
    """An installed entry point, read from its distribution's metadata without importing it."""

    name: str
    distribution: str | None
    version: str | None
    layer: Layer
    value: str
    #: Whether the current selection (environment variables) loads it.
    enabled: bool

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["layer"] = self.layer.name.lower()
        return data


def discover(selection: PluginSelection | None = None) -> list[InstalledPlugin]:
    """Every installed plugin, built-in ones first, without importing any (nor torch)."""
    selection = selection or PluginSelection.resolve()
    return [InstalledPlugin(ep.name, ep.distribution, ep.version, ep.layer, ep.value,
                            selection.admits(ep.name))
            for ep in _sorted(installed_entry_points()[0])]


@dataclasses.dataclass(frozen=True)
class FoundEntryPoint:
    """An entry point of the ``oxport`` or ``oxport.ops`` group, with the name and version of
    the distribution that declares it (read once per distribution)."""

    entry_point: importlib_metadata.EntryPoint
    distribution: str | None = None
    version: str | None = None
    #: Its distribution is an editable install, whose code may be newer than its declarations.
    editable: bool = False

    @property
    def name(self) -> str:
        return self.entry_point.name

    @property
    def value(self) -> str:
        return self.entry_point.value

    @property
    def layer(self) -> Layer:
        return Layer.BUILTIN if self.distribution == BUILTIN_DISTRIBUTION else Layer.INSTALLED

    def load(self) -> Any:
        """Import the object the entry point names."""
        return self.entry_point.load()

    def describe(self) -> str:
        return f"{self.name} ({self.distribution})" if self.distribution else self.name


def _sorted(entry_points: Iterable[FoundEntryPoint]) -> list[FoundEntryPoint]:
    """Built-in plugins first, so an installed pack's shadowing is seen and reported."""
    return sorted(entry_points, key=lambda e: (e.distribution != BUILTIN_DISTRIBUTION, e.name))


def _check_duplicates(available: list[FoundEntryPoint]) -> None:
    """Two distributions exposing one entry-point name cannot both be addressed."""
    seen: dict[str, FoundEntryPoint] = {}
    for entry_point in available:
        other = seen.setdefault(entry_point.name, entry_point)
        if other is not entry_point and other.distribution != entry_point.distribution:
            raise PluginError(
                f"Two plugins are named {entry_point.name!r}: {other.value} from "
                f"{other.distribution} and {entry_point.value} from "
                f"{entry_point.distribution}. Uninstall one of the two distributions.")


def _hook_problem(pm: pluggy.PluginManager, plugin: Any) -> str:
    """Why ``plugin``'s hooks are unusable (unknown or unmarked hook names), or ''."""
    problems = []
    for caller in pm.get_hookcallers(plugin) or ():
        if not caller.has_spec():
            problems.append(f"{caller.name!r} is not an oxport hook "
                            f"({_unknown_hint(caller.name)}see oxport.hookspecs)")
    known = set(hook_names())
    for attr in dir(plugin):
        if not attr.startswith("oxport_") or not callable(getattr(plugin, attr, None)) or \
                pm.parse_hookimpl_opts(plugin, attr) is not None:
            continue
        if attr in known:
            problems.append(f"{attr} is not marked with @oxport.hookimpl, so it never runs")
        else:  # misspelled and unmarked: pluggy never sees it
            problems.append(f"{attr!r} is not an oxport hook ({_unknown_hint(attr)}see "
                            "oxport.hookspecs) nor marked with @oxport.hookimpl")
    if not problems:
        return ""
    return "; ".join(problems) + f". Valid hook names: {', '.join(hook_names())}."


def _unknown_hint(text: str) -> str:
    for word in text.replace("'", " ").split():
        if word.startswith("oxport_") and word not in hook_names():
            close = difflib.get_close_matches(word, hook_names(), n=1)
            if close:
                return f"did you mean {close[0]!r}? "
    return ""


def installed_entry_points() -> tuple[list[FoundEntryPoint], list[FoundEntryPoint]]:
    """The installed ``oxport`` entry points and ``oxport.ops`` declarations.

    As ``importlib.metadata.entry_points()``, the first copy of a distribution on
    ``sys.path`` wins. Only the entries of ``sys.path`` that exist are searched (one that
    does not is tried as a zip file, which imports zipp), and only the distributions whose
    ``entry_points.txt`` mentions oxport are parsed."""
    plugins: list[FoundEntryPoint] = []
    declarations: list[FoundEntryPoint] = []
    path = [entry for entry in sys.path if not entry or os.path.exists(entry)]
    for dist in importlib_metadata.distributions(path=path):
        text = dist.read_text("entry_points.txt")
        if not text or ENTRY_POINT_GROUP not in text:
            continue
        name, version = _name_and_version(dist)
        if name is None or not _first_copy(dist, name, version, path):
            continue
        editable = _is_editable(dist, name)
        for entry_point in dist.entry_points:
            if entry_point.group == OPS_ENTRY_POINT_GROUP:
                declarations.append(FoundEntryPoint(entry_point, name, version, editable))
            elif entry_point.group == ENTRY_POINT_GROUP:
                plugins.append(FoundEntryPoint(entry_point, name, version, editable))
    return plugins, declarations


def _name_and_version(dist: importlib_metadata.Distribution) -> tuple[str | None, str | None]:
    """From the metadata's headers only: ``dist.metadata`` parses the long description too,
    and first imports email's policy machinery."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if not text:
        return None, None
    headers = email.parser.HeaderParser().parsestr(text, headersonly=True)
    return headers.get("Name"), headers.get("Version")


def _first_copy(dist: importlib_metadata.Distribution, name: str, version: str | None,
                path: list[str]) -> bool:
    """Whether ``dist`` is the first copy of its distribution on ``path`` (a stale build
    beside an install: the first is the one importlib.metadata sees)."""
    first = next(iter(importlib_metadata.distributions(name=name, path=path)), None)
    return first is None or (
        first.locate_file("") == dist.locate_file("") and _name_and_version(first)[1] == version)


def _is_editable(dist: importlib_metadata.Distribution, name: str) -> bool:
    """An editable install (PEP 610), or oxport itself run from its source checkout."""
    if name == BUILTIN_DISTRIBUTION and (Path(__file__).parents[1] / "pyproject.toml").is_file():
        return True
    direct_url = dist.read_text("direct_url.json")
    try:
        return bool(direct_url and json.loads(direct_url).get("dir_info", {}).get("editable"))
    except ValueError:
        return False


def entry_name_of_op(op: str) -> str:
    """``aten::max.other`` -> ``aten.max.other``: entry-point names are ``[\\w.-]+``."""
    return op.replace("::", ".", 1)


def op_of_entry_name(name: str) -> str:
    """The op an ``oxport.ops`` entry point is named after (``aten.max.other`` ->
    ``aten::max.other``; a namespace has no dot). ``aten::max.other`` is taken as is."""
    return name if "::" in name else name.replace(".", "::", 1)


def _declared_ops(plugins: list[FoundEntryPoint],
                  declarations: Iterable[FoundEntryPoint]) -> dict[str, frozenset[str]]:
    """Plugin name -> the ops its distribution declares for it in ``oxport.ops`` (entries
    whose value is the object the plugin's ``oxport`` entry point names)."""
    served_by = {(entry_point.distribution, entry_point.value.strip()): entry_point.name
                 for entry_point in plugins}
    declared: dict[str, set[str]] = {}
    for entry in declarations:
        dist, value = entry.distribution, entry.value.strip()
        plugin = served_by.get((dist, value))
        if plugin is None:
            log.warning("%s declares %s in %s for %s, which none of its %s entry points "
                        "names: drop the entry or fix its value", dist or "an entry point",
                        entry.name, OPS_ENTRY_POINT_GROUP, value, ENTRY_POINT_GROUP)
        else:
            declared.setdefault(plugin, set()).add(op_of_entry_name(entry.name))
    return {name: frozenset(ops) for name, ops in declared.items()}


# -- the session ------------------------------------------------------------------
class PluginSession:
    """The plugins a process exports with: the loaded :class:`PluginManager` of each
    selection (loaded once, until :meth:`reset`) and the registry of runtime registrations
    (``register_custom_op_symbolic``), shared by every selection.

    :func:`current_session` returns the one in use; :func:`session_scope` swaps it."""

    def __init__(self) -> None:
        self.runtime = SymbolicRegistry()
        self._lock = threading.Lock()
        self._current: dict[PluginSelection, PluginManager] = {}  # each selection's manager now
        # Every manager loaded, by selection and the installed entry points it saw: after a
        # reset() that changed nothing (or an install then uninstall), a selection gets its
        # earlier manager back, so registry entries keep their identity.
        self._loaded: dict[tuple[PluginSelection, tuple[Any, ...]], PluginManager] = {}
        self._installed: tuple[Any, ...] | None = None  # what identifies the last scan

    def manager_for(self, selection: PluginSelection) -> PluginManager:
        """The plugin manager for ``selection``, loaded once (see :meth:`reset`)."""
        with self._lock:
            manager = self._current.get(selection)
            if manager is None:
                entry_points = declarations = None
                if self._installed is None:
                    entry_points, declarations = installed_entry_points()
                    self._installed = _fingerprint(entry_points + declarations)
                key = (selection, self._installed)
                manager = self._loaded.get(key)
                if manager is None or not all(p.ok for p in manager.plugins):
                    manager = PluginManager(selection)
                    manager.load(entry_points, declarations)
                    self._loaded[key] = manager
                self._current[selection] = manager
            return manager

    def reset(self) -> None:
        """Look for installed plugins again; runtime registrations are kept."""
        with self._lock:
            self._current.clear()
            self._installed = None
        importlib.invalidate_caches()  # new files on sys.path, and the metadata path cache


_session = PluginSession()


def current_session() -> PluginSession:
    """The session :func:`load`, :func:`reset` and :func:`runtime_registry` act on."""
    return _session


@contextlib.contextmanager
def session_scope(session: PluginSession | None = None) -> Iterator[PluginSession]:
    """Make ``session`` (a new, empty one by default) the current session inside the block,
    then restore the previous one: plugins loaded, installed and registered at runtime
    inside do not leak out (the ``oxport_plugin_session`` pytest fixture)."""
    global _session
    previous, _session = _session, session or PluginSession()
    try:
        yield _session
    finally:
        _session = previous


def runtime_registry() -> SymbolicRegistry:
    """The current session's registry of runtime registrations, shared by every selection."""
    return current_session().runtime


def load(autoload: bool | None = None, allow: Iterable[str] | str | None = None,
         block: Iterable[str] | str | None = None, strict: bool | None = None,
         extra: Sequence[Any] = ()) -> PluginManager:
    """The plugin manager for a selection, loaded once and cached (see :func:`reset`)."""
    return manager_for(PluginSelection.resolve(autoload, allow, block, strict, extra))


def manager_for(selection: PluginSelection) -> PluginManager:
    """The current session's plugin manager for ``selection`` (see :func:`reset`)."""
    return current_session().manager_for(selection)


def unloaded_providers(selection: PluginSelection, op: str) -> list[str]:
    """The installed plugins that register ``op`` but that ``selection`` does not load,
    each as ``"name, which is not loaded: the setting that keeps it out"``."""
    if all(plugin.enabled for plugin in discover(selection)):
        return []
    everything = manager_for(PluginSelection())
    return [f"{info.name}, which is not loaded: {selection.why_not(info.name)}"
            for info in everything.plugins
            if op in info.ops and not selection.admits(info.name)]


def reset() -> None:
    """Look for installed plugins again (after installing or uninstalling a pack); runtime
    registrations (``register_custom_op_symbolic``) are kept."""
    current_session().reset()


def _fingerprint(entry_points: list[FoundEntryPoint]) -> tuple[Any, ...]:
    """What identifies a set of installed entry points."""
    return tuple(sorted((ep.entry_point.group, ep.name, ep.value, ep.distribution or "",
                         ep.version or "") for ep in entry_points))


# -- the oxport.ops block of a pyproject.toml ----------------------------------------
_OPS_HEADER = f'[project.entry-points."{OPS_ENTRY_POINT_GROUP}"]'
_OPS_COMMENT = (
    "# The ops each symbolic pack serves, so that it loads only when an export meets one.\n"
    f"# Generated by `{SYNC_COMMAND}` (tests/test_plugins.py checks it is current).\n")


def synced_pyproject(text: str) -> str:
    """``text``, a ``pyproject.toml``, with its ``oxport.ops`` block rewritten: for each
    plugin of its ``oxport`` entry points that declares ops there, the ops it registers
    (imported from the source tree, in the order of the ``oxport`` block)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    groups = tomllib.loads(text).get("project", {}).get("entry-points", {})
    declaring = set(groups.get(OPS_ENTRY_POINT_GROUP, {}).values())
    found = [FoundEntryPoint(importlib_metadata.EntryPoint(name, value, ENTRY_POINT_GROUP))
             for name, value in groups.get(ENTRY_POINT_GROUP, {}).items() if value in declaring]
    manager = PluginManager(PluginSelection(strict=True))
    manager.load(found, [])
    infos = {info.name: info for info in manager.plugins}
    lines = [f'"{entry_name_of_op(op)}" = "{ep.value}"'
             for ep in found for op in infos[ep.name].ops]
    block = _OPS_COMMENT + _OPS_HEADER + "\n" + "".join(line + "\n" for line in lines)
    return _replace_ops_block(text, block)


def _replace_ops_block(text: str, block: str) -> str:
    """``text`` with its ``oxport.ops`` table (the comment lines right above it included)
    replaced by ``block``; appended when it has none. The table's entries are one run of
    ``name = value`` lines."""
    lines = text.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == _OPS_HEADER)
    except StopIteration:
        return text.rstrip("\n") + "\n\n" + block
    end = start + 1  # its entries: the lines up to a blank line, a comment or a table
    while end < len(lines) and lines[end].strip() and lines[end].lstrip()[0] not in "[#":
        end += 1
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1
    return "".join(lines[:start]) + block + "".join(lines[end:])
