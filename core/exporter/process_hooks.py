"""Hooks into process-wide state that overlapping exports (in threads) share.

Python's warning handler, oxport's logger and torch's tracer module map are one per
process. Saving and restoring them around each export breaks when exports overlap: the
export that ends last puts back the state the other one made, and it stays for good. A
:class:`SharedHook` is installed by the first export that needs it and removed by the last
one; what each export needs from it is held per thread (a context variable).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedHook(Generic[T]):
    """``install()`` changes process-wide state and returns the function that undoes it;
    :meth:`held` keeps it installed while any export holds it. :attr:`current` is the
    value the export running in this thread passed to :meth:`held` (None outside one)."""

    def __init__(self, name: str, install: Callable[[], Callable[[], None]]) -> None:
        self.current: contextvars.ContextVar[T | None] = contextvars.ContextVar(name,
                                                                               default=None)
        self._install = install
        self._lock = threading.Lock()
        self._holders = 0
        self._uninstall: Callable[[], None] | None = None

    @contextlib.contextmanager
    def held(self, value: T | None = None) -> Iterator[None]:
        token = self.current.set(value)
        try:
            with self._lock:
                if not self._holders:
                    self._uninstall = self._install()
                self._holders += 1
            try:
                yield
            finally:
                with self._lock:
                    self._holders -= 1
                    if not self._holders and self._uninstall is not None:
                        self._uninstall()
                        self._uninstall = None
        finally:
            self.current.reset(token)
