"""Plain dataclasses the control plane returns (CLI, TUI and SDK read these, never SQLite rows).

Times are UNIX seconds (float) or None. Every `to_dict()` is JSON-safe and free of secret values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


class _Dict:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Run statuses, from the latest resumption's JobState plus the control plane's own intents.
# "unknown" is a run status only (its latest resumption keeps its last observed state): the provider
# cannot be asked now, and nothing is relaunched or killed on a guess (reconcile.py).
ACTIVE_STATUSES = ("pending", "running", "stopping", "unknown")
TERMINAL_STATUSES = ("paused", "completed", "failed", "lost", "stopped")
RESUMABLE_STATUSES = ("paused", "stopped", "failed", "lost")   # what resume (and move) accept


@dataclass
class Resumption(_Dict):
    """One launch of a run: the first start, every `resume`, every watchdog retry."""

    index: int
    cluster: str
    provider: str
    nodes: int
    devices: int                  # total processes (GPUs, or CPU processes on `local`)
    state: str                    # a JobState value: pending/running/stopping/paused/completed/failed/lost
    job_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    exit_reason: str | None = None
    resumed_from: str | None = None   # checkpoint the trainer resumed from, when known
    cause: str = "create"             # create | resume | retry (same cluster) | failover (another one)
    unknown_since: float | None = None   # since when its provider cannot be observed (None: it can)
    unknown_reason: str | None = None    # why: the status call's error
    placed_because: str | None = None    # a watchdog relaunch: why this placement (failover order, refusals)


@dataclass
class RunEvent(_Dict):
    time: float
    event: str                    # created, launched, running, stopping, paused, completed, failed, lost, retried, resumed, deleted
    resumption: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunInfo(_Dict):
    """A run and its resumptions (oldest first). `status` is the run's status now."""

    name: str
    id: str
    status: str
    cluster: str
    nodes: int
    devices: int
    created_at: float
    updated_at: float
    max_retries: int
    retries_used: int
    spec: dict[str, Any]          # the normalized run spec (secret names only, never values)
    resumptions: list[Resumption] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
    submit_dir: str | None = None   # where `foundry run` was typed (local jobs start there)

    @property
    def latest(self) -> Resumption | None:
        return self.resumptions[-1] if self.resumptions else None


@dataclass
class ClusterInfo(_Dict):
    name: str
    provider: str
    devices: int | None
    nodes: int | None
    state: str                    # ready | unreachable | unknown provider | error text
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class SecretInfo(_Dict):
    """What can be shown about a secret: its name, kind, and the non-secret fields' values."""

    name: str
    kind: str
    created_at: float
    fields: list[str]                      # every field name that is set
    public: dict[str, str] = field(default_factory=dict)   # non-secret fields (endpoint, region)


@dataclass
class DryRun(_Dict):
    """What `create_run` would do: the normalized spec and the provider's plan (secrets masked)."""

    spec: dict[str, Any]
    cluster: str
    provider: str
    summary: str
    env: dict[str, str]                    # secret values replaced by "***"
    secret_files: list[str]                # paths inside the job
    artifacts: dict[str, str]              # provider artifacts: command line, sbatch script, manifests
