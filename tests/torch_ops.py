"""Defining ``torch.library`` ops for tests, as a C++ TORCH_LIBRARY would."""

from __future__ import annotations

from collections.abc import Callable

import torch

_LIBRARIES: list[torch.library.Library] = []


def define_op(namespace: str, name: str, schema: str, impl: Callable[..., torch.Tensor]) -> None:
    """Define ``namespace::name`` once per process (it lives as long as its Library)."""
    if hasattr(getattr(torch.ops, namespace), name):
        return
    library = torch.library.Library(namespace, "FRAGMENT")
    library.define(f"{name}{schema}")
    library.impl(name, impl, "CompositeExplicitAutograd")
    _LIBRARIES.append(library)
