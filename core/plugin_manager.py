"""Loading plugins from the ``oxport`` entry-point group into a registry.

Controls (environment variables, or the same as arguments of ``load_registry``
and ``export``):

* ``OXPORT_DISABLE_PLUGIN_AUTOLOAD=1`` -- load no entry point (only plugins
  passed explicitly);
* ``OXPORT_PLUGINS=a,b`` -- load only these entry points;
* ``OXPORT_DISABLE_PLUGINS=a,b`` -- never load these;
* ``OXPORT_STRICT_PLUGINS=1`` -- a broken plugin raises instead of being reported.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import traceback
from collections.abc import Iterable, Sequence
from typing import Any

import pluggy

from oxport import hookspecs
from oxport.errors import PluginError, RegistryError
from oxport.registry import Layer, Provenance, Registrar, SymbolicRegistry

if sys.version_info >= (3, 12):
    from importlib import metadata as importlib_metadata
else:
    import importlib_metadata

log = logging.getLogger("oxport.plugins")

ENTRY_POINT_GROUP = "oxport"
BUILTIN_DISTRIBUTION = "oxport"
_REGISTRATION_HOOKS = (
    "oxport_register_domains",
    "oxport_register_symbolics",
    "oxport_register_fallbacks",
    "oxport_register_passes",
)


@dataclasses.dataclass
class PluginInfo:
    """What ``oxport plugins`` shows about one plugin."""

    name: str
    distribution: str | None
    version: str | None
    layer: Layer
    value: str = ""
    error: str | None = None
    registered: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["layer"] = self.layer.name.lower()
        return data


@dataclasses.dataclass(frozen=True)
class PluginSelection:
    """Which entry points to load."""

    autoload: bool = True
    allow: tuple[str, ...] | None = None
    block: tuple[str, ...] = ()
    strict: bool = False
    extra: tuple[Any, ...] = ()

    @classmethod
    def resolve(cls, autoload: bool | None = None, allow: Iterable[str] | None = None,
                block: Iterable[str] | None = None, strict: bool | None = None,
                extra: Sequence[Any] = ()) -> PluginSelection:
        """Combine explicit arguments with the environment (arguments win)."""
        env = os.environ
        if autoload is None:
            autoload = env.get("OXPORT_DISABLE_PLUGIN_AUTOLOAD", "") in ("", "0")
        if allow is None and env.get("OXPORT_PLUGINS"):
            allow = _split(env["OXPORT_PLUGINS"])
        blocked = set(_split(env.get("OXPORT_DISABLE_PLUGINS", "")))
        blocked.update(block or ())
        if strict is None:
            strict = env.get("OXPORT_STRICT_PLUGINS", "") not in ("", "0")
        for name in [*(allow or ()), *blocked]:
            if not isinstance(name, str) or not name:
                raise PluginError(f"Plugin names must be non-empty strings, not {name!r}.")
        return cls(bool(autoload), tuple(allow) if allow is not None else None,
                   tuple(sorted(blocked)), bool(strict), tuple(extra))


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


class PluginManager:
    """Loads plugins and fills a :class:`SymbolicRegistry` from their hooks."""

    def __init__(self, selection: PluginSelection | None = None) -> None:
        self.selection = selection or PluginSelection.resolve()
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.registry = SymbolicRegistry()
        self.plugins: list[PluginInfo] = []

    # -- loading ----------------------------------------------------------
    def load(self) -> SymbolicRegistry:
        """Load every selected plugin, register it, and check hook names."""
        if self.selection.autoload or self.selection.allow:
            for entry_point in _entry_points():
                self._load_entry_point(entry_point)
        for index, plugin in enumerate(self.selection.extra):
            name = getattr(plugin, "name", None) or getattr(plugin, "__name__", f"extra-{index}")
            self._add(plugin, PluginInfo(str(name), None, None, Layer.INSTALLED))
        self._check_pending()
        self._check_allow_list()
        return self.registry

    def _load_entry_point(self, entry_point: Any) -> None:
        dist = getattr(entry_point, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        info = PluginInfo(
            entry_point.name, dist_name, dist.version if dist is not None else None,
            Layer.BUILTIN if dist_name == BUILTIN_DISTRIBUTION else Layer.INSTALLED,
            entry_point.value,
        )
        if entry_point.name in self.selection.block:
            log.debug("plugin %s blocked", entry_point.name)
            return
        if self.selection.allow is not None and entry_point.name not in self.selection.allow:
            return
        if any(p.name == info.name for p in self.plugins):
            return  # the same entry point seen twice (e.g. an editable install)
        try:
            plugin = entry_point.load()
        except Exception as exc:  # a third party's import may raise anything
            self._broken(info, "import", exc)
            return
        self._add(plugin, info)

    def _add(self, plugin: Any, info: PluginInfo) -> None:
        self.plugins.append(info)
        try:
            self.pm.register(plugin, name=info.name)
        except ValueError as exc:
            self._broken(info, "register", exc)
            return
        provenance = Provenance(info.name, info.distribution, info.version, info.layer)
        registrar = Registrar(self.registry, provenance)
        before = _counts(self.registry)
        for hook_name in _REGISTRATION_HOOKS:
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                if impl.plugin_name != info.name:
                    continue
                try:
                    impl.function(registry=registrar)
                except RegistryError as exc:
                    # Conflicts are the user's to resolve: always loud.
                    raise RegistryError(f"Plugin {info.name!r}: {exc}") from exc
                except Exception as exc:
                    self._broken(info, hook_name, exc)
                    return
        after = _counts(self.registry)
        info.registered = {k: after[k] - before[k] for k in after if after[k] - before[k]}

    def _broken(self, info: PluginInfo, stage: str, exc: BaseException) -> None:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        info.error = f"{stage} failed: {detail}"
        if info not in self.plugins:
            self.plugins.append(info)
        if self.pm.is_registered(self.pm.get_plugin(info.name)):
            self.pm.unregister(name=info.name)
        message = (
            f"oxport plugin {info.name!r} from {info.distribution or 'an unknown distribution'} "
            f"is broken ({info.error}); the other plugins still work. Fix or uninstall it, or "
            f"block it with OXPORT_DISABLE_PLUGINS={info.name}."
        )
        if self.selection.strict:
            raise PluginError(message) from exc
        log.warning(message)

    def _check_pending(self) -> None:
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(
                f"{exc}. Hook names must be one of: "
                + ", ".join(sorted(n for n in dir(hookspecs) if n.startswith("oxport_")))
            ) from exc

    def _check_allow_list(self) -> None:
        if self.selection.allow is None:
            return
        known = {p.name for p in self.plugins}
        missing = [name for name in self.selection.allow if name not in known]
        if missing:
            available = sorted(ep.name for ep in _entry_points())
            raise PluginError(
                f"Plugins {missing} were asked for but are not installed. "
                f"Installed plugins: {', '.join(available) or 'none'}."
            )


def _entry_points() -> list[Any]:
    return sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def _counts(registry: SymbolicRegistry) -> dict[str, int]:
    return {
        "symbolics": sum(1 for _ in registry.entries()),
        "fallbacks": len(registry.fallbacks),
        "domains": len(registry.domain_versions),
        "passes": len(registry.passes),
        "cases": len(registry.cases),
    }


# -- the session's registries ------------------------------------------------
_lock = threading.Lock()
_cache: dict[PluginSelection, PluginManager] = {}
_runtime = SymbolicRegistry()  # register_custom_op_symbolic lands here


def runtime_registry() -> SymbolicRegistry:
    """The registry of runtime registrations, shared by every selection."""
    return _runtime


def load(autoload: bool | None = None, allow: Iterable[str] | None = None,
         block: Iterable[str] | None = None, strict: bool | None = None,
         extra: Sequence[Any] = ()) -> PluginManager:
    """The plugin manager for a selection, loaded once and cached."""
    selection = PluginSelection.resolve(autoload, allow, block, strict, extra)
    with _lock:
        manager = _cache.get(selection)
        if manager is None:
            manager = PluginManager(selection)
            manager.load()
            _cache[selection] = manager
        return manager


def reset() -> None:
    """Forget loaded plugins (after installing or uninstalling a pack)."""
    with _lock:
        _cache.clear()
    importlib_metadata_cache_clear = getattr(importlib_metadata, "_cache_clear", None)
    if importlib_metadata_cache_clear is not None:
        importlib_metadata_cache_clear()
