"""Why a job failed, in one line, when its provider cannot say: the job's own last error line.

A job that dies before the trainer runs (a missing module, a bad command, a wrong python) leaves no
structured record, only its log; the reason `get runs` and `describe run` show is then the last line
of that log that names an error (else its last line), quoted as the job wrote it. No decision is
taken on this text: it is shown to the user, never parsed for a state.
"""

from __future__ import annotations

import re
from collections import deque

_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b:?")   # a Python exception line
_ERROR = re.compile(r"(error|Error|No such file|not found|command not found|Killed|denied)")
_PREFIX = re.compile(r"^\[(rank \d+|launcher)\]\s*(\d\d:\d\d:\d\d\s*)?")
_NOISE = re.compile(r"(torch[./]distributed|elastic|ChildFailedError|^srun: |job failed|exitcode|^[=-]+$|^\s*File |^Traceback)")


def error_line(provider, handle, max_lines: int = 200) -> str | None:
    """The job log's last Python exception line, else its last error-looking line, else None."""
    try:
        tail = deque((line.rstrip("\n") for line in provider.logs(handle, follow=False)), maxlen=max_lines)
    except Exception:
        return None
    lines = [_PREFIX.sub("", line).strip() for line in tail]
    lines = [line for line in lines if line and not _NOISE.search(line)]
    for pattern in (_EXCEPTION, _ERROR):
        found = [line for line in lines if pattern.search(line)]
        if found:
            line = found[-1]
            return line if len(line) <= 160 else line[:157] + "..."
    return None


def failure_reason(provider, handle, exit_code: int | None, reason: str | None) -> str | None:
    """The provider's reason with the job's own error line after it (or `exit N: line`)."""
    line = error_line(provider, handle)
    if not line:
        return reason
    return f"{reason}: {line}" if reason else (f"exit {exit_code}: {line}" if exit_code is not None else line)
