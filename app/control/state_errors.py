"""What a verb says when the run's state rules it out: what happened, then what to do (one line and
a hint, like every other error), for `stop`, `resume` and `move` in the CLI, the TUI and the SDK."""

from __future__ import annotations

from foundry.plugins.errors import ConfigError

from .models import ACTIVE_STATUSES, RESUMABLE_STATUSES

ONLY = f"only {', '.join(RESUMABLE_STATUSES)} runs can be resumed"   # the words scripts and tests match


def not_active(name: str, status: str) -> ConfigError:
    """`stop` of a run that is not running."""
    if status in RESUMABLE_STATUSES:
        return ConfigError(f"run {name!r} is already {status}: there is nothing to stop",
                           hint=f"`foundry resume {name}` starts it again (add --cluster to move it)")
    return ConfigError(f"run {name!r} has {status}: there is nothing to stop",
                       hint=f"`foundry describe run {name}` shows how it ended")


def not_resumable(name: str, status: str) -> ConfigError:
    """`resume` (or `move`) of a run that is running or has completed."""
    if status in ACTIVE_STATUSES:
        return ConfigError(f"run {name!r} is {status}: {ONLY}",
                           hint=f"`foundry stop {name} --wait` pauses it at a checkpoint; resume it anywhere then")
    return ConfigError(f"run {name!r} has {status}, nothing is left to resume: {ONLY}",
                       hint=f"a new run (`foundry run -f SPEC --name NEW`) starts over; "
                            f"`foundry describe run {name}` shows this one")
