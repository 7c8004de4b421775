"""Checking a new placement for a run, and moving a run (pause, wait until paused, resume elsewhere).

`check_placement` is the validation `foundry resume` gets from the control plane, run ahead of time:
the run spec re-validated with the overrides, the cluster and secrets checked, and the provider's own
dry run (e.g. `local` refuses nodes > 1). `move_run` is stop + wait + resume in one call.
"""

from __future__ import annotations

from typing import Callable

from foundry.plugins.errors import ConfigError, ProviderError

from .models import ACTIVE_STATUSES, DryRun, RunInfo
from .plane import RESUMABLE


def check_placement(cp, name: str, cluster: str | None = None, gpus: int | None = None,
                    nodes: int | None = None) -> DryRun:
    run = cp.get_run(name, reconcile=False)
    last = run.latest
    return cp.dry_run(run.spec, cluster=cluster or (last.cluster if last else None),
                      gpus=gpus if gpus is not None else (last.devices if last else None),
                      nodes=nodes or (last.nodes if last else None))


def move_run(cp, name: str, cluster: str | None = None, gpus: int | None = None, nodes: int | None = None,
             timeout: float | None = None, on_step: Callable[[str], None] | None = None) -> RunInfo:
    """Pause an active run at a checkpoint, wait until it has stopped, then resume it elsewhere."""
    say = on_step or (lambda _msg: None)
    check_placement(cp, name, cluster, gpus, nodes)
    run = cp.get_run(name)
    if run.status in ACTIVE_STATUSES:
        if run.status != "stopping":
            say(f"pausing {name}")
            cp.stop_run(name, graceful=True)
        say(f"waiting for {name} to pause")
        run = cp.wait(name, timeout=timeout)
    if run.status not in RESUMABLE:
        raise ConfigError(f"run {name!r} ended {run.status}; it cannot be moved",
                          hint="only paused, stopped, failed or lost runs resume")
    say(f"resuming {name} on {cluster or run.cluster}")
    try:
        return cp.resume_run(name, cluster=cluster, gpus=gpus, nodes=nodes)
    except ProviderError as exc:
        raise ProviderError(f"{name} is paused but could not resume: {exc.message}", hint=exc.hint) from exc
