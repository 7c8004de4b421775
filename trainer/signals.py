"""Graceful pause: the first SIGTERM/SIGINT asks the loop to stop after the current step; a
second one exits at once (exit status 128 + signal number), without a checkpoint.

After training has completed (`settle`) the script may still have work to do (export or upload the
model): a stop then has nothing to pause, so the default behaviour comes back and the process dies of
the signal (143), which the control plane reads as not completed - never exit 0 with that work skipped.
Once the interpreter shuts down (atexit), everything the script wanted is done: a stop then is ignored,
so a completed run's exit 0 does not turn into 143 (the scheduler signalling every rank at the end).

A stop can land before the Trainer exists (the job still imports torch, builds its model and data,
meets the other ranks): an entry point calls `install_early()` first, and the Trainer it builds takes
that request over (`take_early()`), so the run pauses after its first step instead of dying of the
signal with nothing to resume from.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time


class PauseRequest:
    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
        self.signals = signals
        self.requested = False
        self.signum: int | None = None
        self.at: float | None = None  # time.monotonic() of the first stop signal
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
        """Training completed and its final checkpoint is published: the handlers from before `install`
        come back (the default one dies of the signal, after writing the transfer record), and from the
        interpreter's shutdown on the pause signals are ignored."""
        if not self._previous:
            return  # never installed (not the main thread)
        for sig, previous in self._previous.items():
            signal.signal(sig, _die_of_it if previous == signal.SIG_DFL else previous)  # type: ignore[arg-type]
        self._previous.clear()
        _ignore_at_shutdown(self.signals)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            sys.stderr.write(f"foundry: second {signal.Signals(signum).name}: exiting now, no checkpoint\n")
            _exit_now(128 + signum)
        self.requested = True
        self.signum = signum
        self.at = time.monotonic()
        sys.stderr.write(f"foundry: {signal.Signals(signum).name} received: pausing after this step "
                         "(checkpoint, then exit; send again to exit at once)\n")
        sys.stderr.flush()


def _die_of_it(signum, frame) -> None:
    """The default action, after saving the transfer record the default would lose (see _exit_now)."""
    sys.stderr.write(f"foundry: {signal.Signals(signum).name} after fit() returned: exiting "
                     f"{128 + signum}, the script's remaining work not done\n")
    _flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


_shutdown_hook: list[tuple[int, ...]] = []


def _ignore_at_shutdown(signals: tuple[int, ...]) -> None:
    """Registered after fit() (atexit runs last-registered first, so this runs before the shutdown
    steps registered at import: the workers' stop, the transfer record). Ignored, not handled: the
    interpreter resets its Python handlers to the default late in finalisation, SIG_IGN it keeps."""
    if not _shutdown_hook:
        atexit.register(_ignore_now, _shutdown_hook)
    _shutdown_hook[:] = [signals]


def _ignore_now(hook: list[tuple[int, ...]]) -> None:
    if threading.current_thread() is threading.main_thread():
        for sig in hook[0]:
            signal.signal(sig, signal.SIG_IGN)


def _flush() -> None:
    from foundry.plugins.transfers import METER

    METER.flush()
    sys.stderr.flush()
    sys.stdout.flush()


def _exit_now(code: int) -> None:
    """os._exit skips atexit: write what must outlive the process first. The transfer record
    (plugins/transfers.py) is rewritten at most once a second, so the final checkpoint's bytes would
    be missing from the run's egress."""
    _flush()
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
