"""Graceful pause: the first SIGTERM/SIGINT asks the loop to stop after the current step; a
second one exits at once (exit status 128 + signal number), without a checkpoint. After training has
completed (`settle`), a stop has nothing left to pause: the process exits 0 instead of dying of it.
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
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers can only be installed from the main thread
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
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(0)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            sys.stderr.write(f"foundry: second {signal.Signals(signum).name}: exiting now, no checkpoint\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        self.requested = True
        self.signum = signum
        sys.stderr.write(f"foundry: {signal.Signals(signum).name} received: pausing after this step "
                         "(checkpoint, then exit; send again to exit at once)\n")
        sys.stderr.flush()
