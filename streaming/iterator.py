"""The per-worker sample iterator: epoch plan -> prefetch -> read.

Per sample the loop does one list step, one dict lookup and one `get_sample` call. Everything else
happens at "events": the first use of a shard (make it local, open it), the last use (close it),
and every `step` samples (tell the prefetcher where the reader is).

The loop sees the dataset only through an `EpochPlan` (what to read) and a `ShardSource` (how to
get a shard), so it can be driven by a fake source in tests and the dataset's internals can change
freely.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from .cache import Prefetcher


@dataclass(frozen=True)
class EpochPlan:
    """What one DataLoader worker of one rank reads in one epoch; built by StreamingDataset."""

    shards: np.ndarray   # global shard of each sample, in the order the worker yields them
    offsets: np.ndarray  # index of each sample within its shard
    window: int          # samples to fetch ahead of the reader
    prefetch: bool       # some shard may need a download or decompression first
    threads: int = 4     # download/decompression threads when prefetching


class ShardReader(Protocol):
    def get_sample(self, index: int) -> Any: ...
    def close(self) -> None: ...


class ShardSource(Protocol):
    """The shards behind a plan."""

    def ensure(self, shard: int) -> object:
        """Make the shard local (download, decompress); called from prefetch threads too."""

    def open(self, shard: int) -> ShardReader:
        """A reader over the local shard; the iterator closes it after the shard's last use."""

    def after_fetch(self, where: Callable[[], tuple[set[int], int]]) -> None:
        """A shard became local or was opened: keep the cache under its limit. `where()` tells the
        shards not to delete and the reader's position at the moment it is called (eviction may
        wait for another process). A source without a limit does nothing."""


class _NoPrefetch:
    """Every shard is already local: nothing to fetch ahead."""

    def advance(self, position: int) -> None:
        pass

    def close(self, wait: bool = False) -> None:
        pass


def first_and_last_use(shards: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct shards ordered by first use, with their first and last positions."""
    uniq, first = np.unique(shards, return_index=True)
    _, last_rev = np.unique(shards[::-1], return_index=True)
    last = len(shards) - 1 - last_rev
    by_use = np.argsort(first, kind="stable")
    return uniq[by_use], first[by_use], last[by_use]


def iterate(plan: EpochPlan, source: ShardSource) -> Iterator[Any]:
    shards, offsets = plan.shards, plan.offsets
    total = len(shards)
    if total == 0:
        return
    use_shards, use_first, use_last = first_and_last_use(shards)
    window = max(1, int(plan.window))
    position = [0]

    def protect() -> set[int]:
        lo = np.searchsorted(use_first, position[0], side="right") - 1
        hi = np.searchsorted(use_first, position[0] + window, side="right")
        return set(use_shards[max(0, lo):hi].tolist())

    def where() -> tuple[set[int], int]:
        return protect(), position[0]

    def after_fetch(_shard: int) -> None:
        source.after_fetch(where)

    prefetcher = (Prefetcher(source.ensure, use_shards.tolist(), use_first.tolist(), window,
                             threads=plan.threads, after=after_fetch) if plan.prefetch else _NoPrefetch())
    step = max(256, window // 4)
    readers: dict[int, Any] = {}
    getters: dict[int, Any] = {}
    closing: list[tuple[int, int]] = []  # (last use, shard)
    early: set[int] = set()  # shards read from their compressed frames for now (early_reader.py)
    finished = False
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
            reader = readers[shard] = source.open(shard)
            getters[shard] = reader.get_sample
            if not getattr(reader, "settled", True):
                early.add(shard)
            after_fetch(shard)
            heapq.heappush(closing, (last, shard))
            for c in range(a, b, step):
                e = min(b, c + step)
                if c != a:
                    position[0] = c
                    prefetcher.advance(c)
                if early:  # a shard decompressed since: read it directly from now on
                    for sh in [sh for sh in early if sh not in readers or readers[sh].settled]:
                        early.discard(sh)
                        if sh in readers:
                            getters[sh] = readers[sh].get_sample
                for s, j in zip(shard_list[c:e], local_list[c:e]):
                    yield getters[s](j)
        finished = True
    finally:
        prefetcher.close(wait=finished)
        source.after_fetch(where)
        for r in readers.values():
            try:
                r.close()
            except Exception:  # noqa: BLE001 - a sample may still view the map
                pass
