"""Eviction under a byte limit, across every stream of a dataset.

The order comes from the node's use schedule for the epoch (`schedule.py`: shards not in flight
first, then farthest next use first), or is least recently used without one. Only shards that can be downloaded again (their stream has a remote that is not the local folder)
are deleted; data that exists only locally is never touched. "Used" is the raw file's mtime, which
`ShardCache.ensure` refreshes whenever a reader opens the shard. Evicting a shard that another
process has mapped is safe on POSIX (its mapping stays valid); it is downloaded again if needed.
"""

from __future__ import annotations

import warnings
from typing import Callable, Iterable, Sequence

import numpy as np
from filelock import FileLock

from foundry.plugins.errors import ConfigValueError
from foundry.streaming.units import parse_bytes  # noqa: F401  (re-exported: cache.parse_bytes)

from .schedule import UseSchedule
from .shards import ShardCache

MIN_SHARDS_IN_LIMIT = 4


def check_cache_limit(caches: Sequence[ShardCache], limit: int | None) -> None:
    """mosaicml-streaming 0.13 refuses a cache_limit under four of the largest shard (its raw and
    compressed files together): so does Foundry, with the same ValueError."""
    if limit is None:
        return
    biggest = max(((f.raw_bytes or 0) + (f.zip_bytes or 0) for c in caches for i in range(len(c.shards))
                   for f in c.files(i)), default=0)
    if limit < MIN_SHARDS_IN_LIMIT * biggest:
        raise ConfigValueError(f"cache_limit {limit} bytes is too low: it must hold at least "
                               f"{MIN_SHARDS_IN_LIMIT} of the largest shard ({biggest} bytes, raw and compressed)",
                               hint=f"raise cache_limit to {MIN_SHARDS_IN_LIMIT * biggest} bytes or more")


class Evictor:
    """Keeps the shards of `caches` (a dataset's streams, shards numbered globally) under `limit`."""

    def __init__(self, caches: Sequence[ShardCache], limit: int | None):
        self.caches = list(caches)
        self.limit = limit
        self._index: list[tuple[ShardCache, int]] = [(c, i) for c in self.caches for i in range(len(c.shards))]
        self._warned = False
        self._warned_thrash = False
        self._sizes = np.array([(s.raw_bytes or 0) + ((s.zip_bytes or 0) if c.keep_zip else 0)
                                for c, i in self._index for s in [c.shards[i]]], dtype=np.int64)
        if limit is not None:  # (StreamingDataset refuses less than 4 shards first, as mosaic does)
            biggest = max((s.raw_bytes or 0) + (s.zip_bytes or 0) for c in self.caches for s in c.shards) if self._index else 0
            if limit < biggest:
                raise ConfigValueError(f"cache_limit {limit} bytes is smaller than one shard ({biggest} bytes)",
                                       hint="raise cache_limit to hold at least a few shards")

    def maybe_evict(self, protect: Iterable[int] | Callable[[], tuple[Iterable[int], int]] = (),
                    schedule: UseSchedule | None = None, lookahead: int = 0) -> int:
        """Delete re-downloadable shards until under the limit; bytes freed.

        `protect`: shards never to delete, or a function returning them and the node's tick, called
        under the lock so that a caller that waited for it decides on the present. With the node's
        `schedule`, the shards no reader can be holding for a later use go first (done with, or not
        fetched yet this epoch), each group farthest next use first; without one, the least
        recently used. Evicting a shard the epoch still
        needs means it is downloaded again: that is warned about once, with the size that avoids it."""
        if self.limit is None or not self.caches:
            return 0
        lock_dir = self.caches[0].state_dir
        lock_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock_dir / "evict.lock")):
            used = 0
            candidates = []
            present = []
            for g, (cache, i) in enumerate(self._index):
                size = cache.present_bytes(i)
                if size:
                    used += size
                    present.append(g)
            # asked after the scan: a shard that appeared during it is one a reader is opening now
            keep, tick = protect() if callable(protect) else (protect, 0)
            keep = set(keep)
            for g in present:
                cache, i = self._index[g]
                if cache.evictable and g not in keep:
                    candidates.append((cache.last_used(i) or 0.0, g))
            if used <= self.limit:
                return 0
            if schedule is not None:
                ids = [g for _, g in candidates]
                nxt = schedule.next_use(ids, tick).tolist()
                flying = schedule.in_flight(ids, tick, lookahead).tolist()
                candidates = [(f, -n, t, g) for n, f, (t, g) in zip(nxt, flying, candidates)]
            else:
                candidates = [(False, 0, t, g) for t, g in candidates]
            freed = 0
            refetch = 0
            for flying, _, _, g in sorted(candidates):
                if used - freed <= self.limit:
                    break
                cache, i = self._index[g]
                freed += cache.evict(i)
                refetch += flying
            if refetch and not self._warned_thrash:
                self._warned_thrash = True
                need = schedule.peak_in_flight(self._sizes, lookahead)
                warnings.warn(f"cache_limit={self.limit} bytes is below the {need} bytes of shards this node has in "
                              f"flight: shards are evicted before their last use (readers that have not opened them yet "
                              f"download them again); "
                              f"raise cache_limit to at least {need} bytes (or pass cache_limit=None)", stacklevel=2)
            if used - freed > self.limit and not self._warned:
                self._warned = True
                warnings.warn(f"shard cache holds {used - freed} bytes, over cache_limit={self.limit}: the rest is "
                              "in use or exists only locally and is never evicted", stacklevel=2)
            return freed
