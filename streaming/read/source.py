"""The dataset's shards as the hot loop sees them (`read.iterator.ShardSource`): make local, open, evict.

One per iteration: it joins the streams' caches (shards numbered globally), the reader pool and
the evictor with the epoch's use schedule, so `read/iterator.py` needs nothing from `dataset.py`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..cache import Evictor, ShardCache, UseSchedule, lending
from ..format.contract import SampleReader
from ..plan.iteration import ReadPolicy
from .early.opener import EarlyOpener
from .pool import ReaderPool


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
        self._early = EarlyOpener(locator, readers.infos, readers.allow_unsafe_types, policy, self._open_whole)

    def ensure(self, shard: int) -> Any:
        """Called by the reader and by prefetch threads: their decompressions follow this
        iteration's policy (cache.decompress_slot)."""
        with lending(self._policy.lend_reader_core):
            return self._locator.ensure(shard)

    def open_soon(self, shards: list[int]) -> None:
        """Shards `open` will be asked for next (read.early.opener starts their ranged readers)."""
        self._early.open_soon(shards)

    def open(self, shard: int) -> SampleReader:
        """The shard's reader: an early one while the shard is being made whole (read/early/),
        else the whole local file's."""
        early = self._early.open(shard)
        return early if early is not None else self._open_whole(shard)

    def _open_whole(self, shard: int) -> SampleReader:
        self._early.opened_whole = True
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
