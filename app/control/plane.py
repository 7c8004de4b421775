"""The control plane facade: the one API the CLI, the TUI and the SDK call.

    from foundry.app.control import ControlPlane
    cp = ControlPlane()                      # FOUNDRY_HOME, or ControlPlane(home="/some/dir")

One door: every call the CLI, the TUI and the SDK make is a ControlPlane method below. ControlPlane
composes named services, each owning its collaborators, and delegates to them; nothing else in the
package takes a ControlPlane:
    cp.runs         Runs (runs.py): lifecycle, logs, metrics, progress, checkpoints; the watchdog step
    cp.launcher     Launcher (launcher.py): plans and launches every resumption (create, resume, retry)
    cp.clusters     Clusters (clusters.py): clusters.yaml and each cluster's ComputeProvider
    cp.secrets      SecretStore (secrets.py): stored secrets (values never leave it unmasked)
    cp.datasets     Datasets (dataset_service.py): registered datasets, read and written with secrets
    cp.checkpoints  Checkpoints (checkpoint_service.py): any save folder, read with a stored secret
The services are how the plane is built (and what tests assemble or replace), not a second API: the
CLI, the TUI and the SDK never reach through them (`cp.runs.x`), and import only
`foundry.app.control`, never foundry.streaming or foundry.trainer (tests/test_layers.py and the
import-linter contracts check both).

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
- watching(interval, daemon) (a context manager), watchdogs() -> list[WatchdogInfo],
      start_watchdog_daemon(interval), stop_watchdog_daemons(): which `foundry watch` run (watchdogs.py).
- reconcile(name=None) -> list[str]: the watchdog step (refresh states from providers, relaunch runs
      lost to system failures up to scheduling.max_retries); list_runs/get_run call it.
- check_placement(name, cluster, gpus, nodes) -> DryRun: resume's checks, ahead of time.
- move_run(name, cluster, gpus, nodes, timeout, on_step) -> RunInfo: pause, wait, resume elsewhere.
- run_progress(run) -> RunProgress; run_checkpoints(run) -> list[CheckpointRow] (read with the
      run's own secrets); save_url(run); resolved_config(name); egress(name) -> dict.
- run_ledger(run, records=None, now=None) -> Ledger: per resumption how it ended, detection and restart times,
      steps redone; the run's goodput (recovery.py; registry, metrics rows and heartbeats only).

Run status (RunInfo.status, Resumption.state): pending, running, stopping (active) and paused,
completed, failed (the job's own error, never retried), lost (system failure, retried while retries
remain), stopped (stopped by the user without a checkpoint) — terminal.

Clusters and secrets
- list_clusters() -> list[ClusterInfo]; cluster_info(name); create_cluster(name, provider, options);
      delete_cluster(name)
- list_secrets() -> list[SecretInfo] (never values); create_secret(name, kind, values: dict[str, str])
      -> SecretInfo; delete_secret(name); secret_exists(name); secret_env_names(name) -> list[str]
      (the variables a job gets, names only); secret_types() -> list[SecretType] (fields, for forms);
      check_secret_access(name, url) -> list[str]: a few keys under url, read with the secret;
      with use_secrets(names): this process reads and writes storage with them (ConfigError if one
      is missing).

Datasets (every read and write takes `secret=`, a stored secret it is made with)
- list_datasets(); add_dataset(url, name=None, secret=None) -> DatasetEntry; remove_dataset(name_or_url)
- dataset_summary(url) -> DatasetSummary; dataset_samples(url, start, count) -> list[dict];
      dataset_problems(url, progress=None) -> list[str]; convert_dataset(src, dst, compression=None,
      progress=None) -> DatasetSummary (the TUI's views)
- inspect_dataset(url, samples=3, allow_unsafe_types=False) -> dict; verify_dataset(url, workers=4,
      progress=None) -> VerifyReport; convert_files(src, dst, columns=None, **options) -> ConvertResult;
      tokenize_dataset(src, dst, tokenizer, concat_tokens, text={...}, **options) (`foundry dataset ...`)

Checkpoints in any storage URL (`foundry checkpoint ls|inspect`)
- list_checkpoints(url, secret=None) -> list[dict]; describe_checkpoint(url, verify=False, secret=None)
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from foundry.plugins.errors import ConfigError
from foundry.plugins.manager import secret_type_registry

from foundry.app.runspec import RunSpec

from .checkpoint_service import Checkpoints
from .clusters import Clusters
from .config import FoundryPaths
from .dataset_service import Datasets
from .datasets import DatasetEntry, DatasetRegistry, DatasetSummary
from .launcher import Launcher
from .models import ClusterInfo, DryRun, RunInfo, SecretInfo
from .recovery import Ledger
from .registry import Registry
from .run_views import CheckpointRow, RunProgress
from .runs import Runs
from .secret_check import check_bucket_access
from .secret_env import secret_environment
from .secret_vault import choose_vault
from .secrets import SecretStore
from . import watchdogs
from .watchdogs import WatchdogInfo


class ControlPlane:
    def __init__(self, home: str | os.PathLike | None = None):
        self.paths = FoundryPaths.resolve(home)
        self.registry = Registry(self.paths.registry)
        self.secrets = SecretStore(self.paths.secrets_dir,
                                   choose_vault(os.environ.get("FOUNDRY_SECRET_STORE"), self.paths.home))
        self.clusters = Clusters(self.paths.clusters_file, self.secrets)
        self.datasets = Datasets(DatasetRegistry(self.paths.home), self.secrets)
        self.checkpoints = Checkpoints(self.secrets)
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

    def watching(self, interval: float, daemon: bool = False):
        """Context manager: this process is a running watchdog while it is open; yields passed()."""
        return watchdogs.registered(self.paths.home, interval, daemon)

    def watchdogs(self) -> list[WatchdogInfo]:
        return watchdogs.running(self.paths.home)

    def start_watchdog_daemon(self, interval: float) -> WatchdogInfo:
        return watchdogs.start_daemon(self.paths.home, interval)

    def stop_watchdog_daemons(self) -> list[int]:
        return watchdogs.stop_daemons(self.paths.home)

    def logs(self, name: str, resumption: int | None = None, rank: int | None = None,
             follow: bool = False) -> Iterator[str]:
        return self.runs.logs(name, resumption, rank, follow)

    def follow_run(self, name: str, rank: int | None = None) -> Iterator[str]:
        return self.runs.follow(name, rank)

    def egress(self, name: str) -> dict:
        return self.runs.egress(name)

    def run_cost(self, run: RunInfo) -> dict:
        """Compute cost per resumption plus the measured transfers, in USD (run_cost.py)."""
        from . import egress, request_cost, run_cost

        usage = egress.summarize(self.paths.run_dir(run.name), egress.load_prices(self.paths.home))
        requests = request_cost.summarize(self.paths.run_dir(run.name), request_cost.load_prices(self.paths.home))
        handles = {r.index: self.registry.handle(run.id, r.index) for r in run.resumptions}
        return run_cost.run_cost(run, handles, run_cost.cluster_prices(self.paths.home), usage, requests=requests)

    def metrics(self, name: str) -> list[dict]:
        return self.runs.metrics(name)

    def run_progress(self, run: RunInfo) -> RunProgress:
        return self.runs.progress(run)

    def run_ledger(self, run: RunInfo, records: list[dict] | None = None, now: float | None = None) -> Ledger:
        return self.runs.ledger(run, records, now)

    def run_checkpoints(self, run: RunInfo) -> list[CheckpointRow]:
        return self.runs.checkpoints(run)

    def save_url(self, run: RunInfo) -> str | None:
        return self.runs.save_url(run)

    def resolved_config(self, name: str) -> dict[str, Any]:
        return self.runs.resolved_config(name)

    def check_placement(self, name: str, cluster: str | None = None, gpus: int | None = None,
                        nodes: int | None = None) -> DryRun:
        return self.runs.check_placement(name, cluster, gpus, nodes)

    def move_run(self, name: str, cluster: str | None = None, gpus: int | None = None, nodes: int | None = None,
                 timeout: float | None = None, on_step: Callable[[str], None] | None = None) -> RunInfo:
        return self.runs.move(name, cluster=cluster, gpus=gpus, nodes=nodes, timeout=timeout, on_step=on_step)

    # --- clusters and secrets -----------------------------------------------------------------
    def list_clusters(self) -> list[ClusterInfo]:
        return [self.clusters.info(n) for n in self.clusters.names()]

    def cluster_info(self, name: str) -> ClusterInfo:
        return self.clusters.info(name)

    def create_cluster(self, name: str, provider: str, options: dict[str, Any] | None = None) -> ClusterInfo:
        self.clusters.add(name, provider, options)
        return self.clusters.info(name)

    def delete_cluster(self, name: str) -> None:
        self.clusters.remove(name)

    def list_instances(self) -> list[dict[str, Any]]:
        """Live cloud instances Foundry made (ec2, ...), each with its cost so far."""
        from .instances import list_instances

        return list_instances(self.clusters)

    def clean_instances(self) -> list[str]:
        """Terminate every instance Foundry made whose resumption is not running; returns their ids."""
        from .instances import clean_instances

        return clean_instances(self.clusters, self.registry)

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

    def secret_exists(self, name: str) -> bool:
        return self.secrets.exists(name)

    def secret_env_names(self, name: str) -> list[str]:
        """The environment variables a job that lists the secret gets: names only, never values."""
        return list(self.secrets.injection(name).env)

    @contextmanager
    def use_secrets(self, *names: str) -> Iterator[None]:
        """This process reads and writes storage with the stored secrets `names` inside the block."""
        missing = [n for n in names if not self.secrets.exists(n)]
        if missing:
            raise ConfigError(f"no secret named {missing[0]!r}", hint="`foundry get secrets` lists them; "
                                                                     "`foundry create secret` adds one")
        with secret_environment(self.secrets, list(names)):
            yield

    # --- datasets -----------------------------------------------------------------------------
    def list_datasets(self) -> list[DatasetEntry]:
        return self.datasets.list()

    def add_dataset(self, url: str, name: str | None = None, secret: str | None = None) -> DatasetEntry:
        return self.datasets.add(url, name, secret)

    def remove_dataset(self, name_or_url: str) -> None:
        self.datasets.remove(name_or_url)

    def dataset_summary(self, url: str, secret: str | None = None) -> DatasetSummary:
        return self.datasets.inspect(url, secret=secret)

    def dataset_samples(self, url: str, start: int = 0, count: int = 10, secret: str | None = None) -> list[dict]:
        return self.datasets.samples(url, start, count, secret=secret)

    def dataset_problems(self, url: str, progress: Callable[[int, int], None] | None = None,
                         secret: str | None = None) -> list[str]:
        return self.datasets.verify(url, progress, secret=secret)

    def convert_dataset(self, src: str | Path, dst: str, compression: str | None = None,
                        progress: Callable[[int, int | None], None] | None = None) -> DatasetSummary:
        return self.datasets.convert(src, dst, compression=compression, progress=progress)

    def inspect_dataset(self, url: str, samples: int = 3, allow_unsafe_types: bool = False,
                        secret: str | None = None) -> dict[str, Any]:
        return self.datasets.inspect_report(url, samples, allow_unsafe_types, secret=secret)

    def verify_dataset(self, url: str, workers: int = 4, progress: Callable[[int, int], None] | None = None,
                       secret: str | None = None) -> Any:
        return self.datasets.verify_report(url, workers, progress, secret=secret)

    def convert_files(self, src: str, dst: str, *, columns: str | None = None, secret: str | None = None,
                      **options: Any) -> Any:
        return self.datasets.convert_files(src, dst, columns=columns, secret=secret, **options)

    def tokenize_dataset(self, src: str, dst: str, tokenizer: str, concat_tokens: int, *, text: dict[str, Any],
                         secret: str | None = None, **options: Any) -> Any:
        return self.datasets.tokenize(src, dst, tokenizer, concat_tokens, text=text, secret=secret, **options)

    # --- checkpoints in any storage URL -------------------------------------------------------
    def list_checkpoints(self, url: str, secret: str | None = None) -> list[dict[str, Any]]:
        return self.checkpoints.list(url, secret=secret)

    def describe_checkpoint(self, url: str, verify: bool = False, secret: str | None = None) -> dict[str, Any]:
        return self.checkpoints.describe(url, verify=verify, secret=secret)
