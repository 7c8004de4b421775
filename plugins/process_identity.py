"""A process is known by its pid *and* its start time: pids are reused, start times are not.

Shared by the control plane's launch intents (is the process that launches a run still alive?) and
the local provider (is this job's launcher still the process we started?); both sides record
`create_time(pid)` and later compare it with the live value.
"""

from __future__ import annotations


def create_time(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), or None when no such process exists."""
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # psutil.NoSuchProcess, AccessDenied, or psutil missing: not a process we can see
        return None


def still_running(pid: int, started: float | str | None, *, reap: bool = False) -> bool:
    """Whether `pid` is a live process (not a zombie) that started at `started` (a recorded
    create_time; None: not recorded, any start time matches). `reap=True` collects a zombie that is
    our own child (the SDK and tests start launchers themselves)."""
    now = create_time(pid)
    if now is None:
        return False
    try:
        import psutil

        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            if reap:
                import os

                os.waitpid(pid, os.WNOHANG)
            return False
    except Exception:  # gone meanwhile, or not ours to inspect: the start time decides
        pass
    return started is None or abs(now - float(started)) < 1.0
