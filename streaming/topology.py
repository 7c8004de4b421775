"""Where this process sits: rank, world size, node, DataLoader worker. Detected, never imported.

`Topology` is Foundry's one topology type (plugins.launch_env.LaunchEnv: the same fields and properties,
node / num_nodes / alone_on_node included); this subclass adds only the streaming side's detect().

`Topology.detect()` reads torch.distributed when it is initialized, else the launch environment
(foundry.plugins.launch_env: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), and `torch.utils.data.get_worker_info()`
for the DataLoader worker. It is called when iteration starts, so a dataset built before
`init_process_group` still sees the right topology.
"""

from __future__ import annotations

from dataclasses import dataclass

from foundry.plugins.launch_env import LaunchEnv


@dataclass(frozen=True)
class Topology(LaunchEnv):
    @classmethod
    def detect(cls) -> "Topology":  # type: ignore[override]  # no environ: torch's view decides
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
        return cls(rank=rank, world_size=world, local_rank=local_rank, local_world_size=local_world,
                   resumption_index=launch.resumption_index, run_name=launch.run_name, worker_id=worker_id,
                   num_workers=num_workers)
