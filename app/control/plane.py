"""The control plane facade: the one API the CLI, the TUI and the SDK call.

    from foundry.app.control import ControlPlane
    cp = ControlPlane()                      # FOUNDRY_HOME, or ControlPlane(home="/some/dir")

Contract (for the CLI, TUI and SDK; all methods are synchronous, safe to call from a worker thread
and from several processes at once; every error is a FoundryError with a one-line message and a hint):

Runs
- create_run(spec, *, name=None, cluster=None, gpus=None, nodes=None) -> RunInfo
      `spec`: a RunSpec, a dict, or a path to run.yaml. Records the run, plans it on its cluster,
      launches resumption 0. ConfigError for a bad spec, an unknown cluster or secret, a taken name,
      a placement beyond the cluster, or an image/gpu_type/launch mode the cluster cannot honour.
      Every resumption is recorded with a launch intent before anything starts (launch_intent.py).
- dry_run(spec, **same overrides) -> DryRun: the normalized spec and the provider's plan, secrets masked.
- list_runs(reconcile=True) -> list[RunInfo] (newest first, without events).
- get_run(name, reconcile=True) -> RunInfo with resumptions (oldest first) and events.
- stop_run(name, graceful=True) -> RunInfo: graceful asks the job to checkpoint and exit as paused
      (SIGTERM; the trainer exits 75 -> status "paused"); the status is "stopping" until it exits.
- resume_run(name, cluster=None, gpus=None, nodes=None) -> RunInfo: a new resumption, anywhere, of a
      run that is paused, stopped, failed or lost.
- delete_run(name, checkpoints="keep") -> str | None: stops it if active (not gracefully), forgets it
      and its files; its checkpoints are the user's: kept unless checkpoints="delete". Returns their URL.
- checkpoint_url(name) -> str | None: where the run's trainer saves checkpoints (from its run folder).
- logs(name, resumption=None, rank=None, follow=False) -> Iterator[str]: lines (no trailing newline)
      of the latest (or given) resumption; rank=None is the whole job's log, rank=N one process.
      follow=True blocks until the job ends; follow_run(name) also follows watchdog retries.
- metrics(name) -> list[dict]: the records of the run's metrics.jsonl (written by the trainer).
- wait(name, timeout=None, poll=0.5) -> RunInfo: until the run is no longer pending/running/stopping.
- reconcile(name=None) -> list[str]: the watchdog step (refresh states from providers, relaunch runs
      lost to system failures up to scheduling.max_retries); list_runs/get_run call it.

Run status (RunInfo.status, Resumption.state): pending, running, stopping (active) and paused,
completed, failed (the job's own error, never retried), lost (system failure, retried while retries
remain), stopped (stopped by the user without a checkpoint) — terminal.

Clusters and secrets
- list_clusters() -> list[ClusterInfo]; create_cluster(name, provider, options); delete_cluster(name)
- list_secrets() -> list[SecretInfo] (never values); create_secret(name, kind, values: dict[str, str])
      -> SecretInfo; delete_secret(name); secret_types() -> list[SecretType] (fields, for forms).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Any, Iterator

from foundry.plugins.compute import JobHandle, Plan
from foundry.plugins.errors import ConfigError, FoundryError, ProviderError
from foundry.plugins.manager import notify_run_event, secret_type_registry

from foundry.app.names import check_name
from foundry.app.runspec import RunSpec, apply_overrides, load_spec, parse_spec

from . import reconcile as _reconcile
from . import run_checkpoints
from .clusters import Clusters
from .config import FoundryPaths
from .launch import Placement, build_request, check_capacity, check_support, placement_for
from .launch_intent import launcher_alive, launching_intent, planning_intent, reclaim_after_error
from .metrics_log import read_metrics
from .models import ACTIVE_STATUSES, ClusterInfo, DryRun, RunInfo, SecretInfo
from .registry import Registry
from .secret_vault import choose_vault
from .secrets import SecretStore, mask

log = logging.getLogger("foundry.control")

RESUMABLE = ("paused", "stopped", "failed", "lost")


class ControlPlane:
    def __init__(self, home: str | os.PathLike | None = None):
        self.paths = FoundryPaths.resolve(home)
        self.registry = Registry(self.paths.registry)
        self.clusters = Clusters(self.paths.clusters_file)
        self.secrets = SecretStore(self.paths.secrets_dir,
                                   choose_vault(os.environ.get("FOUNDRY_SECRET_STORE"), self.paths.home))

    # --- specs --------------------------------------------------------------------------------
    def _spec(self, spec: RunSpec | dict | str | os.PathLike, **overrides: Any) -> RunSpec:
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

    def _check_refs(self, spec: RunSpec, cluster: str) -> None:
        self.clusters.config(cluster)
        missing = [s for s in spec.secrets if not self.secrets.exists(s)]
        if missing:
            raise ConfigError(f"run {spec.name!r} needs secret(s) {', '.join(missing)} that do not exist",
                              hint="`foundry get secrets` lists them; `foundry create secret` adds one")

    def _plan(self, spec: RunSpec, run_id: str, idx: int, place: Placement,
              submit_dir: str | None = None) -> tuple[Any, Plan]:
        provider = self.clusters.provider(place.cluster)
        check_capacity(provider, place)
        check_support(provider, place, spec)
        request = build_request(self.paths, self.secrets, spec, run_id, idx, place,
                                gpu_cluster=_has_gpus(provider, place))
        request.extra["submit_dir"] = submit_dir or os.getcwd()
        return provider, provider.dryrun(request)

    def dry_run(self, spec: RunSpec | dict | str, *, name: str | None = None, cluster: str | None = None,
                gpus: int | None = None, nodes: int | None = None) -> DryRun:
        spec = self._spec(spec, name=name, cluster=cluster, gpus=gpus, nodes=nodes)
        place = placement_for(spec)
        self._check_refs(spec, place.cluster)
        provider, plan = self._plan(spec, "dry-run", 0, place)
        secret_values = self.secrets.secret_values(spec.secrets)
        env = {k: ("***" if v in secret_values else mask(v, secret_values)) for k, v in plan.request.env.items()}
        return DryRun(
            spec=spec.to_dict(), cluster=place.cluster, provider=getattr(provider, "name", "?"),
            summary=mask(plan.summary, secret_values), env=env,
            secret_files=[m.path for m in plan.request.secret_files],
            artifacts={k: mask(v, secret_values) for k, v in plan.artifacts.items()},
        )

    # --- lifecycle ----------------------------------------------------------------------------
    def create_run(self, spec: RunSpec | dict | str, *, name: str | None = None, cluster: str | None = None,
                   gpus: int | None = None, nodes: int | None = None) -> RunInfo:
        spec = self._spec(spec, name=name, cluster=cluster, gpus=gpus, nodes=nodes)
        place = placement_for(spec)
        self._check_refs(spec, place.cluster)
        self._plan(spec, "new", 0, place)  # a plan the provider refuses never becomes a run
        # The run and its resumption 0 (with the launch intent) are born together, before anything
        # starts: a CLI killed at any later moment leaves a run that reconcile settles (launch_intent.py).
        run_id = self.registry.create_run(spec.name, spec.to_dict(), spec.scheduling.max_retries,
                                          submit_dir=os.getcwd(), first=self._resumption(place, "create"))
        self.emit(spec.name, "created", {"cluster": place.cluster})
        self._launch(spec, run_id, place, cause="create", idx=0)
        return self.get_run(spec.name, reconcile=False)

    def _resumption(self, place: Placement, cause: str) -> dict[str, Any]:
        return dict(cluster=place.cluster, provider=self.clusters.config(place.cluster)["provider"],
                    nodes=place.nodes, devices=place.devices, cause=cause, retry=cause == "retry",
                    launch_intent=planning_intent())

    def _launch(self, spec: RunSpec, run_id: str, place: Placement, cause: str, idx: int | None = None) -> int:
        if idx is None:
            idx = self.registry.add_resumption(run_id, **self._resumption(place, cause))
        details = {"resumption": idx, "cluster": place.cluster, "devices": place.devices, "nodes": place.nodes}
        provider, intent = None, None
        try:
            run = self.registry.get_run(spec.name, events=False)
            provider, plan = self._plan(spec, run_id, idx, place, run.submit_dir if run else None)
            self.paths.run_dir(spec.name).mkdir(parents=True, exist_ok=True)
            # how to find the job if this process dies before its handle is recorded
            intent = launching_intent(provider, plan)
            self.registry.update_resumption(run_id, idx, launch_intent=intent)
            handle = provider.launch(plan)
        except Exception as exc:
            # a launch that failed half-way (an sbatch that timed out after submitting) may have a job:
            # adopt it, or make sure it never runs, before reporting the failure
            handle = reclaim_after_error(provider, intent)
            if handle is None:
                message = exc.message if isinstance(exc, FoundryError) else f"{type(exc).__name__}: {exc}"
                self.registry.transition(run_id, idx, "pending", "failed", "failed",
                                         {**details, "reason": message}, ended_at=time.time(),
                                         exit_reason=f"launch failed: {message}")
                self.emit(spec.name, "failed", {**details, "reason": message})
                if isinstance(exc, FoundryError):
                    raise
                raise ProviderError(f"cluster {place.cluster!r} could not launch run {spec.name!r}: {exc}") from exc
            log.warning("launching %s raised (%s), but its job %s exists: adopted", spec.name, exc, handle.job_id)
        self.registry.update_resumption(run_id, idx, handle=_handle_dict(handle), job_id=handle.job_id)
        self.registry.add_event(run_id, "launched", idx, {**details, "job_id": handle.job_id})
        self.emit(spec.name, "launched", {**details, "job_id": handle.job_id})
        return idx

    def _run(self, name: str) -> RunInfo:
        run = self.registry.get_run(check_name("run", name))
        if run is None:
            raise ConfigError(f"no run named {name!r}", hint="`foundry get runs` lists runs")
        return run

    def list_runs(self, reconcile: bool = True) -> list[RunInfo]:
        if reconcile:
            self.reconcile()
        return self.registry.list_runs()

    def get_run(self, name: str, reconcile: bool = True) -> RunInfo:
        self._run(name)
        if reconcile:
            self.reconcile(name)
        return self._run(name)

    def stop_run(self, name: str, graceful: bool = True) -> RunInfo:
        run = self.get_run(name)
        latest = run.latest
        if latest is None or latest.state not in ACTIVE_STATUSES:
            raise ConfigError(f"run {name!r} is not active (status {run.status})")
        handle = self._handle(run, latest.index)
        self.clusters.provider(latest.cluster).stop(handle, graceful=graceful)
        details = {"resumption": latest.index, "graceful": graceful}
        if self.registry.transition(run.id, latest.index, latest.state, "stopping", "stopping", details):
            self.emit(name, "stopping", details)
        return self.get_run(name, reconcile=False)

    def resume_run(self, name: str, cluster: str | None = None, gpus: int | None = None,
                   nodes: int | None = None) -> RunInfo:
        run = self.get_run(name)
        if run.status not in RESUMABLE:
            raise ConfigError(f"run {name!r} is {run.status}; only {', '.join(RESUMABLE)} runs can be resumed")
        spec = parse_spec(run.spec)
        last = run.latest
        place = placement_for(spec, cluster or (last.cluster if last else None),
                              gpus if gpus is not None else (last.devices if last else None),
                              nodes or (last.nodes if last else None))
        self._check_refs(spec, place.cluster)
        idx = self._launch(spec, run.id, place, cause="resume")
        self.registry.add_event(run.id, "resumed", idx, {"cluster": place.cluster, "devices": place.devices})
        self.emit(name, "resumed", {"resumption": idx, "cluster": place.cluster, "devices": place.devices})
        return self.get_run(name, reconcile=False)

    def checkpoint_url(self, name: str) -> str | None:
        self._run(name)
        return run_checkpoints.checkpoint_url(self.paths.run_dir(name))

    def delete_run(self, name: str, checkpoints: str = "keep") -> str | None:
        if checkpoints not in ("keep", "delete"):
            raise ConfigError(f"checkpoints={checkpoints!r}: use 'keep' or 'delete'")
        run = self.get_run(name)
        ckpt_url = run_checkpoints.checkpoint_url(self.paths.run_dir(name))
        if run.latest and run.latest.state in ACTIVE_STATUSES:
            try:
                self.clusters.provider(run.latest.cluster).stop(self._handle(run, run.latest.index), graceful=False)
            except FoundryError as exc:
                log.warning("could not stop %s before deleting: %s", name, exc.message)
        if checkpoints == "delete" and ckpt_url:
            run_checkpoints.delete_checkpoints(ckpt_url)  # first: a failure leaves the run to retry with
        self.registry.delete_run(name)
        shutil.rmtree(self.paths.run_dir(name), ignore_errors=True)
        self.emit(name, "deleted", {"checkpoints": checkpoints})
        return ckpt_url

    def wait(self, name: str, timeout: float | None = None, poll: float = 0.5) -> RunInfo:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            run = self.get_run(name)
            if run.status not in ACTIVE_STATUSES:
                return run
            if deadline is not None and time.monotonic() > deadline:
                raise ProviderError(f"run {name!r} is still {run.status} after {timeout:.0f}s")
            time.sleep(poll)

    def reconcile(self, name: str | None = None) -> list[str]:
        return _reconcile.reconcile(self, name)

    # --- logs and metrics ---------------------------------------------------------------------
    def _handle(self, run: RunInfo, idx: int) -> JobHandle:
        data = self.registry.handle(run.id, idx)
        if data is None:
            launcher = (self.registry.launch_intent(run.id, idx) or {}).get("launcher") or {}
            if launcher and launcher_alive(launcher):
                raise ProviderError(f"resumption {idx} of run {run.name!r} is being launched by process "
                                    f"{launcher.get('pid')} right now", hint="try again in a moment")
            raise ProviderError(f"resumption {idx} of run {run.name!r} was never launched")
        return JobHandle(**data)

    def logs(self, name: str, resumption: int | None = None, rank: int | None = None,
             follow: bool = False) -> Iterator[str]:
        run = self._run(name)
        if not run.resumptions:
            return iter(())
        idx = run.latest.index if resumption is None else resumption
        if not 0 <= idx < len(run.resumptions):
            raise ConfigError(f"run {name!r} has no resumption {idx} (it has 0..{len(run.resumptions) - 1})")
        provider = self.clusters.provider(run.resumptions[idx].cluster)
        return (line.rstrip("\n") for line in provider.logs(self._handle(run, idx), follow=follow, rank=rank))

    def follow_run(self, name: str, rank: int | None = None) -> Iterator[str]:
        """Follow the run's logs across watchdog retries until it stops being active."""
        idx = None
        while True:
            run = self.get_run(name)
            latest = run.latest
            if latest is None or latest.index == idx:
                return
            idx = latest.index
            if idx > 0:
                yield f"--- resumption {idx} ({latest.cause}) on {latest.cluster} ---"
            yield from self.logs(name, resumption=idx, rank=rank, follow=True)
            self.wait(name)

    def metrics(self, name: str) -> list[dict]:
        self._run(name)
        return read_metrics(self.paths.run_dir(name) / "metrics.jsonl")

    # --- clusters and secrets -----------------------------------------------------------------
    def list_clusters(self) -> list[ClusterInfo]:
        return [self.clusters.info(n) for n in self.clusters.names()]

    def create_cluster(self, name: str, provider: str, options: dict[str, Any] | None = None) -> ClusterInfo:
        self.clusters.add(name, provider, options)
        return self.clusters.info(name)

    def delete_cluster(self, name: str) -> None:
        self.clusters.remove(name)

    def list_secrets(self) -> list[SecretInfo]:
        return self.secrets.list()

    def create_secret(self, name: str, kind: str, values: dict[str, str]) -> SecretInfo:
        return self.secrets.create(name, kind, values)

    def delete_secret(self, name: str) -> None:
        self.secrets.delete(name)

    def secret_types(self) -> list[Any]:
        return [reg.value for reg in secret_type_registry().items.values()]

    # --- plugin hook --------------------------------------------------------------------------
    def emit(self, run_name: str, event: str, details: dict) -> None:
        """Tell every on_run_event observer; a failing one is logged and skipped (plugins.manager)."""
        notify_run_event(run_name, event, details)


def _has_gpus(provider: Any, place: Placement) -> bool:
    """Whether the job asks for GPUs: the provider can schedule them and the cluster has some."""
    if not getattr(provider.capabilities, "gpus", False):
        return False
    if place.gpu_type:
        return place.gpu_type.lower() not in ("cpu", "none")
    try:
        gpus = (provider.describe() or {}).get("gpus")
    except Exception:
        return True
    return gpus is None or int(gpus) > 0


def _handle_dict(handle: JobHandle) -> dict:
    return {"provider": handle.provider, "cluster": handle.cluster, "job_id": handle.job_id,
            "data": handle.data}
