"""The environment a compute provider (or torchrun) gives each process of a job, read in one place.

RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE come from torchrun; RUN_NAME and RESUMPTION_INDEX
from the control plane. Missing values mean a single process on a single node. Read when asked
(`LaunchEnv.detect()`), never at import time. The trainer and the streaming dataset both build
their topology from this.
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
        # Without LOCAL_WORLD_SIZE every rank is on this node.
        local_world = num("LOCAL_WORLD_SIZE", world)
        if local_world < 1 or world % local_world:
            raise ConfigError(f"LOCAL_WORLD_SIZE={local_world} does not divide WORLD_SIZE={world}",
                              hint="every node must run the same number of processes")
        return cls(rank=rank, world_size=world, local_rank=num("LOCAL_RANK", rank % local_world),
                   local_world_size=local_world, resumption_index=num("RESUMPTION_INDEX", 0),
                   run_name=env.get("RUN_NAME") or None)
