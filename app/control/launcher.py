"""Launching one resumption of a run: plan it on its cluster, record how to find the job, start it.

Every resumption takes this one path (create, resume, move, the watchdog's retry). The row and its
launch intent are in the registry before the provider starts anything (launch_intent.py); a launch
that fails half-way adopts the job it started, or makes sure it never runs, before it reports.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from foundry.plugins.compute import ComputeProvider, JobHandle, Plan
from foundry.plugins.errors import FoundryError, ProviderError
from foundry.plugins.manager import notify_run_event

from foundry.app.runspec import RunSpec

from .clusters import Clusters
from .config import FoundryPaths
from .launch import (Placement, build_request, check_available, check_capacity, check_support, describe_cluster,
                     wants_gpus)
from .launch_intent import (RELAUNCH_CAUSES, handle_record, launcher_alive, launching_intent, planning_intent,
                            reclaim_after_error)
from .models import Resumption, RunInfo
from .registry import Registry
from .secrets import SecretStore

log = logging.getLogger("foundry.control")


@dataclass(frozen=True)
class Planned:
    """A provider's plan for one resumption, and the provider that made it (launch it as is)."""

    provider: ComputeProvider
    plan: Plan


class Launcher:
    def __init__(self, paths: FoundryPaths, registry: Registry, clusters: Clusters, secrets: SecretStore):
        self.paths, self.registry, self.clusters, self.secrets = paths, registry, clusters, secrets

    def plan(self, spec: RunSpec, run_id: str, idx: int, place: Placement,
             submit_dir: str | None = None, now: str | None = None) -> Planned:
        """The provider's dry run for this placement; ConfigError when the cluster cannot honour it.
        The watchdog's relaunch also asks whether it can take it now (ProviderError otherwise):
        `now="reachable"` (the cluster answers) or `now="nodes"` (and enough of its nodes are up)."""
        provider = self.clusters.provider(place.cluster)
        desc = describe_cluster(provider)  # once: capacity and the GPU decision read the same answer
        if now:
            check_available(place, desc, nodes_up=now == "nodes")
        check_capacity(provider, place, desc)
        check_support(provider, place, spec)
        request = build_request(self.paths, self.secrets, spec, run_id, idx, place,
                                gpu_cluster=wants_gpus(provider, place, desc))
        request.extra["submit_dir"] = submit_dir or os.getcwd()
        grace = spec.grace or getattr(provider.capabilities, "notice_window_s", None)
        if grace:  # the trainer checks its last checkpoint fits (trainer/notice_window.py)
            request.env["FOUNDRY_GRACE_S"] = f"{grace:g}"
        return Planned(provider, provider.dryrun(request))

    def resumption_fields(self, place: Placement, cause: str, placed_because: str | None = None) -> dict[str, Any]:
        """A new resumption row (Registry.add_resumption's keywords), born with its planning intent;
        the watchdog's relaunches (retry, failover) count against max_retries."""
        return dict(cluster=place.cluster, provider=self.clusters.config(place.cluster)["provider"],
                    nodes=place.nodes, devices=place.devices, cause=cause, retry=cause in RELAUNCH_CAUSES,
                    launch_intent=planning_intent(), placed_because=placed_because)

    def launch(self, spec: RunSpec, run_id: str, place: Placement, cause: str, *, idx: int | None = None,
               planned: Planned | None = None, after: Resumption | None = None,
               states: tuple[str, ...] = (), placed_because: str | None = None) -> int:
        """Start resumption `idx` (recorded with the run by create), or a new one decided on `after`:
        it is recorded only if `after` is still the run's latest resumption and in one of `states`
        (one registry transaction; LaunchConflict otherwise), so no two launchers start the same run."""
        if idx is None:
            if after is None:
                raise ValueError("a new resumption is decided on the latest one (after=)")
            idx = self.registry.add_resumption(run_id, after=after.index, states=states,
                                               **self.resumption_fields(place, cause, placed_because))
        details = {"resumption": idx, "cluster": place.cluster, "devices": place.devices, "nodes": place.nodes}
        provider, intent = None, None
        try:
            if planned is None:
                run = self.registry.get_run(spec.name, events=False)
                planned = self.plan(spec, run_id, idx, place, run.submit_dir if run else None)
            provider = planned.provider
            self.paths.run_dir(spec.name).mkdir(parents=True, exist_ok=True)
            # how to find the job if this process dies before its handle is recorded
            intent = launching_intent(provider, planned.plan)
            self.registry.update_resumption(run_id, idx, launch_intent=intent)
            handle = provider.launch(planned.plan)
        except Exception as exc:
            # a launch that failed half-way (an sbatch that timed out after submitting) may have a job:
            # adopt it, or make sure it never runs, before reporting the failure
            handle = reclaim_after_error(provider, intent)
            if handle is None:
                message = exc.message if isinstance(exc, FoundryError) else f"{type(exc).__name__}: {exc}"
                # the watchdog's own relaunch that a cluster refused is a system failure: lost, so the
                # next pass tries again (the failover order); so is a cloud with no capacity now
                # (ProviderError.retry_eligible: vm/base.py NoCapacityError); a person's launch failed
                # otherwise, and says why
                retry_eligible = getattr(exc, "retry_eligible", False) is True
                state = "lost" if cause in RELAUNCH_CAUSES or retry_eligible else "failed"
                self.registry.transition(run_id, idx, "pending", state, state,
                                         {**details, "reason": message}, ended_at=time.time(),
                                         exit_reason=f"launch failed: {message}")
                notify_run_event(spec.name, state, {**details, "reason": message})
                if isinstance(exc, FoundryError):
                    raise
                raise ProviderError(f"cluster {place.cluster!r} could not launch run {spec.name!r}: {exc}") from exc
            log.warning("launching %s raised (%s), but its job %s exists: adopted", spec.name, exc, handle.job_id)
        self.registry.update_resumption(run_id, idx, handle=handle_record(handle), job_id=handle.job_id)
        self.registry.add_event(run_id, "launched", idx, {**details, "job_id": handle.job_id})
        notify_run_event(spec.name, "launched", {**details, "job_id": handle.job_id})
        return idx

    def handle(self, run: RunInfo, idx: int) -> JobHandle:
        """The job of resumption `idx`; ProviderError while it is being launched, or if it never was."""
        data = self.registry.handle(run.id, idx)
        if data is None:
            launcher = (self.registry.launch_intent(run.id, idx) or {}).get("launcher") or {}
            if launcher and launcher_alive(launcher):
                raise ProviderError(f"resumption {idx} of run {run.name!r} is being launched by process "
                                    f"{launcher.get('pid')} right now", hint="try again in a moment")
            raise ProviderError(f"resumption {idx} of run {run.name!r} was never launched")
        return JobHandle(**data)
