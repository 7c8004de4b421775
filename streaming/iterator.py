"""The per-worker sample iterator: plan slice -> (shard, offset) lists -> prefetch -> read.

Per sample the loop does one list step, one dict lookup and one `get_sample` call. Everything else
happens at "events": the first use of a shard (make it local, open it), the last use (close it),
and every `step` samples (tell the prefetcher where the reader is).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from .cache import Prefetcher
from .plan import locate
from .topology import Topology

if TYPE_CHECKING:
    from .dataset import StreamingDataset


class _NoPrefetch:
    """Every shard is already local: nothing to fetch ahead."""

    def advance(self, position: int) -> None:
        pass

    def close(self) -> None:
        pass


def worker_plan(ds: "StreamingDataset", topo: Topology, epoch: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    """(global shard, index within shard) of every sample this rank's worker yields."""
    ids = ds._worker_sample_ids(topo, epoch, start)
    return locate(ids, ds._layout.shard_offsets)


def first_and_last_use(shards: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct shards ordered by first use, with their first and last positions."""
    uniq, first = np.unique(shards, return_index=True)
    _, last_rev = np.unique(shards[::-1], return_index=True)
    last = len(shards) - 1 - last_rev
    by_use = np.argsort(first, kind="stable")
    return uniq[by_use], first[by_use], last[by_use]


def iterate(ds: "StreamingDataset", topo: Topology, epoch: int, start: int) -> Iterator[Any]:
    shards, offsets = worker_plan(ds, topo, epoch, start)
    total = len(shards)
    if total == 0:
        return
    use_shards, use_first, use_last = first_and_last_use(shards)
    window = ds._predownload_samples()
    position = [0]

    def protect() -> set[int]:
        lo = np.searchsorted(use_first, position[0], side="right") - 1
        hi = np.searchsorted(use_first, position[0] + window, side="right")
        return set(use_shards[max(0, lo):hi].tolist())

    evict = (lambda _s: ds._after_fetch(protect)) if ds._evictor.limit is not None else None
    prefetcher = (Prefetcher(ds._ensure_shard, use_shards.tolist(), use_first.tolist(), window,
                             threads=ds._download_threads, after=evict) if ds._has_remote else _NoPrefetch())
    step = max(256, window // 4)
    readers: dict[int, Any] = {}
    getters: dict[int, Any] = {}
    closing: list[tuple[int, int]] = []  # (last use, shard)
    try:
        shard_list, local_list = shards.tolist(), offsets.tolist()
        firsts = use_first.tolist() + [total]
        for k, (shard, last) in enumerate(zip(use_shards.tolist(), use_last.tolist())):
            a, b = firsts[k], firsts[k + 1]
            while closing and closing[0][0] < a:
                _, done = heapq.heappop(closing)
                getters.pop(done, None)
                readers.pop(done).close()
            position[0] = a
            prefetcher.advance(a)
            reader = readers[shard] = ds._readers.open(shard)
            getters[shard] = reader.get_sample
            if evict is not None:
                evict(shard)
            heapq.heappush(closing, (last, shard))
            for c in range(a, b, step):
                e = min(b, c + step)
                if c != a:
                    position[0] = c
                    prefetcher.advance(c)
                for s, j in zip(shard_list[c:e], local_list[c:e]):
                    yield getters[s](j)
    finally:
        prefetcher.close()
        if evict is not None:
            evict(-1)
        for r in readers.values():
            try:
                r.close()
            except Exception:  # noqa: BLE001 - a sample may still view the map
                pass
