"""The per-worker sample iterator: plan slice -> (shard, offset) arrays -> prefetch -> read.

All per-sample work is a list walk and one `get_sample` call: shard lookups, readiness checks and
prefetch bookkeeping happen once per run of consecutive samples from the same shard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from .cache import Prefetcher
from .plan import locate, rank_batches, worker_samples
from .plan.shuffle import group_bounds
from .topology import Topology

if TYPE_CHECKING:
    from .dataset import StreamingDataset


def worker_plan(ds: "StreamingDataset", topo: Topology, epoch: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    """(global shard, index within shard) of every sample this rank's worker yields."""
    g = ds._global_batch(topo)
    order = ds._epoch_order(epoch, g)
    batches = rank_batches(order, g, topo.world_size, topo.rank, start)
    ids = worker_samples(batches, topo.worker_id, topo.num_workers)
    return locate(ids, ds._layout.shard_offsets)


def iterate(ds: "StreamingDataset", topo: Topology, epoch: int, start: int) -> Iterator[Any]:
    shards, offsets = worker_plan(ds, topo, epoch, start)
    if len(shards) == 0:
        return
    starts, ends = group_bounds(shards)
    seg_shards = shards[starts]
    uniq, first = np.unique(seg_shards, return_index=True)
    by_use = np.argsort(first, kind="stable")
    use_shards, use_pos = uniq[by_use], starts[first[by_use]]
    window = ds._predownload_samples()

    def protect() -> set[int]:
        lo = np.searchsorted(use_pos, position[0], side="right") - 1
        hi = np.searchsorted(use_pos, position[0] + window, side="right")
        return set(use_shards[max(0, lo):hi].tolist())

    position = [0]
    evict = (lambda _s: ds._after_fetch(protect)) if ds._evictor.limit is not None else None
    prefetcher = Prefetcher(ds._ensure_shard, use_shards.tolist(), use_pos.tolist(), window,
                            threads=ds._download_threads, after=evict)
    step = max(1, window // 4)
    try:
        local = offsets.tolist()
        readers = ds._readers
        next_advance = 0
        for shard, a, b in zip(seg_shards.tolist(), starts.tolist(), ends.tolist()):
            if a >= next_advance:
                position[0] = a
                prefetcher.advance(a)
                next_advance = a + step
            get = readers.get(shard).get_sample
            for j in local[a:b]:
                yield get(j)
    finally:
        prefetcher.close()
