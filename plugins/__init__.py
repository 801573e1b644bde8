"""``oxport.plugins``: the built-in mode plugins (ATen export and fallback, fallthrough,
autograd Functions, ...), each a submodule declared as an ``oxport`` entry point like any
third party's plugin.

The plugin manager's API is :mod:`oxport.plugin_manager`. Its public names are re-exported
here only so that code and docs written against ``oxport.plugins.load()`` /
``oxport.plugins.reset()`` (as for torch.onnx-era scripts) keep working; new code imports
``oxport.plugin_manager``.
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
