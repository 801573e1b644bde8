"""Python types that plugins declare for the model boundary (``oxport_register_io_types``):
each is registered with torch's pytree once its module is imported, so that an argument of
that type flattens into named graph inputs (and is rebuilt before the model runs) and a
result of that type into named graph outputs, on every front end."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from torch.utils import _pytree as pytree

from oxport.registry import IOType


def enable(io_types: Mapping[str, IOType]) -> None:
    """Register each declared type whose module is imported with torch's pytree (a type
    something else registered already, e.g. its own library, keeps that registration)."""
    for io_type in io_types.values():
        cls = _loaded_type(io_type.path)
        if cls is not None and cls not in pytree.SUPPORTED_NODES:
            _register(cls, io_type)


def _loaded_type(path: str) -> type | None:
    module_name, _, name = path.rpartition(".")
    module = sys.modules.get(module_name)
    cls = getattr(module, name, None) if module is not None else None
    return cls if isinstance(cls, type) else None


def _register(cls: type, io_type: IOType) -> None:
    def flatten(value: Any) -> tuple[list[Any], Any]:
        children, context = io_type.flatten(value)
        return [child for _, child in children], ([name for name, _ in children], context)

    def flatten_with_keys(value: Any) -> tuple[list[tuple[Any, Any]], Any]:
        children, context = io_type.flatten(value)
        return ([(pytree.MappingKey(name), child) for name, child in children],
                ([name for name, _ in children], context))

    def unflatten(values: Any, context: Any) -> Any:
        return io_type.unflatten(list(values), context[1])

    pytree.register_pytree_node(cls, flatten, unflatten, serialized_type_name=io_type.path,
                                flatten_with_keys_fn=flatten_with_keys)


def named_children(value: Any) -> list[tuple[str, Any]] | None:
    """The children of a value whose type pytree knows (a declared I/O type), named after
    their keys; None for any other value."""
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return None
    if node.flatten_with_keys_fn is None:
        children, _ = node.flatten_fn(value)
        return [(str(i), child) for i, child in enumerate(children)]
    keyed, _ = node.flatten_with_keys_fn(value)
    return [(key_name(key), child) for key, child in keyed]


def key_name(key: Any) -> str:
    """A pytree key as a name part: a mapping key, a sequence index or an attribute name."""
    for attribute in ("key", "idx", "name"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)
