"""When the node needs each shard this epoch: the eviction order under a cache limit.

Every rank of a node reads its per-device batches in lockstep, and DataLoader workers take turns
batch by batch, so the batch index within a rank is a clock shared by every reader on the node.
`UseSchedule` records, for every shard, the clock ticks at which any reader of the node uses it.
A shard is in flight from the moment a reader may fetch it until the last reader is done with it.
Evicting shards not in flight first, then the one whose next use is farthest away (Belady's
order): when the cache holds the shards in flight at any moment (`peak_in_flight`), no shard is
downloaded twice in an epoch. Pure numpy; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class UseSchedule:
    shards: np.ndarray  # sorted distinct shards used this epoch on the node
    starts: np.ndarray  # uses of shards[k] are ticks[starts[k]:starts[k + 1]]
    ticks: np.ndarray   # sorted ascending within each shard
    per_batch: int      # samples in one per-device batch
    worker: int         # this reader's DataLoader worker and their count: its position -> tick
    num_workers: int
    lag: int = 0        # ticks the slowest reader of the node may trail this one by

    @classmethod
    def build(cls, rank_shards: Sequence[np.ndarray], per_batch: int, worker: int = 0,
              num_workers: int = 1) -> "UseSchedule":
        """`rank_shards`: for every rank of the node, the shard of each sample it reads, in order.

        Readers trail each other: the DataLoader keeps two batches per worker in flight and ranks
        meet at every step, so with several readers a shard counts as used a few ticks longer."""
        per = max(1, int(per_batch))
        pairs = [np.stack([np.asarray(s, np.int64), np.arange(len(s), dtype=np.int64) // per]) for s in rank_shards]
        both = np.concatenate(pairs, axis=1) if pairs else np.empty((2, 0), np.int64)
        both = np.unique(both, axis=1)  # sorted by shard, then tick
        shards, starts = np.unique(both[0], return_index=True)
        workers = max(1, int(num_workers))
        lag = 2 * workers + 2 if workers > 1 or len(rank_shards) > 1 else 0
        return cls(shards, np.append(starts, both.shape[1]), both[1].copy(), per, int(worker), workers, lag)

    def tick(self, position: int) -> int:
        """The node clock of the slowest reader when this one is at sample `position` of its own
        sequence (a shard one of them still needs must count as used)."""
        return max(0, self.worker + self.num_workers * (int(position) // self.per_batch) - self.lag)

    def lookahead(self, window: int) -> int:
        """Ticks covered by `window` samples fetched ahead of a reader."""
        return -(-int(window) // self.per_batch) * self.num_workers

    def next_use(self, shards: Sequence[int], tick: int) -> np.ndarray:
        """For each shard, the first tick >= `tick` at which the node uses it (NEVER if none)."""
        out = np.full(len(shards), NEVER, dtype=np.int64)
        k = np.searchsorted(self.shards, np.asarray(shards, np.int64))
        for j, (shard, kk) in enumerate(zip(shards, k.tolist())):
            if kk < len(self.shards) and self.shards[kk] == shard:
                lo, hi = int(self.starts[kk]), int(self.starts[kk + 1])
                at = lo + int(np.searchsorted(self.ticks[lo:hi], tick))
                if at < hi:
                    out[j] = self.ticks[at]
        return out

    def in_flight(self, shards: Sequence[int], tick: int, lookahead: int = 0) -> np.ndarray:
        """Whether some reader of the node may have fetched each shard and not be done with it:
        evicting it may mean a second download this epoch. A shard not yet started comes once anyway.

        `tick` is the slowest reader's (`tick()`): this reader is up to `lag` ahead of it and the
        fastest up to `lag` ahead of this one, fetching `lookahead` beyond its own position."""
        out = np.zeros(len(shards), dtype=bool)
        k = np.searchsorted(self.shards, np.asarray(shards, np.int64))
        for j, (shard, kk) in enumerate(zip(shards, k.tolist())):
            if kk < len(self.shards) and self.shards[kk] == shard:
                first = int(self.ticks[self.starts[kk]]) - int(lookahead) - 2 * self.lag
                last = int(self.ticks[self.starts[kk + 1] - 1])
                out[j] = first <= tick <= last
        return out

    def peak_in_flight(self, sizes: np.ndarray, lookahead: int = 0) -> int:
        """The most bytes of shards `in_flight` at any one tick, as one reader of the node sees them
        (it does not know where the others are, only that they are within `lag` of it: so a shard
        counts from `lag` ticks before its first use less `lookahead` until `lag` ticks after its
        last): the cache size that downloads each shard once this epoch. `sizes`: bytes of every
        shard, by global shard number."""
        if not len(self.shards):
            return 0
        first = self.ticks[self.starts[:-1]] - int(lookahead) - self.lag
        last = self.ticks[self.starts[1:] - 1] + self.lag
        size = np.asarray(sizes, np.int64)[self.shards]
        events = np.concatenate([first, last + 1])
        delta = np.concatenate([size, -size])
        order = np.lexsort((delta, events))  # at one tick, releases before acquisitions
        return int(np.max(np.cumsum(delta[order])))
