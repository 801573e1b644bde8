"""What holds while an export runs: :func:`is_in_onnx_export`, the model's training mode,
oxport's log (:func:`enable_log`, :func:`disable_log`, and ``verbose=True`` turning it on)
and the cyclic garbage collector's policy."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import logging
from collections.abc import Callable, Iterator
from typing import Any

from oxport.exporter.options import check_training
from oxport.exporter.process_hooks import SharedHook
from oxport.types import TrainingMode

# -- in an export ---------------------------------------------------------------------
#: Whether the current thread (or asyncio task) runs inside an export: per context, so
#: another thread's eager forward never sees an export, and nesting restores the outer value.
_in_export: contextvars.ContextVar[bool] = contextvars.ContextVar("oxport_in_export",
                                                                  default=False)


def is_in_onnx_export() -> bool:
    """Whether an oxport export is running in this thread (its model's forward or a
    symbolic is being called); other threads' eager code sees False."""
    return _in_export.get()


@contextlib.contextmanager
def exporting() -> Iterator[None]:
    """``is_in_onnx_export()`` is True inside, in this thread only (forward and symbolics
    run here)."""
    token = _in_export.set(True)
    try:
        yield
    finally:
        _in_export.reset(token)


@contextlib.contextmanager
def select_model_mode_for_export(model: Any, mode: TrainingMode) -> Iterator[None]:
    """Temporarily set ``model``'s training flag per ``mode``; restore it afterwards."""
    mode = check_training(mode)
    if not hasattr(model, "train") or not hasattr(model, "training"):
        yield
        return
    original = model.training
    if mode == TrainingMode.TRAINING:
        model.train(True)
    elif mode == TrainingMode.EVAL:
        model.train(False)
    try:
        yield
    finally:
        model.train(original)


# -- the log --------------------------------------------------------------------------
def enable_log() -> None:
    """Send oxport's log to stderr at INFO level."""
    logger = logging.getLogger("oxport")
    logger.setLevel(logging.INFO)
    if not any(getattr(h, "_oxport", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("oxport: %(message)s"))
        handler._oxport = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.disabled = False


def disable_log() -> None:
    """Silence oxport's log."""
    logging.getLogger("oxport").disabled = True


def _turn_log_on() -> Callable[[], None]:
    """``verbose=True`` turns oxport's log on while verbose exports run (as torch.onnx
    does); returns what puts the logger back as it was."""
    logger = logging.getLogger("oxport")
    level, disabled, handlers = logger.level, logger.disabled, list(logger.handlers)
    enable_log()

    def restore() -> None:
        logger.setLevel(level)
        logger.disabled = disabled
        logger.handlers[:] = handlers
    return restore


#: Held by each verbose export: the log is on while at least one runs.
verbose_log: SharedHook[None] = SharedHook("oxport_verbose", _turn_log_on)


# -- the garbage collector ------------------------------------------------------------
#: Whether the caller of the export running in this context had the cyclic collector on
#: (None: no export is running; an export called by another keeps the outer caller's).
_caller_gc: contextvars.ContextVar[bool | None] = contextvars.ContextVar("oxport_caller_gc",
                                                                         default=None)


def gc_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with Python's cyclic garbage collector paused: an export allocates enough
    objects to set off full collections, each a scan of every object of the process, and
    oxport's own phases free nothing cyclic that matters before it ends (torch.export's
    capture does: :func:`capture_garbage_collected`)."""
    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        outer = _caller_gc.get()
        token = _caller_gc.set(enabled if outer is None else outer)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            _caller_gc.reset(token)
            if enabled:
                gc.enable()
    return paused


@contextlib.contextmanager
def capture_garbage_collected() -> Iterator[None]:
    """Run the block with the collector on over the objects created inside it, and collect
    them at its end, if the export's caller had the collector on: torch.export's capture
    leaves many cyclic objects that a paused collector would keep until the export ends.
    Every older object is frozen meanwhile (``gc.freeze``), so the collections scan only
    the capture's. Where the caller froze objects itself, the block runs paused and its
    garbage (all in the youngest generation) is collected after it."""
    if not _caller_gc.get():
        yield
        return
    if gc.get_freeze_count():  # unfreezing ours would unfreeze the caller's too
        yield
        gc.collect(0)
        return
    gc.freeze()
    gc.enable()
    try:
        yield
        gc.collect()  # every generation holds only the block's objects (the rest is frozen)
    finally:
        gc.disable()
        gc.unfreeze()
