"""Where this process sits: rank, world size, node, DataLoader worker. Detected, never imported.

`Topology.detect()` reads torch.distributed when it is initialized, else the torchrun environment
variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), and `torch.utils.data.get_worker_info()`
for the DataLoader worker. It is called when iteration starts, so a dataset built before
`init_process_group` still sees the right topology.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Topology:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    worker_id: int = 0
    num_workers: int = 1

    @property
    def node(self) -> int:
        return self.rank // self.local_world_size

    @property
    def num_nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)

    @classmethod
    def detect(cls) -> "Topology":
        rank, world = 0, 1
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
            else:
                rank = int(os.environ.get("RANK", 0))
                world = int(os.environ.get("WORLD_SIZE", 1))
        except ImportError:  # pragma: no cover - torch is a dependency
            rank = int(os.environ.get("RANK", 0))
            world = int(os.environ.get("WORLD_SIZE", 1))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        local_rank = int(os.environ.get("LOCAL_RANK", rank % max(1, local_world)))
        if local_world <= 0 or world % local_world:
            local_world, local_rank = world, rank
        worker_id, num_workers = 0, 1
        try:
            from torch.utils.data import get_worker_info

            info = get_worker_info()
            if info is not None:
                worker_id, num_workers = info.id, info.num_workers
        except ImportError:  # pragma: no cover
            pass
        return cls(rank, world, local_rank, local_world, worker_id, num_workers)
