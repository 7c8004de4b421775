"""Pure formatting for tables (ages, durations, sizes, numbers); no textual, no I/O."""

from __future__ import annotations


def duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def age(then: float | None, now: float) -> str:
    return "-" if not then else duration(max(now - then, 0))


def size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def number(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


def step_of(step: int | None, max_steps: int | None) -> str:
    if step is None:
        return "-" if not max_steps else f"0/{max_steps}"
    return f"{step}/{max_steps}" if max_steps else str(step)


def steps(progress, active: bool) -> str:
    """The step column: `264/2000`, or `264 (time budget)` for a run its time budget ended (which
    is done, not 13% of the way)."""
    if progress.stop_reason == "time_budget" and not active and progress.step is not None:
        return f"{progress.step} (time budget)"
    return step_of(progress.step, progress.max_steps)


def steps_long(progress, active: bool) -> str:
    """The run header's words for the same: why it stopped where it did."""
    if progress.stop_reason == "time_budget" and not active and progress.step is not None:
        budget = f"{duration(progress.budget_s)} " if progress.budget_s else ""
        of = f" of {progress.max_steps}" if progress.max_steps else ""
        return f"{progress.step}{of}, stopped at its {budget}time budget"
    return step_of(progress.step, progress.max_steps)


STATUS_STYLE = {
    "running": "bold green", "pending": "yellow", "stopping": "yellow", "paused": "cyan",
    "completed": "blue", "failed": "bold red", "lost": "red", "stopped": "magenta",
}
