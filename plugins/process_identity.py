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
