"""The dataset's shards as the hot loop sees them (`iterator.ShardSource`): make local, open, evict.

One per iteration: it joins the streams' caches (shards numbered globally), the reader pool and
the evictor with the epoch's use schedule, so `iterator.py` needs nothing from `dataset.py`.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, Sequence

import numpy as np

from .cache import Evictor, ShardCache, UseSchedule, lending
from . import early_reader
from .early_reader import EarlyShardReader
from .format.contract import SampleReader
from .format.ranged_reader import reads as ranged_reads
from .plan.iteration import ReadPolicy
from .readers import ReaderPool


# Early readers opened in the background at once, at most: each waits in the ranged-read pool for
# its block digests, which must find a thread free there (format.ranged_reader.CONCURRENT_READS).
OPEN_AHEAD_MAX = 3


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

    @property
    def far_remote(self) -> bool:
        """Some stream's remote is a store that ranged reads come from (across a WAN)."""
        return any(c.far_store for c in self.caches)

    def early_ranges(self, shard: int):
        return self.caches[self._cache[shard]].early_ranges(int(self._local[shard]))

    def is_ready(self, shard: int) -> bool:
        return self.caches[self._cache[shard]].is_ready(int(self._local[shard]))

    def evict(self, shard: int) -> int:
        return self.caches[self._cache[shard]].evict(int(self._local[shard]))

    @property
    def bytes_downloaded(self) -> int:
        return sum(c.bytes_downloaded for c in self.caches)


class DatasetShards:
    def __init__(self, locator: ShardLocator, readers: ReaderPool, evictor: Evictor, policy: ReadPolicy,
                 schedule: UseSchedule | None = None, window: int = 0):
        self._policy = policy
        self._locator = locator
        self._readers = readers
        self._evictor = evictor
        self._schedule = schedule
        self._lookahead = schedule.lookahead(window) if schedule is not None else 0
        self._downloaded_seen = -1
        self._opening: set[int] = set()
        self._opened_whole = False  # some shard of this iteration was read whole
        self._soon: dict[int, Future] = {}  # shard -> its early reader being opened (open_soon)

    def ensure(self, shard: int) -> Any:
        """Called by the reader and by prefetch threads: their decompressions follow this
        iteration's policy (cache.decompress_slot)."""
        with lending(self._policy.lend_reader_core):
            return self._locator.ensure(shard)

    def open_soon(self, shards: list[int]) -> None:
        """Start opening these shards' ranged early readers in the background (open takes them)."""
        if self._opened_whole or not self._policy.ranged_early:
            return
        for shard in shards:
            if shard not in self._soon and len(self._soon) < OPEN_AHEAD_MAX:
                self._soon[shard] = ranged_reads().submit(self._open_early_ranged, shard)

    def open(self, shard: int) -> Any:
        """The shard's reader: an early one while the shard is being made whole (early_reader.py),
        else the whole local file's. Not in DataLoader workers: their batch needs samples of every
        shard at once and the node's cores are busy making those shards whole, so early reads only
        steal from that (measured with frames: batch-256 epoch 23-26k vs 27-30k samples/s without)."""
        soon = self._soon.pop(shard, None)
        if soon is not None:  # its ranged reader, being opened: or none, and then maybe frames
            early = soon.result() or self._open_framed(shard)
        else:
            early = self._open_early(shard)
        return early if early is not None else self._open_whole(shard)

    def _open_early(self, shard: int) -> EarlyShardReader | None:
        if not self._policy.framed_early:  # off in workers (ReadPolicy): ranged reads are off there too
            return None
        zip_path = self._locator.unready_local_zip(shard)  # checks the compressed copy: once
        return self._open_framed(shard, zip_path) if zip_path is not None else self._open_early_ranged(shard)

    def _open_framed(self, shard: int, zip_path: Any = None) -> EarlyShardReader | None:
        if zip_path is None:
            zip_path = self._locator.unready_local_zip(shard)
        framed = self._readers.open_framed(shard, zip_path) if zip_path is not None else None
        if framed is None:
            return None
        return EarlyShardReader(framed, lambda: self._locator.is_ready(shard), lambda: self._open_whole(shard),
                                budget=early_reader.EARLY_FRAMES)

    def _open_early_ranged(self, shard: int) -> EarlyShardReader | None:
        if self._opened_whole or not self._policy.ranged_early:  # for a cold start; later they would only share the link
            return None
        ranges = self._locator.early_ranges(shard)
        ranged = self._readers.open_ranged(shard, *ranges) if ranges is not None else None
        if ranged is None:
            return None
        blocks = min(early_reader.BLOCK_BUDGET * ranged.blocks, early_reader.BLOCK_BUDGET_BYTES / ranged.block_bytes)
        return EarlyShardReader(ranged, lambda: self._locator.is_ready(shard), lambda: self._open_whole(shard),
                                budget=max(2, int(blocks)), on_whole=lambda w: ranged.check_against(w.path))

    def _open_whole(self, shard: int) -> SampleReader:
        self._opened_whole = True
        self._opening.add(shard)  # not evicted between being made local and being mapped
        try:
            with lending(self._policy.lend_reader_core):
                return self._readers.open(shard, self._policy.mapped)
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
