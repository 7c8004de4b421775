"""Launch intents: how a run survives the death of the process that launches it.

A launch has a window in which the job may exist while the registry does not know it (the provider
started it; the handle is not recorded yet). A CLI killed there used to leave a job that `stop`
could not reach and that `resume` would train a second copy of. So every resumption is recorded
*before* anything starts, with an intent that says who is launching it and how to find the job:

    {"launcher": {"pid": 4242, "started": 1732380000.5, "host": "box"},    # written with the row
     "stage": "planning" | "launching",
     "job": {...}}                              # provider.launch_intent(plan), before provider.launch

`resolve(registry, clusters, run, res)` runs in reconcile (so in every command that touches a run) for an active
resumption without a handle:
  - its launcher is alive            -> still launching: leave it (the launcher records the outcome)
  - stage "planning"                 -> nothing was started: failed, resumable at once
  - stage "launching"                -> provider.reclaim(job): the job's handle (adopted: stop and
                                        status reach it), or None once the provider made sure the
                                        job never runs (failed, resumable)
  - no intent (older rows), or a provider without reclaim: failed after LAUNCH_GRACE_S, as before.
Providers implement `launch_intent(plan) -> dict` and `reclaim(intent) -> JobHandle | None`
(optional; see plugins/compute.py). Signals go only to what a provider recorded (pids, job ids).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from foundry.plugins.compute import JobHandle
from foundry.plugins.manager import notify_run_event
from foundry.plugins.process_identity import create_time, still_running

if TYPE_CHECKING:
    from .clusters import Clusters
    from .models import Resumption, RunInfo
    from .registry import Registry

log = logging.getLogger("foundry.control")

LAUNCH_GRACE_S = 120.0
RELAUNCH_CAUSES = ("retry", "failover")  # resumptions the watchdog launches on its own  # rows without an intent: no handle after this long means never launched


def launcher_identity() -> dict[str, Any]:
    return {"pid": os.getpid(), "started": create_time(os.getpid()), "host": socket.gethostname()}


def planning_intent() -> dict[str, Any]:
    return {"launcher": launcher_identity(), "stage": "planning"}


def launching_intent(provider: Any, plan: Any) -> dict[str, Any]:
    job = provider.launch_intent(plan) if callable(getattr(provider, "launch_intent", None)) else None
    return {"launcher": launcher_identity(), "stage": "launching", "job": job}


def launcher_alive(launcher: dict[str, Any]) -> bool:
    """Whether the process that recorded the intent still runs (same pid *and* start time)."""
    if launcher.get("host") not in (None, socket.gethostname()):
        return True  # launched from another machine sharing this home: cannot tell, never steal it
    pid, started = launcher.get("pid"), launcher.get("started")
    return isinstance(pid, int) and still_running(pid, started)


def handle_record(handle: JobHandle) -> dict[str, Any]:
    """A job handle as the registry stores it (JobHandle(**record) reads it back)."""
    return {"provider": handle.provider, "cluster": handle.cluster, "job_id": handle.job_id, "data": handle.data}


def resolve(registry: "Registry", clusters: "Clusters", run: "RunInfo", res: "Resumption") -> str | None:
    """Settle an active resumption that has no job handle; returns the action taken (or None)."""
    intent = registry.launch_intent(run.id, res.index)
    if intent is None:
        if res.state == "pending" and time.time() - (res.started_at or 0) > LAUNCH_GRACE_S:
            return _fail(registry, run, res, "launch was interrupted (the process launching it exited); resume it")
        return None
    if launcher_alive(intent.get("launcher") or {}):
        return None
    if intent.get("stage") != "launching":
        return _fail(registry, run, res, "launch was interrupted before anything started; resume it")
    provider = clusters.provider(res.cluster)
    reclaim = getattr(provider, "reclaim", None)
    if intent.get("job") is None or not callable(reclaim):
        if time.time() - (res.started_at or 0) > LAUNCH_GRACE_S:
            return _fail(registry, run, res, "launch was interrupted and the provider cannot tell whether the job "
                                       "started; check the cluster, then resume it")
        return None
    handle: JobHandle | None = reclaim(intent["job"])
    if handle is None:
        return _fail(registry, run, res, "launch was interrupted before the job started (nothing runs); resume it")
    if registry.adopt_handle(run.id, res.index, handle_record(handle), handle.job_id):
        details = {"resumption": res.index, "job_id": handle.job_id, "cluster": res.cluster}
        registry.add_event(run.id, "adopted", res.index, details)
        notify_run_event(run.name, "adopted", details)
        return f"{run.name}: resumption {res.index} adopted job {handle.job_id} (its launcher had exited)"
    return None


def reclaim_after_error(provider: Any, intent: dict[str, Any] | None) -> JobHandle | None:
    """After provider.launch raised: the job's handle if the launch got far enough to start one."""
    reclaim = getattr(provider, "reclaim", None)
    if not intent or intent.get("job") is None or not callable(reclaim):
        return None
    try:
        return reclaim(intent["job"])
    except Exception as exc:  # the original error is the one to report
        log.warning("could not check for a half-launched job: %s", exc)
        return None


def _fail(registry: "Registry", run: "RunInfo", res: "Resumption", reason: str) -> str | None:
    # A person's launch (create, resume) that died is theirs to repeat: failed. The watchdog's own
    # relaunch that died (kill -9 of `foundry watch`) is a system failure: lost, so the next pass
    # relaunches it while retries are left (the run must not need hands for that).
    state = "lost" if res.cause in RELAUNCH_CAUSES else "failed"
    if registry.transition(run.id, res.index, res.state, state, state,
                           {"resumption": res.index, "reason": reason},
                           ended_at=time.time(), exit_reason=reason):
        notify_run_event(run.name, state, {"resumption": res.index, "reason": reason})
        return f"{run.name}: resumption {res.index} {state}: launch interrupted"
    return None

