"""The ComputeProvider contract (shape from TorchX schedulers), and the data it passes around.

A provider turns a JobRequest (what to run, where, on how many devices, with which environment)
into an inspectable Plan (`dryrun`, no side effects), launches it, and observes and stops the
job through an opaque JobHandle that the control plane stores in the run registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterator, Protocol, runtime_checkable


class JobState(str, Enum):
    PENDING = "pending"      # accepted, not yet running (queued, scheduling, pulling)
    RUNNING = "running"
    STOPPING = "stopping"    # a graceful stop was requested and the job has not exited yet
    PAUSED = "paused"        # exited with the trainer's "paused" exit code after a checkpoint
    COMPLETED = "completed"
    FAILED = "failed"        # the job's own error: never retried
    LOST = "lost"            # system failure (node lost, killed, preempted): retry-eligible
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self in (JobState.PAUSED, JobState.COMPLETED, JobState.FAILED, JobState.LOST)


@dataclass(frozen=True)
class Capabilities:
    multi_node: bool = False
    gpus: bool = False
    preemption_notice: bool = False
    graceful_stop: bool = True
    max_nodes: int | None = None
    gpu_types: tuple[str, ...] = ()
    # What a run spec may ask for; the control plane refuses what a provider cannot do (never ignores it).
    images: bool = False                 # runs the spec's container `image` (kubernetes)
    gpu_type_selection: bool = False     # places on a `gpu_type` (slurm gres, kubernetes node selector)
    instance_selection: bool = False     # places on an instance type (kubernetes: node.kubernetes.io/instance-type)
    launch_modes: tuple[str, ...] = ("per_process",)   # + "per_node": JobRequest.extra["launch"]
    notice_window_s: float | None = None  # seconds from a preemption's SIGTERM to the kill, where known


@dataclass
class SecretMount:
    """A secret file the job needs at `path` (env-type secrets travel in JobRequest.env)."""

    path: str
    content: bytes
    mode: int = 0o600


@dataclass
class JobRequest:
    run_name: str
    run_id: str
    resumption: int
    command: list[str]              # argv: once per process under torchrun, or once per node
                                    # when extra["launch"] == "per_node" (NODE_RANK, NUM_NODES,
                                    # LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR/PORT set)
    nodes: int = 1
    procs_per_node: int = 1         # devices (GPUs, or CPU processes) per node
    gpus_per_node: int = 0
    gpu_type: str | None = None
    instance: str | None = None     # the spec's compute.instance (only providers with instance_selection)
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)   # includes secret env values: never log it
    secret_files: list[SecretMount] = field(default_factory=list)
    workdir: str | None = None
    log_dir: str | None = None      # where a provider that writes logs locally puts them
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Plan:
    """What `launch` would do, inspectable and printable (secret values replaced by `***`)."""

    provider: str
    request: JobRequest
    summary: str                     # one line for humans
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> text (sbatch script, YAML manifests, command line)


@dataclass
class JobHandle:
    """How to find a launched job again, JSON-serializable, stored in the run registry."""

    provider: str
    cluster: str
    job_id: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobStatus:
    state: JobState
    exit_code: int | None = None
    reason: str | None = None
    nodes: int | None = None


@runtime_checkable
class ComputeProvider(Protocol):
    """One cluster of one provider kind; built with `ProviderClass(cluster_config: dict)`."""

    name: str
    capabilities: Capabilities

    def dryrun(self, request: JobRequest) -> Plan: ...
    def launch(self, plan: Plan) -> JobHandle: ...
    def status(self, handle: JobHandle) -> JobStatus: ...
    def logs(self, handle: JobHandle, follow: bool = False, rank: int | None = None) -> Iterator[str]: ...
    def stop(self, handle: JobHandle, graceful: bool = True) -> None: ...
    def list(self) -> list[JobHandle]: ...
    def describe(self) -> dict[str, Any]:
        """Devices, nodes and state of the cluster for `foundry get clusters`."""

    # Optional (looked up with getattr; a provider without them gets the control plane's grace period):
    # def launch_intent(self, plan: Plan) -> dict: JSON that finds this launch again (a job folder, a
    #     token), recorded before `launch` is called.
    # def reclaim(self, intent: dict) -> JobHandle | None: after the launching process died without
    #     recording a handle: the job's handle if it was launched (the control plane adopts it), or
    #     None only once the provider has made sure that launch can never run.
    # accepts_cluster_context = True (class attribute): the cluster config also gets `state_dir` (a folder
    #     in FOUNDRY_HOME for the provider's own state) and, when it names a `secret`, `secret_injection`
    #     (that secret's SecretInjection: env and files), resolved by the control plane.
    # check_options(options: dict) (static): raises ConfigError for options `create cluster` must refuse.


# The trainer exits with this code after a graceful pause (checkpoint published).
PAUSED_EXIT_CODE = 75
