"""The dataset's shards as the hot loop sees them (`iterator.ShardSource`): make local, open, evict.

One per iteration: it joins the streams' caches (shards numbered globally), the reader pool and
the evictor with the epoch's use schedule, so `iterator.py` needs nothing from `dataset.py`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .cache import Evictor, ShardCache, UseSchedule
from .early_reader import EarlyShardReader
from .readers import ReaderPool


class ShardLocator:
    """Global shard number -> (stream cache, shard within it)."""

    def __init__(self, caches: Sequence[ShardCache]):
        self.caches = list(caches)
        self._cache = np.concatenate([np.full(len(c.shards), k, dtype=np.int64) for k, c in enumerate(self.caches)])
        self._local = np.concatenate([np.arange(len(c.shards), dtype=np.int64) for c in self.caches])

    def ensure(self, shard: int):
        return self.caches[self._cache[shard]].ensure(int(self._local[shard]))

    def unready_local_zip(self, shard: int):
        return self.caches[self._cache[shard]].unready_local_zip(int(self._local[shard]))

    def is_ready(self, shard: int) -> bool:
        return self.caches[self._cache[shard]].is_ready(int(self._local[shard]))

    @property
    def bytes_downloaded(self) -> int:
        return sum(c.bytes_downloaded for c in self.caches)


class DatasetShards:
    def __init__(self, locator: ShardLocator, readers: ReaderPool, evictor: Evictor,
                 schedule: UseSchedule | None = None, window: int = 0):
        self._locator = locator
        self._readers = readers
        self._evictor = evictor
        self._schedule = schedule
        self._lookahead = schedule.lookahead(window) if schedule is not None else 0
        self._downloaded_seen = -1
        self._opening: set[int] = set()

    def ensure(self, shard: int) -> Any:
        return self._locator.ensure(shard)

    def open(self, shard: int) -> Any:
        """The shard's reader: from its compressed file's frames while it is being decompressed
        (early_reader.py), else from the decompressed file once it is local. Not in DataLoader
        workers: their batch needs samples of every shard at once and the node's cores are busy
        decompressing those shards whole, so reading frames only steals from that (measured:
        batch-256 epoch 23-26k vs 27-30k samples/s without)."""
        zip_path = None if self._readers.in_worker() else self._locator.unready_local_zip(shard)
        framed = self._readers.open_framed(shard, zip_path) if zip_path is not None else None
        if framed is None:
            return self._open_whole(shard)
        return EarlyShardReader(framed, lambda: self._locator.is_ready(shard), lambda: self._open_whole(shard))

    def _open_whole(self, shard: int) -> Any:
        self._opening.add(shard)  # not evicted between being made local and being mapped
        try:
            return self._readers.open(shard)
        finally:
            self._opening.discard(shard)

    def after_fetch(self, where: Callable[[], tuple[set[int], int]]) -> None:
        if self._evictor.limit is None:
            return
        total = self._locator.bytes_downloaded
        if total != self._downloaded_seen:  # nothing new in the cache: nothing to evict
            self._downloaded_seen = total

            def now() -> tuple[set[int], int]:
                keep, position = where()
                return keep | self._opening, self._schedule.tick(position) if self._schedule is not None else 0

            self._evictor.maybe_evict(now, self._schedule, self._lookahead)
