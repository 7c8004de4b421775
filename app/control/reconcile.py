"""The watchdog step: refresh active resumptions from their providers; relaunch lost runs.

A status call that fails (timeout, API error, frozen controller) is no evidence: the run shows
`unknown` with the reason and since when, and nothing is relaunched or killed, unless the job's own
heartbeat has been silent past its deadline as well (then it is lost; plugins/heartbeat.py).

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

from foundry.plugins.compute import JobHandle, JobState
from foundry.plugins.errors import FoundryError
from foundry.plugins.heartbeat import all_ended as heartbeat_all_ended
from foundry.plugins.heartbeat import deadline_s as heartbeat_deadline_s
from foundry.plugins.heartbeat import last_beat
from foundry.plugins.manager import notify_run_event

from foundry.app.runspec import parse_spec

from .clusters import Clusters
from .config import FoundryPaths
from .failure_reason import failure_reason
from .launch import placement_for, placements_for
from .launch_intent import resolve as resolve_launch
from .launcher import Launcher
from .metrics_log import read_metrics
from .models import ACTIVE_STATUSES, Resumption, RunInfo
from .registry import LaunchConflict, Registry
from .run_views import resumed_from

log = logging.getLogger("foundry.control")

RELAUNCH_BACKOFF_S = 60.0   # between two tries to relaunch a lost run that no placement could take


class Watchdog:
    def __init__(self, paths: FoundryPaths, registry: Registry, clusters: Clusters, launcher: Launcher):
        self.paths, self.registry, self.clusters, self.launcher = paths, registry, clusters, launcher
        self.heartbeat_deadline = heartbeat_deadline_s()

    def step(self, name: str | None = None) -> list[str]:
        """One pass over the active runs (or the run `name`); one line per action taken."""
        actions: list[str] = []
        runs = [self.registry.get_run(name, events=False)] if name else self.registry.list_runs()
        for run in runs:
            if run is None or run.latest is None:
                continue
            if run.latest.state in ACTIVE_STATUSES:
                actions += self._observe(run)
            elif run.latest.state == JobState.LOST.value and run.retries_used < run.max_retries:
                # a loss filed by a reconciler that died before it relaunched (kill -9 of `foundry watch`),
                # or one no placement could take: the relaunch is a compare-and-set on this lost
                # resumption, so it happens once; asked again at most every RELAUNCH_BACKOFF_S (asking
                # an unreachable cluster can take a minute, and every command takes a pass)
                waited = self.registry.last_event_time(run.id, "relaunch_waiting")
                if waited is None or time.time() - waited >= RELAUNCH_BACKOFF_S:
                    actions += filter(None, [self._retry(run, run.latest)])
        return actions

    def _observe(self, run: RunInfo) -> list[str]:
        actions: list[str] = []
        res = run.latest
        handle_data = self.registry.handle(run.id, res.index)
        if handle_data is None:  # being launched by another process now, or that process died
            try:
                action = resolve_launch(self.registry, self.clusters, run, res)
            except FoundryError as exc:
                log.warning("cannot settle the launch of %s: %s", run.name, exc.message)
                return actions
            if action:
                actions.append(action)
            handle_data = self.registry.handle(run.id, res.index)
            if handle_data is None:
                return actions
            run = self.registry.get_run(run.name, events=False) or run
            res = run.latest
        if not res.resumed_from:  # known as soon as the trainer restored, not only at the end
            self._record_resumed_from(run, res.index)
        try:
            provider = self.clusters.provider(res.cluster)
            status = provider.status(JobHandle(**handle_data))
        except FoundryError as exc:
            return actions + self._unobservable(run, res, exc.message)
        if status.state is JobState.UNKNOWN:
            return actions + self._unobservable(run, res, status.reason or "the provider reports an unknown state")
        if res.unknown_since is not None and self.registry.mark_observed(run.id, res.index, res.state):
            actions.append(f"{run.name}: observed again after {time.time() - res.unknown_since:.0f}s")
        state = status.state.value
        if state == res.state:
            return actions
        if not status.state.terminal:
            if res.state == "stopping":
                return actions  # the provider still sees it running: the stop is in flight
            if self.registry.transition(run.id, res.index, res.state, state, state, {"resumption": res.index}):
                notify_run_event(run.name, state, {"resumption": res.index, "cluster": res.cluster})
            return actions
        # A job that ends by a signal after the user stopped it was stopped; one that fails on its own
        # error while stopping (exit code < 128) still failed. "stopping" means someone asked: providers
        # report STOPPING only from the marker their stop() writes (never from a SIGTERM the scheduler
        # sent on its own, e.g. Slurm after NODE_FAIL), so a lost node stays LOST and is retried.
        stopped_by_user = res.state == "stopping" and (
            status.state is JobState.LOST
            or status.state is JobState.FAILED and (status.exit_code is None or status.exit_code >= 128))
        if stopped_by_user:
            state = "stopped"
        reason = status.reason
        if state == JobState.FAILED.value:  # the job's own last error line says why
            reason = failure_reason(provider, JobHandle(**handle_data), status.exit_code, reason)
        details = {"resumption": res.index, "cluster": res.cluster, "exit_code": status.exit_code,
                   "reason": reason}
        if not self.registry.transition(run.id, res.index, res.state, state, state, details,
                                        ended_at=time.time(), exit_code=status.exit_code, exit_reason=reason):
            return actions  # another reconciler got there first
        notify_run_event(run.name, state, details)
        actions.append(f"{run.name}: resumption {res.index} {state}")
        if not res.resumed_from:
            self._record_resumed_from(run, res.index)
        if state == JobState.LOST.value and run.retries_used < run.max_retries:
            actions += filter(None, [self._retry(run, res)])
        return actions

    def _unobservable(self, run: RunInfo, res: Resumption, reason: str) -> list[str]:
        """The provider cannot say what the job does (a timeout, an API error, a frozen controller).
        No evidence, no action: the run shows `unknown` with the reason and since when. Lost only
        when the job's own heartbeat (plugins/heartbeat.py) has also been silent past the deadline,
        for at least the deadline of unreachability: a job that never beat stays unknown."""
        now = time.time()
        beat = last_beat(self.paths.run_dir(run.name), res.index)
        since = res.unknown_since or now
        if (res.state != "pending" and beat is not None and now - beat > self.heartbeat_deadline
                and now - since >= self.heartbeat_deadline
                and not heartbeat_all_ended(self.paths.run_dir(run.name), res.index)):
            why = (f"no heartbeat for {now - beat:.0f}s and the provider unreachable for {now - since:.0f}s "
                   f"({reason})")
            details = {"resumption": res.index, "cluster": res.cluster, "reason": why}
            if not self.registry.transition(run.id, res.index, res.state, "lost", "lost", details,
                                            ended_at=now, exit_reason=why):
                return []
            notify_run_event(run.name, "lost", details)
            actions = [f"{run.name}: resumption {res.index} lost ({why})"]
            if run.retries_used < run.max_retries:
                actions += filter(None, [self._retry(run, res)])
            return actions
        log.warning("cannot observe %s: %s", run.name, reason)
        if self.registry.mark_unknown(run.id, res.index, res.state, reason):
            notify_run_event(run.name, "unknown", {"resumption": res.index, "reason": reason})
            return [f"{run.name}: unknown ({reason})"]
        return []

    def _retry(self, run: RunInfo, res: Resumption) -> str | None:
        """Relaunch a lost run (the launcher's one path), decided on the lost resumption `res`: None
        when another launcher relaunched it first.

        Without a failover list: where it ran, with the same devices, once that cluster answers.
        With one (`compute:` as a list): on the first placement, in the spec's order, that can take
        it now (reachable, enough nodes up, the plan accepted), with that placement's device count;
        the trainer keeps the global batch and the data order. Nothing can: the run stays lost and
        the next pass asks again."""
        spec = parse_spec(run.spec)
        if spec.failover:
            choices = placements_for(spec)
        else:
            choices = [placement_for(spec, res.cluster, res.devices, res.nodes)]
        refused: list[str] = []
        for n, place in enumerate(choices, 1):
            try:
                # an unreachable cluster is never launched on (that would spend a retry on nothing); a
                # failover choice also needs its nodes up, a plain retry may queue for them
                planned = self.launcher.plan(spec, run.id, res.index + 1, place, run.submit_dir,
                                             now="nodes" if spec.failover else "reachable")
            except FoundryError as exc:
                refused.append(f"{place.cluster}: {exc.message}")
                continue
            cause = "retry" if place.cluster == res.cluster else "failover"
            why = (f"placement {n} of {len(choices)} ({place.cluster}, {place.nodes} node(s), {place.devices} "
                   f"device(s)) after resumption {res.index} was lost on {res.cluster}")
            if refused:
                why += "; refused: " + "; ".join(refused)
            try:
                # planned for index res.index + 1, which the compare-and-set gives it or refuses
                idx = self.launcher.launch(spec, run.id, place, cause=cause, after=res,
                                           states=(JobState.LOST.value,), planned=planned, placed_because=why)
            except LaunchConflict:
                return None
            except FoundryError as exc:
                return f"{run.name}: retry failed: {exc.message}"
            retry = {"resumption": idx, "cluster": place.cluster, "devices": place.devices, "nodes": place.nodes,
                     "attempt": run.retries_used + 1, "max_retries": run.max_retries, "why": why}
            self.registry.add_event(run.id, "retried" if cause == "retry" else "failover", idx, retry)
            notify_run_event(run.name, "retried", retry)
            verb = "retried" if cause == "retry" else f"failed over to {place.cluster}"
            return f"{run.name}: {verb} as resumption {idx}"
        self.registry.add_event(run.id, "relaunch_waiting", res.index, {"refused": refused})
        return f"{run.name}: no placement can take it now ({'; '.join(refused)}); it stays lost until one can"

    def _record_resumed_from(self, run: RunInfo, idx: int) -> None:
        """The checkpoint the trainer resumed from: its structured `resumed` record in metrics.jsonl."""
        records = read_metrics(self.paths.run_dir(run.name) / "metrics.jsonl")
        checkpoint = resumed_from(records).get(idx)
        if checkpoint:
            self.registry.update_resumption(run.id, idx, resumed_from=checkpoint)
