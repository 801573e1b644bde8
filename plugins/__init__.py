"""``oxport.plugins``: the plugin manager's API and the built-in mode plugins.

The manager lives in :mod:`oxport.plugin_manager`; its public names are
re-exported here so ``oxport.plugins.load()`` / ``oxport.plugins.reset()`` work.
The submodules of this package are the built-in mode plugins (fallbacks,
autograd Functions, ...), declared as entry points like any other plugin.
"""

from oxport.plugin_manager import (
    BUILTIN_DISTRIBUTION,
    ENTRY_POINT_GROUP,
    PluginInfo,
    PluginManager,
    PluginSelection,
    load,
    reset,
    runtime_registry,
)

__all__ = [
    "BUILTIN_DISTRIBUTION", "ENTRY_POINT_GROUP", "PluginInfo", "PluginManager",
    "PluginSelection", "load", "reset", "runtime_registry",
]
