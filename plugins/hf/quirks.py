"""Architecture quirks: what one transformers architecture needs that its task's generic
export does not do, as plugins.

A quirk is an object exposed under the entry-point group ``oxport.hf.quirks`` (so a third
party adds one the way it adds an op pack) with ``architectures``, the class names it
applies to (``"GPT2LMHeadModel"``), and any of these optional methods, which the tasks call
where they apply:

* ``prepare_model(model) -> model``: adjust the loaded model before export (a setting that
  only eager mode can take, a module to swap);
* ``decoder_inputs(io) -> io``: adjust what the decoder tasks probed from the model (a
  :class:`~oxport.plugins.hf.tasks.decoder.DecoderInputs`: ``position_ids``, the cache
  argument's name, the layers, kv heads and head size);
* ``genai_config(config) -> dict``: entries merged into the ``genai_config.json`` written.

The built-in quirks (:mod:`oxport.plugins.hf.architectures`) are found the same way:
oxport's own distribution declares them under that group."""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

if sys.version_info >= (3, 12):
    from importlib import metadata as importlib_metadata
else:
    import importlib_metadata

log = logging.getLogger("oxport.plugins.hf")

ENTRY_POINT_GROUP = "oxport.hf.quirks"

@functools.lru_cache(maxsize=1)
def installed() -> tuple[Any, ...]:
    """Every quirk of the ``oxport.hf.quirks`` entry points, oxport's own first (one that
    fails to load is reported and left out)."""
    found = []
    entry_points = importlib_metadata.entry_points(group=ENTRY_POINT_GROUP)
    for entry_point in sorted(entry_points, key=_third_party):
        try:
            quirk = entry_point.load()
        except Exception as exc:  # noqa: BLE001 - a third party's module may raise anything
            log.warning("The transformers quirk %s (%s) could not be loaded: %s: %s; "
                        "exports go on without it.", entry_point.name, entry_point.value,
                        type(exc).__name__, exc)
            continue
        if not isinstance(getattr(quirk, "architectures", None), (tuple, list, set, frozenset)):
            log.warning("The transformers quirk %s names no architectures (a tuple of class "
                        "names): left out.", entry_point.name)
            continue
        found.append(quirk)
    return tuple(found)


def _third_party(entry_point: Any) -> bool:
    """Whether ``entry_point`` comes from a distribution other than oxport (sorts last)."""
    return entry_point.dist is None or entry_point.dist.name != "oxport"


def for_architecture(architecture: str) -> list[Any]:
    """The quirks that apply to ``architecture`` (a model class name)."""
    return [q for q in installed() if architecture in q.architectures]


def apply(quirks: list[Any], method: str, value: Any, *args: Any) -> Any:
    """``value`` passed through each quirk's ``method`` that has one."""
    for quirk in quirks:
        fn = getattr(quirk, method, None)
        if fn is not None:
            value = fn(*args, value) if args else fn(value)
    return value
