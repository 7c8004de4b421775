"""Graceful pause: the first SIGTERM/SIGINT asks the loop to stop after the current step; a
second one exits at once (exit status 128 + signal number), without a checkpoint.
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
