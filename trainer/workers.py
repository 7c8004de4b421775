"""Stopping the DataLoader workers the trainer made ignore SIGTERM (signals.protect_workers).

At exit, multiprocessing stops daemonic children with SIGTERM and joins them without a timeout.
Workers that ignore SIGTERM would hang that exit forever, and an exception out of `fit()` is the
common way there: its traceback keeps the loop's iterator alive past the exit hooks, so the
iterator's own shutdown (its `__del__`) never runs first. The trainer therefore stops the workers
of every iterator it made: at once when `fit()` or `evaluate()` raises, and in an exit hook for the
ones still alive (persistent workers, an exception caught by the caller).
StreamingDataLoader stops its own (streaming/loader/worker.py); its iterators have no `_workers` here.
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any

from .torch_compat import loader_workers, shutdown_workers

_LIVE: weakref.WeakSet = weakref.WeakSet()


def track(batches: Any) -> Any:
    """Remember an iterator with worker processes (a torch DataLoader's); returns it."""
    if loader_workers(batches):
        try:
            _LIVE.add(batches)
        except TypeError:  # not weak-referenceable: nothing to track
            pass
    return batches


def stop(batches: Any) -> None:
    """Shut an iterator's workers down now (the DataLoader's own shutdown, then a kill for any
    worker that did not exit)."""
    if batches is None or not loader_workers(batches):
        return
    try:
        shutdown_workers(batches)
    except Exception:  # noqa: BLE001 - stopping anyway: kill what is left below
        pass
    for worker in loader_workers(batches):
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=5)
    _LIVE.discard(batches)


def _stop_all_at_exit() -> None:
    for batches in list(_LIVE):
        stop(batches)


# Registered after torch's and multiprocessing's exit hooks (this module imports after torch), so
# it runs first, while the DataLoader's shutdown still works.
atexit.register(_stop_all_at_exit)
