"""The control plane facade: the one API the CLI, the TUI and the SDK call.

    from foundry.app.control import ControlPlane
    cp = ControlPlane()                      # FOUNDRY_HOME, or ControlPlane(home="/some/dir")

ControlPlane composes named services, each owning its collaborators, and delegates the contract
below to them; nothing else in the package takes a ControlPlane:
    cp.runs       Runs (runs.py): lifecycle, logs, metrics, progress, checkpoints; the watchdog step
    cp.launcher   Launcher (launcher.py): plans and launches every resumption (create, resume, retry)
    cp.clusters   Clusters (clusters.py): clusters.yaml and each cluster's ComputeProvider
    cp.secrets    SecretStore (secrets.py): stored secrets (values never leave it unmasked)
    cp.datasets   Datasets (dataset_service.py): registered datasets, read with their secrets
The CLI, the TUI and the SDK import only `foundry.app.control` (an import-linter contract).

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
- runs.check_placement(name, cluster, gpus, nodes) -> DryRun: resume's checks, ahead of time.
- runs.move(name, cluster, gpus, nodes, timeout, on_step) -> RunInfo: pause, wait, resume elsewhere.
- runs.progress(run) -> RunProgress; runs.checkpoints(run) -> list[CheckpointRow] (read with the
      run's own secrets); runs.save_url(run); runs.resolved_config(name); egress(name) -> dict.

Run status (RunInfo.status, Resumption.state): pending, running, stopping (active) and paused,
completed, failed (the job's own error, never retried), lost (system failure, retried while retries
remain), stopped (stopped by the user without a checkpoint) — terminal.

Clusters and secrets
- list_clusters() -> list[ClusterInfo]; create_cluster(name, provider, options); delete_cluster(name)
- list_secrets() -> list[SecretInfo] (never values); create_secret(name, kind, values: dict[str, str])
      -> SecretInfo; delete_secret(name); secret_types() -> list[SecretType] (fields, for forms);
      check_secret_access(name, url) -> list[str]: a few keys under url, read with the secret.

Datasets (cp.datasets)
- list(); add(url, name=None, secret=None); remove(name_or_url); inspect(url, secret=None);
      samples(url, start, count, secret=None); verify(url, progress=None, secret=None);
      convert(src, dst, compression=None, progress=None) -> DatasetSummary.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from foundry.plugins.manager import secret_type_registry

from foundry.app.runspec import RunSpec

from .clusters import Clusters
from .config import FoundryPaths
from .dataset_service import Datasets
from .datasets import DatasetRegistry
from .launcher import Launcher
from .models import ClusterInfo, DryRun, RunInfo, SecretInfo
from .registry import Registry
from .runs import Runs
from .secret_check import check_bucket_access
from .secret_vault import choose_vault
from .secrets import SecretStore


class ControlPlane:
    def __init__(self, home: str | os.PathLike | None = None):
        self.paths = FoundryPaths.resolve(home)
        self.registry = Registry(self.paths.registry)
        self.secrets = SecretStore(self.paths.secrets_dir,
                                   choose_vault(os.environ.get("FOUNDRY_SECRET_STORE"), self.paths.home))
        self.clusters = Clusters(self.paths.clusters_file, self.secrets)
        self.datasets = Datasets(DatasetRegistry(self.paths.home), self.secrets)
        self.launcher = Launcher(self.paths, self.registry, self.clusters, self.secrets)
        self.runs = Runs(self.paths, self.registry, self.clusters, self.secrets, self.launcher)

    # --- runs ---------------------------------------------------------------------------------
    def dry_run(self, spec: RunSpec | dict | str, *, name: str | None = None, cluster: str | None = None,
                gpus: int | None = None, nodes: int | None = None) -> DryRun:
        return self.runs.dry_run(spec, name=name, cluster=cluster, gpus=gpus, nodes=nodes)

    def create_run(self, spec: RunSpec | dict | str, *, name: str | None = None, cluster: str | None = None,
                   gpus: int | None = None, nodes: int | None = None) -> RunInfo:
        return self.runs.create(spec, name=name, cluster=cluster, gpus=gpus, nodes=nodes)

    def list_runs(self, reconcile: bool = True) -> list[RunInfo]:
        return self.runs.list(reconcile)

    def get_run(self, name: str, reconcile: bool = True) -> RunInfo:
        return self.runs.get(name, reconcile)

    def stop_run(self, name: str, graceful: bool = True) -> RunInfo:
        return self.runs.stop(name, graceful)

    def resume_run(self, name: str, cluster: str | None = None, gpus: int | None = None,
                   nodes: int | None = None) -> RunInfo:
        return self.runs.resume(name, cluster, gpus, nodes)

    def delete_run(self, name: str, checkpoints: str = "keep") -> str | None:
        return self.runs.delete(name, checkpoints)

    def checkpoint_url(self, name: str) -> str | None:
        return self.runs.checkpoint_url(name)

    def wait(self, name: str, timeout: float | None = None, poll: float = 0.5) -> RunInfo:
        return self.runs.wait(name, timeout, poll)

    def reconcile(self, name: str | None = None) -> list[str]:
        return self.runs.reconcile(name)

    def logs(self, name: str, resumption: int | None = None, rank: int | None = None,
             follow: bool = False) -> Iterator[str]:
        return self.runs.logs(name, resumption, rank, follow)

    def follow_run(self, name: str, rank: int | None = None) -> Iterator[str]:
        return self.runs.follow(name, rank)

    def egress(self, name: str) -> dict:
        return self.runs.egress(name)

    def metrics(self, name: str) -> list[dict]:
        return self.runs.metrics(name)

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

    def check_secret_access(self, name: str, url: str, limit: int = 5) -> list[str]:
        """The first `limit` keys under `url`, listed with the secret's credentials (secret_check.py)."""
        return check_bucket_access(self.secrets, name, url, limit)
