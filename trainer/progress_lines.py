"""Training progress as plain lines, by time: what a log file or a pipe gets instead of a progress bar.

One line at the first step, then whenever `seconds` have passed since the last line, at every
evaluation and at the last step: step (of total), the metrics, and the ETA once a rate is known.
A job's log is then never silent for long, however slow or fast a step is.

When training also stops at a wall-clock budget (`set_time_budget`, e.g. a callback that calls
`trainer.stop()` after N minutes), the ETA is the smaller of the step-based one and the time the
budget has left: a 2-minute run of a 2000-batch schedule says "eta 1m50s", not "eta 5m33s".
"""

from __future__ import annotations

import time
from typing import Any, Callable, TextIO


def _eta(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class TimedProgressLines:
    def __init__(self, stream: TextIO, total_batches: int | None, fmt: Callable[[dict[str, Any]], str],
                 seconds: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.stream, self.total, self.fmt = stream, total_batches, fmt
        self.seconds, self.clock = seconds, clock
        self._first: tuple[int, float] | None = None
        self._last_line: float | None = None
        self._deadline: float | None = None

    def set_time_budget(self, seconds: float) -> None:
        """Training stops (at the latest) `seconds` from now, whatever the step count says."""
        self._deadline = self.clock() + seconds

    def _eta_seconds(self, step: int, now: float) -> float | None:
        """The smaller of the step-based ETA (once a rate is known) and what the time budget has left."""
        if self.total is not None and step >= self.total:
            return None
        first_step, first_time = self._first
        etas = []
        if self.total and step > first_step and now > first_time:
            etas.append((self.total - step) * (now - first_time) / (step - first_step))
        if self._deadline is not None:
            etas.append(max(0.0, self._deadline - now))
        return min(etas) if etas else None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        now = self.clock()
        if self._first is None:
            self._first = (step, now)
        due = (self._last_line is None or now - self._last_line >= self.seconds or "eval/loss" in metrics
               or (self.total is not None and step >= self.total))
        if not due:
            return
        self._last_line = now
        total = f"/{self.total}" if self.total else ""
        line = f"step {step}{total}: {self.fmt(metrics)}"
        eta = self._eta_seconds(step, now)
        if eta is not None:
            line += f" eta {_eta(eta)}"
        self.stream.write(line + "\n")
        self.stream.flush()
