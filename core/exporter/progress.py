"""Progress of an export: phase timings on the ``oxport`` logger, and a terminal display.

The export path wraps each phase (``trace``, ``convert``, ``passes``, ``serialize``,
``write``, ``check``…) in :func:`phase`. When a phase ends, one INFO message goes to the
``oxport`` logger with its time and, for conversion and writing, how much was
done (nodes, bytes)::

    import logging
    logging.basicConfig(level=logging.INFO)   # or oxport.enable_log()

Listeners registered with :func:`listening` see every phase start, advance and finish;
:func:`display` is the one the command line uses: a ``rich`` progress display on
stderr that appears only when the work outlasts ``delay`` seconds, and only on a
terminal::

    with oxport.exporter.progress.display():
        oxport.export(model, args, "model.onnx")
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

log = logging.getLogger("oxport")

#: What each phase is called on screen and in the log.
LABELS = {
    "load": "building the model", "plugins": "loading plugins", "trace": "tracing",
    "convert": "converting nodes", "passes": "graph passes", "serialize": "serializing",
    "write": "writing weights", "check": "checking the model",
    "verify": "verifying with ONNX Runtime",
}
#: The unit of a phase's done/total counts.
UNITS = {"convert": "nodes", "write": "bytes"}

Advance = Callable[[int, int], None]


class Listener(Protocol):
    """Receives the phases of an export as they happen (from the exporting thread)."""

    def phase_started(self, name: str) -> None: ...

    def phase_advanced(self, name: str, done: int, total: int) -> None: ...

    def phase_finished(self, name: str, seconds: float) -> None: ...


_listeners: contextvars.ContextVar[tuple[Listener, ...]] = contextvars.ContextVar(
    "oxport_progress_listeners", default=())


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[Listener]:
    """Send the phases of every export inside the block to ``listener`` too."""
    token = _listeners.set((*_listeners.get(), listener))
    try:
        yield listener
    finally:
        _listeners.reset(token)


@contextlib.contextmanager
def phase(name: str, timings: dict[str, float] | None = None) -> Iterator[Advance]:
    """Time one phase (stored in ``timings[name]``) and tell the listeners about it.

    Yields ``advance(done, total)`` for phases that can count their work.
    """
    listeners = _listeners.get()
    counts = [0, 0]

    def advance(done: int, total: int) -> None:
        counts[0], counts[1] = done, total
        for listener in listeners:
            listener.phase_advanced(name, done, total)

    advance.listened = bool(listeners)  # type: ignore[attr-defined] - work out totals only then

    for listener in listeners:
        listener.phase_started(name)
    start = time.perf_counter()
    ok = False
    try:
        yield advance
        ok = True
    finally:
        seconds = time.perf_counter() - start
        if timings is not None:
            timings[name] = seconds
        for listener in listeners:
            listener.phase_finished(name, seconds)
        if ok:
            detail = f" ({amount(name, counts[0], counts[1])})" if counts[1] else ""
            log.info("%s: %.3f s%s", LABELS.get(name, name), seconds, detail)


def amount(name: str, done: int, total: int) -> str:
    """``"12/35 nodes"``, ``"1.5 MiB/233.1 MiB"``: a phase's counts in its unit (only the
    total once it is all done)."""
    if UNITS.get(name) == "bytes":
        return size(total) if done == total else f"{size(done)}/{size(total)}"
    unit = UNITS.get(name, "")
    return (f"{total} {unit}" if done == total else f"{done}/{total} {unit}").rstrip()


def size(n: float) -> str:
    """A byte count for people: ``"812 B"``, ``"64.0 KiB"``, ``"233.1 MiB"``."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"


class TerminalProgress:
    """A ``rich`` display of the phases, started only once the work outlasts ``delay``.

    Use it through :func:`display`. Updates come from the exporting thread; a timer
    thread shows the display (so a long trace shows a spinner while it runs).
    """

    def __init__(self, console: Any, delay: float = 2.0) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            SpinnerColumn(finished_text="[green]✓"), TextColumn("{task.description:28}"),
            BarColumn(), TextColumn("{task.fields[amount]:>22}"), TimeElapsedColumn(),
            console=console, transient=False)
        self._lock = threading.Lock()
        self._shown = False
        self._closed = threading.Event()
        self._tasks: dict[str, Any] = {}
        self._totals: dict[str, int] = {}
        self._timer = threading.Thread(target=self._show_after, args=(delay,), daemon=True,
                                       name="oxport-progress")

    def start(self) -> None:
        self._timer.start()

    def close(self) -> None:
        """Stop the timer and, if the display was shown, leave it finished on screen."""
        with self._lock:
            self._closed.set()
            if self._shown:
                self._progress.stop()

    def _show_after(self, delay: float) -> None:
        _block_ctrl_c_in_this_thread()  # and in rich's refresh thread, started from here
        if self._closed.wait(delay):
            return
        with self._lock:
            if not self._closed.is_set():
                self._shown = True
                self._progress.start()

    def phase_started(self, name: str) -> None:
        self._tasks[name] = self._progress.add_task(LABELS.get(name, name), total=None,
                                                    amount="")

    def phase_advanced(self, name: str, done: int, total: int) -> None:
        self._totals[name] = total
        self._progress.update(self._tasks[name], completed=done, total=total,
                              amount=amount(name, done, total))

    def phase_finished(self, name: str, seconds: float) -> None:
        task = self._tasks[name]
        total = self._totals.get(name) or 1
        self._progress.update(task, completed=total, total=total)
        self._progress.stop_task(task)


def _block_ctrl_c_in_this_thread() -> None:
    """Leave SIGINT to the main thread. The kernel hands a process's signal to any thread
    that does not block it; one taken by a display thread does not interrupt the main
    thread's blocking call (a model's ``time.sleep``, a read), so Ctrl-C waited for it."""
    if hasattr(signal, "pthread_sigmask"):  # not on Windows, where only the main thread gets it
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@contextlib.contextmanager
def display(delay: float = 2.0, console: Any = None) -> Iterator[TerminalProgress | None]:
    """Show the phases of the exports inside the block on the terminal (stderr), once they
    have run ``delay`` seconds. Silent when ``console`` (default: rich's stderr console) is
    not a terminal."""
    if console is None:
        from rich.console import Console

        console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    terminal = TerminalProgress(console, delay)
    terminal.start()
    try:
        with listening(terminal):
            yield terminal
    finally:
        terminal.close()
