"""Where this process sits: rank, world size, node, DataLoader worker. Detected, never imported.

`Topology.detect()` reads torch.distributed when it is initialized, else the launch environment
(foundry.plugins.launch_env: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), and `torch.utils.data.get_worker_info()`
for the DataLoader worker. It is called when iteration starts, so a dataset built before
`init_process_group` still sees the right topology.
"""

from __future__ import annotations

from dataclasses import dataclass

from foundry.plugins.launch_env import LaunchEnv


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

    @property
    def alone_on_node(self) -> bool:
        """The node's only process reading this dataset: one rank, at most one DataLoader worker."""
        return self.local_world_size == 1 and self.num_workers == 1

    @classmethod
    def detect(cls) -> "Topology":
        launch = LaunchEnv.detect()
        rank, world = launch.rank, launch.world_size
        local_rank, local_world = launch.local_rank, launch.local_world_size
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
            if world % local_world:  # a process group that does not match the launcher's layout
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
