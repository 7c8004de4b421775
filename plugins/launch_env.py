"""The environment a compute provider (or torchrun) gives each process of a job, read in one place.

RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE come from torchrun (which always sets all four,
as do Foundry's providers); RUN_NAME and RESUMPTION_INDEX from the control plane. Missing values
mean a single process on a single node. A launcher that sets RANK/WORLD_SIZE but not the local
sizes (`srun python train.py` with a one-line wrapper, one Slurm task per rank) is read from
Slurm's own SLURM_LOCALID and tasks-per-node; without those, every rank is taken to be on this
node. Read when asked (`LaunchEnv.detect()`), never at import time.

LaunchEnv is Foundry's one topology type (as mosaic's `World` is theirs): the trainer uses it as it
is (`trainer.dist.DistEnv` is this class), and the streaming dataset's `Topology` (streaming/topology.py)
is this class with a detect() that also asks torch.distributed and fills the DataLoader worker fields.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from .errors import ConfigError


@dataclass(frozen=True)
class LaunchEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    resumption_index: int = 0
    run_name: str | None = None
    worker_id: int = 0       # the DataLoader worker reading in this process (streaming's Topology.detect)
    num_workers: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def node(self) -> int:
        return self.rank // self.local_world_size

    @property
    def num_nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)

    @property
    def alone_on_node(self) -> bool:
        """The node's only process reading a dataset: one rank, at most one DataLoader worker."""
        return self.local_world_size == 1 and self.num_workers == 1

    @classmethod
    def detect(cls, environ: Mapping[str, str] | None = None) -> "LaunchEnv":
        env = os.environ if environ is None else environ

        def num(name: str, default: int) -> int:
            value = env.get(name, "")
            try:
                return int(value) if value != "" else default
            except ValueError:
                raise ConfigError(f"environment variable {name}={value!r} is not an integer",
                                  hint="it is set by torchrun or the compute provider; unset it to run alone") from None

        world = num("WORLD_SIZE", 1)
        rank = num("RANK", 0)
        if world < 1 or not 0 <= rank < world:
            raise ConfigError(f"RANK={rank} is outside WORLD_SIZE={world}",
                              hint="launch with torchrun, or unset RANK and WORLD_SIZE")
        slurm = _slurm_layout(env, world)
        local_world = num("LOCAL_WORLD_SIZE", slurm[1] if slurm else world)  # else every rank is on this node
        if local_world < 1 or world % local_world:
            raise ConfigError(f"LOCAL_WORLD_SIZE={local_world} does not divide WORLD_SIZE={world}",
                              hint="every node must run the same number of processes")
        local_rank = num("LOCAL_RANK", slurm[0] if slurm and "LOCAL_WORLD_SIZE" not in env else rank % local_world)
        return cls(rank=rank, world_size=world, local_rank=local_rank,
                   local_world_size=local_world, resumption_index=num("RESUMPTION_INDEX", 0),
                   run_name=env.get("RUN_NAME") or None)


def _slurm_layout(env: Mapping[str, str], world: int) -> tuple[int, int] | None:
    """(local rank, ranks per node) from Slurm when it started one task per rank; None otherwise
    (not under Slurm, or srun started a launcher per node: torchrun then sets the local sizes)."""
    counts = next((env[k] for k in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE")
                   if env.get(k)), "")
    if not counts or env.get("SLURM_LOCALID", "") == "" or env.get("SLURM_NTASKS", env.get("SLURM_NPROCS")) != str(world):
        return None
    sizes = set()
    for part in counts.split(","):  # Slurm's compressed form: "4(x2),3"
        count, _, _ = part.partition("(")
        sizes.add(count.strip())
    try:
        per_node = int(sizes.pop()) if len(sizes) == 1 else 0
        local_rank = int(env["SLURM_LOCALID"])
    except ValueError:
        per_node, local_rank = 0, 0
    if per_node < 1:
        raise ConfigError(f"Slurm runs {counts} tasks per node: every node must run the same number of processes",
                          hint="give srun --ntasks-per-node, or set LOCAL_RANK and LOCAL_WORLD_SIZE")
    return local_rank, per_node
