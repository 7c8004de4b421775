"""From a RunSpec to a provider JobRequest: command, environment, secrets, setup steps.

Every job gets RUN_NAME, RUN_ID, RESUMPTION_INDEX, FOUNDRY_RUN_DIR, FOUNDRY_METRICS_FILE,
FOUNDRY_PARAMETERS (the `parameters` mapping as YAML, when given), the spec's env_variables and the
injection of each named secret (env vars, and files under /foundry/secrets/NAME/ that providers mount
or relocate). Rendezvous variables (MASTER_ADDR/PORT, RANK, WORLD_SIZE) come from the provider's
torchrun. JobRequest.extra["setup_commands"] lists shell lines run once per node before torchrun.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from foundry.plugins.compute import JobRequest, SecretMount
from foundry.app.runspec import RunSpec

from .config import FoundryPaths
from .secrets import SecretStore

# The trainer entry point used when a spec gives `parameters` and no `command`.
DEFAULT_TRAINER_COMMAND = ["python", "-m", "foundry.trainer"]


@dataclass
class Placement:
    """Where one resumption runs (the spec's compute, or resume/retry overrides)."""

    cluster: str
    nodes: int
    devices: int
    gpu_type: str | None = None

    @property
    def procs_per_node(self) -> int:
        return max(1, self.devices // self.nodes)


def placement_for(spec: RunSpec, cluster: str | None = None, gpus: int | None = None,
                  nodes: int | None = None) -> Placement:
    nodes = nodes or spec.compute.nodes
    devices = gpus if gpus is not None else spec.compute.gpus
    devices = max(devices or 1, nodes)
    from foundry.plugins.errors import ConfigError

    if devices % nodes:
        raise ConfigError(f"gpus ({devices}) must be a multiple of nodes ({nodes})")
    return Placement(cluster or spec.compute.cluster or "local", nodes, devices, spec.compute.gpu_type)


def placements_for(spec: RunSpec) -> list[Placement]:
    """The run's placements in order of preference: `compute`, then each `failover` entry."""
    first = placement_for(spec)
    rest = [Placement(c.cluster or "local", c.nodes, c.devices, c.gpu_type) for c in spec.failover]
    return [first, *rest]


USABLE_NODE_STATES = ("idle", "mixed", "allocated", "completing")   # up: can run a job now or soon


def check_available(place: Placement, desc: dict[str, Any] | None, nodes_up: bool = True) -> None:
    """Refuse a cluster that cannot take the placement *now* (the watchdog's relaunch): it cannot be
    asked (describe failed), or (`nodes_up`, the failover choice) fewer of its nodes are up than the
    placement needs."""
    from foundry.plugins.errors import ProviderError

    if desc is None:
        raise ProviderError(f"cluster {place.cluster!r} cannot be reached now")
    if not nodes_up:
        return
    nodes = desc.get("node_list")
    if isinstance(nodes, list) and nodes:
        up = sum(1 for n in nodes if str(n.get("state", "")).split("+")[0].lower() in USABLE_NODE_STATES)
        if up < place.nodes:
            raise ProviderError(f"cluster {place.cluster!r} has {up} node(s) up now; the run needs {place.nodes}")
    elif str(desc.get("state", "ready")) not in ("ready", ""):
        raise ProviderError(f"cluster {place.cluster!r} is {desc.get('state')} now")


CPU_OVERSUBSCRIPTION = 8     # CPU processes per core a CPU-only node may be asked to run
MIN_CPU_PROCESSES = 16


def describe_cluster(provider: Any) -> dict[str, Any] | None:
    """The provider's describe(), or None when the cluster cannot say now (unreachable, no rights).

    Providers wrap their failures in FoundryError (plugins/compute.py); anything else is a bug and
    propagates rather than passing for "unknown"."""
    from foundry.plugins.errors import FoundryError

    try:
        return provider.describe() or {}
    except FoundryError:
        return None


def check_capacity(provider: Any, place: Placement, desc: dict[str, Any] | None) -> None:
    """Refuse a placement larger than the cluster, where the provider says how large it is
    (`desc`: describe_cluster's answer; None: capacity unknown, the provider decides at launch)."""
    from foundry.plugins.errors import ConfigError

    max_nodes = getattr(provider.capabilities, "max_nodes", None)
    if max_nodes is not None and place.nodes > max_nodes:
        most = "one node" if max_nodes == 1 else f"at most {max_nodes} nodes"
        raise ConfigError(f"cluster {place.cluster!r} runs on {most} (asked for {place.nodes})",
                          hint="use fewer nodes (--nodes), or another cluster (--cluster)")
    if desc is None:
        return
    nodes, gpus = desc.get("nodes"), desc.get("gpus")
    if isinstance(nodes, int) and nodes > 0 and place.nodes > nodes:
        raise ConfigError(f"cluster {place.cluster!r} has {nodes} node(s); the run asks for {place.nodes}",
                          hint="use fewer nodes (--nodes), or another cluster (--cluster)")
    gpu_job = (place.gpu_type or "").lower() not in ("cpu", "none")
    if isinstance(gpus, int) and gpus > 0 and gpu_job and place.devices > gpus:
        raise ConfigError(f"cluster {place.cluster!r} has {gpus} GPU(s); the run asks for {place.devices}",
                          hint="use fewer GPUs (--gpus), or another cluster (--cluster)")
    cpus = desc.get("cpus")
    if not gpus and isinstance(cpus, int) and cpus > 0 and isinstance(nodes, int) and nodes > 0:
        most = max(MIN_CPU_PROCESSES, CPU_OVERSUBSCRIPTION * (cpus // nodes))
        if place.procs_per_node > most:   # CPU processes: some oversubscription is fine, thousands are not
            raise ConfigError(f"cluster {place.cluster!r} has {cpus // nodes} CPU(s) per node; "
                              f"{place.procs_per_node} processes per node is more than {most}",
                              hint="use fewer processes (--gpus is the total on a CPU cluster)")


def check_support(provider: Any, place: Placement, spec: RunSpec) -> None:
    """Refuse what the spec asks and the cluster cannot do: an image, a GPU type, a launch mode."""
    from foundry.plugins.errors import ConfigError

    caps, kind = provider.capabilities, getattr(provider, "name", "?")
    if spec.image and not getattr(caps, "images", False):
        raise ConfigError(f"cluster {place.cluster!r} ({kind}) cannot run container image {spec.image!r}",
                          hint="remove `image` (the job uses the cluster's own environment), or use a kubernetes cluster")
    if (place.gpu_type or "").lower() not in ("", "cpu", "none") and not getattr(caps, "gpu_type_selection", False):
        raise ConfigError(f"cluster {place.cluster!r} ({kind}) cannot choose GPU type {place.gpu_type!r}",
                          hint="remove `gpu_type` (or set it to cpu), or use a slurm/kubernetes cluster")
    if spec.compute.instance and not getattr(caps, "instance_selection", False):
        raise ConfigError(f"cluster {place.cluster!r} ({kind}) cannot choose instance type {spec.compute.instance!r}",
                          hint="remove `compute.instance` (the cluster's own nodes run it), or use a kubernetes cluster")
    mode = spec.launch_mode
    if mode not in getattr(caps, "launch_modes", ("per_process",)):
        raise ConfigError(f"cluster {place.cluster!r} ({kind}) cannot start the command once per node "
                          f"(launch: {mode})", hint="set `launch: per_process` (the command then runs once per device)")


def wants_gpus(provider: Any, place: Placement, desc: dict[str, Any] | None) -> bool:
    """Whether the job asks for GPUs: the provider can schedule them and the cluster has some.

    A gpu_type decides; else the cluster's GPU count; unknown (desc None, or no count given) keeps
    what the provider's capabilities promise, and the scheduler has the last word at launch."""
    if not getattr(provider.capabilities, "gpus", False):
        return False
    if place.gpu_type:
        return place.gpu_type.lower() not in ("cpu", "none")
    gpus = (desc or {}).get("gpus")
    try:
        return gpus is None or int(gpus) > 0
    except (TypeError, ValueError):  # a count the provider gave in a shape we cannot read: unknown
        return True


def job_command(spec: RunSpec) -> list[str]:
    if spec.command is None:
        return list(DEFAULT_TRAINER_COMMAND)
    if isinstance(spec.command, list):
        return list(spec.command)
    return ["bash", "-c", spec.command]


def build_request(paths: FoundryPaths, secrets: SecretStore, spec: RunSpec, run_id: str,
                  resumption: int, place: Placement, gpu_cluster: bool) -> JobRequest:
    run_dir = paths.run_dir(spec.name)
    env = dict(spec.env_variables)
    env.update({
        "RUN_NAME": spec.name,
        "RUN_ID": run_id,
        "RESUMPTION_INDEX": str(resumption),
        "FOUNDRY_RUN_DIR": str(run_dir),
        "FOUNDRY_METRICS_FILE": str(run_dir / "metrics.jsonl"),
    })
    if spec.parameters is not None:
        env["FOUNDRY_PARAMETERS"] = yaml.safe_dump(spec.parameters, sort_keys=False)
    files: list[SecretMount] = []
    for name in spec.secrets:
        injection = secrets.injection(name)
        env.update(injection.env)
        files += [SecretMount(path=p, content=c) for p, c in injection.files.items()]
    setup = [line for integ in spec.integrations for line in integ.setup_commands()]
    return JobRequest(
        run_name=spec.name, run_id=run_id, resumption=resumption, command=job_command(spec),
        nodes=place.nodes, procs_per_node=place.procs_per_node,
        gpus_per_node=place.procs_per_node if gpu_cluster else 0, gpu_type=place.gpu_type,
        instance=spec.compute.instance, image=spec.image, env=env, secret_files=files,
        log_dir=str(paths.resumption_dir(spec.name, resumption)),
        extra={"setup_commands": setup, "priority": spec.scheduling.priority, "launch": spec.launch_mode},
    )
