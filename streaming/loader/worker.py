"""The DataLoader worker process's own settings, and its end: pause signals left to the main
process, a short GIL switch interval, a temp folder short enough for the batch sockets, and live
workers stopped at exit."""

from __future__ import annotations

import atexit
import signal
import sys
import weakref
from typing import Callable

import torch


UNIX_SOCKET_PATH_MAX = 107        # sun_path is 108 bytes with its NUL


def check_socket_dir() -> None:
    """Workers hand each batch over as a file descriptor passed through a unix socket that
    multiprocessing creates under the temp folder (.../pymp-XXXXXXXX/listener-XXXXXXXX). A temp
    folder too long for a socket path kills the worker's sending thread, and the loop would wait
    forever: say so in one line instead."""
    import multiprocessing.process
    import os
    import tempfile

    if torch.multiprocessing.get_sharing_strategy() != "file_descriptor":
        return
    made = multiprocessing.process.current_process()._config.get("tempdir")
    longest = len(os.fsencode(made)) + 18 if made else len(os.fsencode(tempfile.gettempdir())) + 32
    if longest > UNIX_SOCKET_PATH_MAX:
        from foundry.plugins.errors import ConfigError

        raise ConfigError(f"the temp folder {tempfile.gettempdir()} is too long for the unix sockets DataLoader "
                          f"workers pass batches through ({longest} > {UNIX_SOCKET_PATH_MAX} bytes)",
                          hint="set TMPDIR to a shorter folder (export TMPDIR=/tmp), or use num_workers=0")
WORKER_SWITCH_INTERVAL_S = 0.0005


class IgnorePauseSignals:
    """worker_init_fn wrapper: workers ignore SIGTERM/SIGINT (and switch threads often, below). A pause signal sent to the whole
    process group (scancel --signal, Ctrl-C, many supervisors) is the main process's to handle:
    it finishes the step and checkpoints, then shuts the workers down itself. A picklable class,
    not a closure, so it also works with the spawn and forkserver start methods."""

    def __init__(self, inner: Callable[[int], None] | None):
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        # Every batch reaches the main process as a shared-memory fd, which it fetches from this
        # worker's resource-sharer thread; with the default 5 ms GIL switch interval that thread
        # waits behind the sample loop, and the main process waits for it (batch 32: 16k -> 26k
        # samples/s with 0.5 ms).
        sys.setswitchinterval(WORKER_SWITCH_INTERVAL_S)
        if self.inner is not None:
            self.inner(worker_id)


# DataLoader iterators whose workers may still be running (see _stop_workers_at_exit).
LIVE_WORKERS: weakref.WeakSet = weakref.WeakSet()


def _stop_workers_at_exit() -> None:
    """At exit, multiprocessing stops daemonic children with SIGTERM and joins them without a
    timeout; our workers ignore SIGTERM, so live ones (persistent workers, a loop left early) would
    hang the exit forever. Registered after torch's and multiprocessing's exit hooks, this runs
    first, while the DataLoader's own shutdown (done event, join) still works."""
    for batches in list(LIVE_WORKERS):
        try:
            batches._shutdown_workers()  # what the iterator's __del__ does
        except Exception:  # noqa: BLE001 - exiting anyway: kill what is left below
            pass
        for worker in getattr(batches, "_workers", ()):
            if worker.is_alive():
                worker.kill()


atexit.register(_stop_workers_at_exit)
