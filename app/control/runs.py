"""Runs: the lifecycle of a run (create, stop, resume, move, delete, wait) and what it reports (logs,
metrics, transfers, progress, checkpoints), over the registry, the clusters and one Launcher.

ControlPlane (plane.py) documents the contract; this service implements it, and the watchdog step
(reconcile.py) runs before every read that asks for fresh states.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Any, Callable, Iterator

from foundry.plugins.errors import ConfigError, FoundryError, ProviderError
from foundry.plugins.manager import notify_run_event

from foundry.app.names import check_name
from foundry.app.runspec import RunSpec, apply_overrides, load_spec, parse_spec

from .state_errors import not_active, not_resumable
from . import run_checkpoints, run_views
from .clusters import Clusters
from .config import FoundryPaths
from .launch import placement_for, placements_for
from .launcher import Launcher
from .metrics_log import read_metrics
from .models import ACTIVE_STATUSES, RESUMABLE_STATUSES, DryRun, RunInfo
from .reconcile import Watchdog
from .recovery import Ledger, ledger
from .registry import Registry
from .run_views import CheckpointRow, RunProgress

# How long wait() gives another reconciler to record the relaunch of a run it filed as lost.
RETRY_GRACE_S = 30.0
from .secret_env import secret_environment
from .secrets import SecretStore, mask

log = logging.getLogger("foundry.control")


class Runs:
    def __init__(self, paths: FoundryPaths, registry: Registry, clusters: Clusters, secrets: SecretStore,
                 launcher: Launcher):
        self.paths, self.registry, self.clusters, self.secrets = paths, registry, clusters, secrets
        self.launcher = launcher
        self.watchdog = Watchdog(paths, registry, clusters, launcher)

    # --- specs --------------------------------------------------------------------------------
    def spec(self, spec: RunSpec | dict | str | os.PathLike, **overrides: Any) -> RunSpec:
        """A validated RunSpec from a RunSpec, a dict or a run.yaml path, with CLI-style overrides."""
        if isinstance(spec, RunSpec):
            pass
        elif isinstance(spec, dict):
            spec = parse_spec(spec)
        else:
            spec = load_spec(spec)
        if any(v is not None for v in overrides.values()):
            spec = apply_overrides(spec, **overrides)
        if spec.command is None:  # the built-in trainer: its parameters are checked now, not in the job
            from foundry.trainer.parameters import check_parameters

            check_parameters(spec.parameters)
        return spec

    def check_refs(self, spec: RunSpec, cluster: str) -> None:
        self.clusters.config(cluster)
        missing = [s for s in spec.secrets if not self.secrets.exists(s)]
        if missing:
            raise ConfigError(f"run {spec.name!r} needs secret(s) {', '.join(missing)} that do not exist",
                              hint="`foundry get secrets` lists them; `foundry create secret` adds one")

    def dry_run(self, spec: RunSpec | dict | str, *, name: str | None = None, cluster: str | None = None,
                gpus: int | None = None, nodes: int | None = None) -> DryRun:
        spec = self.spec(spec, name=name, cluster=cluster, gpus=gpus, nodes=nodes)
        place = placement_for(spec)
        self.check_refs(spec, place.cluster)
        planned = self.launcher.plan(spec, "dry-run", 0, place)
        plan, secret_values = planned.plan, self.secrets.secret_values(spec.secrets)
        env = {k: ("***" if v in secret_values else mask(v, secret_values)) for k, v in plan.request.env.items()}
        return DryRun(
            spec=spec.to_dict(), cluster=place.cluster, provider=getattr(planned.provider, "name", "?"),
            summary=mask(plan.summary, secret_values), env=env,
            secret_files=[m.path for m in plan.request.secret_files],
            artifacts={k: mask(v, secret_values) for k, v in plan.artifacts.items()},
        )

    # --- lifecycle ----------------------------------------------------------------------------
    def create(self, spec: RunSpec | dict | str, *, name: str | None = None, cluster: str | None = None,
               gpus: int | None = None, nodes: int | None = None) -> RunInfo:
        spec = self.spec(spec, name=name, cluster=cluster, gpus=gpus, nodes=nodes)
        place = placement_for(spec)
        self.check_refs(spec, place.cluster)
        run_id = self.registry.new_run_id()
        # planned once, before the run exists: a plan the provider refuses never becomes a run
        planned = self.launcher.plan(spec, run_id, 0, place, submit_dir=os.getcwd())
        # The run and its resumption 0 (with the launch intent) are born together, before anything
        # starts: a CLI killed at any later moment leaves a run that reconcile settles (launch_intent.py).
        self.registry.create_run(spec.name, spec.to_dict(), spec.scheduling.max_retries, submit_dir=os.getcwd(),
                                 first=self.launcher.resumption_fields(place, "create"), run_id=run_id)
        notify_run_event(spec.name, "created", {"cluster": place.cluster})
        self.launcher.launch(spec, run_id, place, cause="create", idx=0, planned=planned)
        return self.get(spec.name, reconcile=False)

    def require(self, name: str) -> RunInfo:
        """The run `name` as recorded (no reconcile); ConfigError when there is none."""
        run = self.registry.get_run(check_name("run", name))
        if run is None:
            raise ConfigError(f"no run named {name!r}", hint="`foundry get runs` lists runs")
        return run

    def list(self, reconcile: bool = True) -> list[RunInfo]:
        if reconcile:
            self.reconcile()
        return self.registry.list_runs()

    def get(self, name: str, reconcile: bool = True) -> RunInfo:
        self.require(name)
        if reconcile:
            self.reconcile(name)
        return self.require(name)

    def reconcile(self, name: str | None = None) -> list[str]:
        return self.watchdog.step(name)

    def stop(self, name: str, graceful: bool = True) -> RunInfo:
        run = self.get(name)
        latest = run.latest
        if latest is None or latest.state not in ACTIVE_STATUSES:
            raise not_active(name, run.status)
        handle = self.launcher.handle(run, latest.index)
        self.clusters.provider(latest.cluster).stop(handle, graceful=graceful)
        details = {"resumption": latest.index, "graceful": graceful}
        if self.registry.transition(run.id, latest.index, latest.state, "stopping", "stopping", details):
            notify_run_event(name, "stopping", details)
        return self.get(name, reconcile=False)

    def resume(self, name: str, cluster: str | None = None, gpus: int | None = None,
               nodes: int | None = None) -> RunInfo:
        run = self.get(name)
        if run.status not in RESUMABLE_STATUSES:
            raise not_resumable(name, run.status)
        last = run.latest
        asked = cluster is not None or gpus is not None or nodes is not None   # a person chose the placement
        if gpus is None and last is not None:
            # `--nodes N` alone keeps the processes per node and derives the total
            gpus = last.devices // max(1, last.nodes) * nodes if nodes else last.devices
        spec = parse_spec(run.spec)
        place = placement_for(spec, cluster or (last.cluster if last else None), gpus,
                              nodes or (last.nodes if last else None))
        planned, because = None, None
        if not asked and last is not None:
            planned, because = self._preferred(spec, run, last, place)
            if planned is not None:
                place = placements_for(spec)[0]
        self.check_refs(spec, place.cluster)
        # decided on `last`: a resume, move or retry that launched since makes this one a LaunchConflict
        idx = self.launcher.launch(spec, run.id, place, cause="resume", after=last, states=RESUMABLE_STATUSES,
                                   planned=planned, placed_because=because)
        self.registry.add_event(run.id, "resumed", idx, {"cluster": place.cluster, "devices": place.devices})
        notify_run_event(name, "resumed", {"resumption": idx, "cluster": place.cluster, "devices": place.devices})
        return self.get(name, reconcile=False)

    def _preferred(self, spec: RunSpec, run: RunInfo, last, place):
        """`scheduling.prefer: first`: a run that failed over goes back to its first placement when that
        one can take it now (reachable, nodes up, the plan accepted); (planned, why) or (None, None)."""
        first = placements_for(spec)[0]
        if spec.scheduling.prefer != "first" or not spec.failover or place.cluster == first.cluster:
            return None, None
        try:
            planned = self.launcher.plan(spec, run.id, last.index + 1, first, run.submit_dir, now="nodes")
        except FoundryError as exc:
            log.info("%s: prefer first: %s cannot take it now (%s); resuming on %s", run.name, first.cluster,
                     exc.message, place.cluster)
            return None, None
        return planned, f"prefer: first - back on placement 1 ({first.cluster}) from {last.cluster}"

    def check_placement(self, name: str, cluster: str | None = None, gpus: int | None = None,
                        nodes: int | None = None) -> DryRun:
        """What resume would check, ahead of time: the spec with the overrides, the cluster and
        secrets, and the provider's own dry run (e.g. `local` refuses nodes > 1)."""
        run = self.get(name, reconcile=False)
        last = run.latest
        return self.dry_run(run.spec, cluster=cluster or (last.cluster if last else None),
                            gpus=gpus if gpus is not None else (last.devices if last else None),
                            nodes=nodes or (last.nodes if last else None))

    def move(self, name: str, cluster: str | None = None, gpus: int | None = None, nodes: int | None = None,
             timeout: float | None = None, on_step: Callable[[str], None] | None = None) -> RunInfo:
        """Pause an active run at a checkpoint, wait until it has stopped, then resume it elsewhere."""
        say = on_step or (lambda _msg: None)
        self.check_placement(name, cluster, gpus, nodes)
        run = self.get(name)
        if run.status in ACTIVE_STATUSES:
            if run.status != "stopping":
                say(f"pausing {name}")
                self.stop(name, graceful=True)
            say(f"waiting for {name} to pause")
            run = self.wait(name, timeout=timeout)
        if run.status not in RESUMABLE_STATUSES:
            raise ConfigError(f"run {name!r} ended {run.status}; it cannot be moved",
                              hint="only paused, stopped, failed or lost runs resume")
        say(f"resuming {name} on {cluster or run.cluster}")
        try:
            return self.resume(name, cluster=cluster, gpus=gpus, nodes=nodes)
        except ProviderError as exc:
            raise ProviderError(f"{name} is paused but could not resume: {exc.message}", hint=exc.hint) from exc

    def delete(self, name: str, checkpoints: str = "keep") -> str | None:
        if checkpoints not in ("keep", "delete"):
            raise ConfigError(f"checkpoints={checkpoints!r}: use 'keep' or 'delete'")
        run = self.get(name)
        ckpt_url = run_checkpoints.checkpoint_url(self.paths.run_dir(name))
        if run.latest and run.latest.state in ACTIVE_STATUSES:
            try:
                handle = self.launcher.handle(run, run.latest.index)
                self.clusters.provider(run.latest.cluster).stop(handle, graceful=False)
            except FoundryError as exc:
                log.warning("could not stop %s before deleting: %s", name, exc.message)
        if checkpoints == "delete" and ckpt_url:
            run_checkpoints.delete_checkpoints(ckpt_url)  # first: a failure leaves the run to retry with
        self.registry.delete_run(name)
        shutil.rmtree(self.paths.run_dir(name), ignore_errors=True)
        notify_run_event(name, "deleted", {"checkpoints": checkpoints})
        return ckpt_url

    def wait(self, name: str, timeout: float | None = None, poll: float = 0.5) -> RunInfo:
        """The run once it is no longer active. A run lost with retries left is not done: another
        reconciler (the daemon, another CLI) filed the loss and is relaunching it (this process's
        own reconcile would have relaunched it in the same step); it is waited for up to
        RETRY_GRACE_S before the loss is taken as final."""
        deadline = None if timeout is None else time.monotonic() + timeout
        lost_at = None
        while True:
            run = self.get(name)
            if run.status not in ACTIVE_STATUSES:
                if not (run.status == "lost" and run.retries_used < run.max_retries):
                    return run
                lost_at = lost_at or time.monotonic()
                if time.monotonic() - lost_at > RETRY_GRACE_S:
                    return run
            else:
                lost_at = None
            if deadline is not None and time.monotonic() > deadline:
                raise ProviderError(f"run {name!r} is still {run.status} after {timeout:.0f}s")
            time.sleep(poll)

    # --- what a run reports -------------------------------------------------------------------
    def logs(self, name: str, resumption: int | None = None, rank: int | None = None,
             follow: bool = False) -> Iterator[str]:
        run = self.require(name)
        if not run.resumptions:
            return iter(())
        idx = run.latest.index if resumption is None else resumption
        if not 0 <= idx < len(run.resumptions):
            raise ConfigError(f"run {name!r} has no resumption {idx} (it has 0..{len(run.resumptions) - 1})")
        provider = self.clusters.provider(run.resumptions[idx].cluster)
        handle = self.launcher.handle(run, idx)
        return (line.rstrip("\n") for line in provider.logs(handle, follow=follow, rank=rank))

    def follow(self, name: str, rank: int | None = None) -> Iterator[str]:
        """Follow the run's logs across watchdog retries until it stops being active."""
        idx = None
        while True:
            run = self.get(name)
            latest = run.latest
            if latest is None or latest.index == idx:
                return
            idx = latest.index
            if idx > 0:
                yield f"--- resumption {idx} ({latest.cause}) on {latest.cluster} ---"
            yield from self.logs(name, resumption=idx, rank=rank, follow=True)
            self.wait(name)

    def metrics(self, name: str) -> list[dict]:
        self.require(name)
        return read_metrics(self.paths.run_dir(name) / "metrics.jsonl")

    def egress(self, name: str) -> dict:
        """Bytes per resumption, node and store, and the estimated transfer cost (egress.py)."""
        from . import egress

        return egress.summarize(self.paths.run_dir(name), egress.load_prices(self.paths.home))

    def checkpoint_url(self, name: str) -> str | None:
        self.require(name)
        return run_checkpoints.checkpoint_url(self.paths.run_dir(name))

    def progress(self, run: RunInfo) -> RunProgress:
        """Step / max, loss, throughput and ETA from the run's metrics (run_views.py)."""
        return run_views.run_progress(self.paths.run_dir(run.name), run, self.metrics(run.name))

    def ledger(self, run: RunInfo, records: list[dict] | None = None, now: float | None = None) -> Ledger:
        """Each resumption's end, detection and restart times, steps redone, and goodput (recovery.py)."""
        from foundry.plugins.heartbeat import last_beat

        run_dir = self.paths.run_dir(run.name)
        beats = {r.index: last_beat(run_dir, r.index) for r in run.resumptions}
        return ledger(run, self.metrics(run.name) if records is None else records, beats,
                      time.time() if now is None else now)

    def resolved_config(self, name: str) -> dict[str, Any]:
        """The trainer's resolved config when it wrote one, else the run spec."""
        return run_views.resolved_config(self.paths.run_dir(name), self.get(name, reconcile=False))

    def save_url(self, run: RunInfo) -> str | None:
        return run_views.save_url(self.paths.run_dir(run.name), run)

    def checkpoints(self, run: RunInfo) -> list[CheckpointRow]:
        """The checkpoints in the run's save folder (oldest first), read with the run's own secrets."""
        url = self.save_url(run)
        if not url:
            return []
        with secret_environment(self.secrets, run.spec.get("secrets") or []):
            return run_views.list_checkpoints(url)
