"""The watchdog step: refresh active resumptions from their providers; relaunch lost runs.

A resumption whose job died of a system failure (JobState.LOST: killed, node lost, preempted) is
relaunched as a new resumption (cause "retry") while the run has retries left
(scheduling.max_retries); the trainer's autoresume continues from the latest checkpoint. A job that
failed on its own error (FAILED) is never retried; neither is one the user stopped. State changes are
compare-and-set in the registry, so concurrent reconcilers (two CLIs, the TUI, `foundry watch`) act
on each transition exactly once.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from foundry.plugins.compute import JobHandle, JobState
from foundry.plugins.errors import FoundryError

from .models import ACTIVE_STATUSES

if TYPE_CHECKING:
    from .plane import ControlPlane

log = logging.getLogger("foundry.control")


LAUNCH_GRACE_S = 120.0  # a resumption with no job handle after this long was never launched


def _record_resumed_from(cp, run, idx: int) -> None:
    """The checkpoint the trainer resumed from: its structured `resumed` record in metrics.jsonl."""
    from .run_views import resumed_from

    checkpoint = resumed_from(cp.metrics(run.name)).get(idx)
    if checkpoint:
        cp.registry.update_resumption(run.id, idx, resumed_from=checkpoint)


def reconcile(cp: "ControlPlane", name: str | None = None) -> list[str]:
    """Returns one line per action taken (for `foundry watch` and tests)."""
    from foundry.app.runspec import parse_spec

    from .launch import placement_for

    actions: list[str] = []
    runs = [cp.registry.get_run(name, events=False)] if name else cp.registry.list_runs()
    for run in runs:
        if run is None or run.latest is None or run.latest.state not in ACTIVE_STATUSES:
            continue
        res = run.latest
        handle_data = cp.registry.handle(run.id, res.index)
        if handle_data is None:  # being launched by another process right now, or that process died
            if res.state == "pending" and time.time() - (res.started_at or 0) > LAUNCH_GRACE_S:
                reason = "launch was interrupted (the process launching it exited); resume it"
                if cp.registry.transition(run.id, res.index, "pending", "failed", "failed",
                                          {"resumption": res.index, "reason": reason},
                                          ended_at=time.time(), exit_reason=reason):
                    cp.emit(run.name, "failed", {"resumption": res.index, "reason": reason})
                    actions.append(f"{run.name}: resumption {res.index} failed: launch interrupted")
            continue
        if not res.resumed_from:  # known as soon as the trainer restored, not only at the end
            _record_resumed_from(cp, run, res.index)
        try:
            provider = cp.clusters.provider(res.cluster)
            status = provider.status(JobHandle(**handle_data))
        except FoundryError as exc:
            log.warning("cannot observe %s: %s", run.name, exc.message)
            continue
        state = status.state.value
        if state == res.state or state == JobState.UNKNOWN.value:
            continue
        if not status.state.terminal:
            if res.state == "stopping":
                continue  # the provider still sees it running: the stop is in flight
            if cp.registry.transition(run.id, res.index, res.state, state, state, {"resumption": res.index}):
                cp.emit(run.name, state, {"resumption": res.index, "cluster": res.cluster})
            continue
        # A job that ends by a signal after the user stopped it was stopped; one that fails on its own
        # error while stopping (exit code < 128) still failed.
        stopped_by_user = res.state == "stopping" and (
            status.state is JobState.LOST
            or status.state is JobState.FAILED and (status.exit_code is None or status.exit_code >= 128))
        if stopped_by_user:
            state = "stopped"
        details = {"resumption": res.index, "cluster": res.cluster, "exit_code": status.exit_code,
                   "reason": status.reason}
        if not cp.registry.transition(run.id, res.index, res.state, state, state, details,
                                      ended_at=time.time(), exit_code=status.exit_code,
                                      exit_reason=status.reason):
            continue  # another reconciler got there first
        cp.emit(run.name, state, details)
        actions.append(f"{run.name}: resumption {res.index} {state}")
        if not res.resumed_from:
            _record_resumed_from(cp, run, res.index)
        if state == JobState.LOST.value and run.retries_used < run.max_retries:
            spec = parse_spec(run.spec)
            place = placement_for(spec, res.cluster, res.devices, res.nodes)
            try:
                idx = cp._launch(spec, run.id, place, cause="retry")
            except FoundryError as exc:
                actions.append(f"{run.name}: retry failed: {exc.message}")
                continue
            retry = {"resumption": idx, "cluster": res.cluster,
                     "attempt": run.retries_used + 1, "max_retries": run.max_retries}
            cp.registry.add_event(run.id, "retried", idx, retry)
            cp.emit(run.name, "retried", retry)
            actions.append(f"{run.name}: retried as resumption {idx}")
    return actions
