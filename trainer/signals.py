"""Graceful pause: the first SIGTERM/SIGINT asks the loop to stop after the current step; a
second one exits at once (exit status 128 + signal number), without a checkpoint. After training has
completed (`settle`), a stop has nothing left to pause: the process exits 0 instead of dying of it.

A stop can land before the Trainer exists (the job still imports torch, builds its model and data,
meets the other ranks): an entry point calls `install_early()` first, and the Trainer it builds takes
that request over (`take_early()`), so the run pauses after its first step instead of dying of the
signal with nothing to resume from.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


class PauseRequest:
    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
        self.signals = signals
        self.requested = False
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def install(self) -> "PauseRequest":
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return self  # handlers only from the main thread; once (or the previous would be our own)
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def settle(self) -> None:
        """Training completed and its final checkpoint is published. A stop that lands now (the scheduler
        signalling every rank while the process shuts down) must leave the run `completed`: exit 0 at
        once instead of restoring the default action, which would die with 143 and fail the job."""
        if not self._previous:
            return  # never installed (not the main thread)
        for sig in self.signals:
            signal.signal(sig, self._exit_completed)
        self._previous.clear()

    def _exit_completed(self, signum, frame) -> None:
        sys.stderr.write(f"foundry: {signal.Signals(signum).name} after training completed: exiting 0\n")
        _exit_now(0)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            sys.stderr.write(f"foundry: second {signal.Signals(signum).name}: exiting now, no checkpoint\n")
            _exit_now(128 + signum)
        self.requested = True
        self.signum = signum
        sys.stderr.write(f"foundry: {signal.Signals(signum).name} received: pausing after this step "
                         "(checkpoint, then exit; send again to exit at once)\n")
        sys.stderr.flush()


def _exit_now(code: int) -> None:
    """os._exit skips atexit: write what must outlive the process first. The transfer record
    (plugins/transfers.py) is rewritten at most once a second, so the final checkpoint's bytes would
    be missing from the run's egress."""
    from foundry.plugins.transfers import METER

    METER.flush()
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(code)


_early: PauseRequest | None = None


def install_early() -> PauseRequest:
    """Listen for a pause from now on (an entry point's first call); the next Trainer takes it over."""
    global _early
    if _early is None:
        _early = PauseRequest().install()
    return _early


def take_early() -> PauseRequest:
    """The request `install_early` installed (once), or a new one to install in `fit`."""
    global _early
    request, _early = _early or PauseRequest(), None
    return request


class IgnorePauseSignals:
    """worker_init_fn wrapper: DataLoader workers ignore the pause signals. A SIGTERM to the whole
    process group (scancel --signal, Ctrl-C, many supervisors) is the main process's to handle:
    it finishes the step, checkpoints and then shuts its workers down. Picklable (spawn/forkserver)."""

    def __init__(self, inner=None, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
        self.inner, self.signals = inner, signals

    def __call__(self, worker_id: int) -> None:
        for sig in self.signals:
            signal.signal(sig, signal.SIG_IGN)
        if self.inner is not None:
            self.inner(worker_id)


def protect_workers(loader) -> None:
    """Make a torch DataLoader's workers leave the pause to the main process (any worker_init_fn
    the loader has still runs). Loaders that already do so, and other iterables, are left alone."""
    current = getattr(loader, "worker_init_fn", None)
    if getattr(loader, "num_workers", 0) and type(current).__name__ not in ("IgnorePauseSignals",
                                                                              "_IgnorePauseSignals"):
        try:
            loader.worker_init_fn = IgnorePauseSignals(current)
        except (AttributeError, ValueError):  # a loader that forbids it: leave it as it is
            pass
