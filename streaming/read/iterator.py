"""The per-worker sample iterator: epoch plan -> prefetch -> read.

Per sample the loop does one list step, one dict lookup and one `get_sample` call. Everything else
happens at "events": the first use of a shard (make it local, open it), the last use (close it),
and every `step` samples (tell the prefetcher where the reader is).

The loop sees the dataset only through an `EpochPlan` (what to read) and a `ShardSource` (how to
get a shard), so it can be driven by a fake source in tests and the dataset's internals can change
freely.
"""

from __future__ import annotations

import functools
import heapq
import os
import time
from typing import Any, Callable, Collection, Iterator, Protocol

import numpy as np

from ..cache import Prefetcher
from ..format.contract import SampleReader
from ..indexing import own_arrays
from ..plan.iteration import EpochPlan, ReadPolicy
from . import fork_gc


class ShardSource(Protocol):
    """The shards behind a plan."""

    def ensure(self, shard: int) -> object:
        """Make the shard local (download, decompress); called from prefetch threads too."""

    def open(self, shard: int) -> SampleReader:
        """A reader over the local shard; the iterator closes it after the shard's last use."""

    def after_fetch(self, where: Callable[[], tuple[set[int], int]]) -> None:
        """A shard became local or was opened: keep the cache under its limit. `where()` tells the
        shards not to delete and the reader's position at the moment it is called (eviction may
        wait for another process). A source without a limit does nothing."""

    def open_soon(self, shards: list[int]) -> None:
        """Shards `open` will be asked for next, while shards are read early: a source that opens
        early readers with round trips may start on them now. Others do nothing."""


class _NoPrefetch:
    """Every shard is already local: nothing to fetch ahead."""

    def start(self) -> None:
        pass

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


class _Progress:
    """One worker's walk through its plan: where the reader is, which shards it must keep (those in
    use and those the next `window` samples need), and the prefetcher that runs ahead of it."""

    def __init__(self, plan: EpochPlan, source: ShardSource, policy: ReadPolicy):
        self.source = source
        self.use_shards, self.use_first, self.use_last = first_and_last_use(plan.shards)
        self.window = max(1, int(plan.window))
        self.step = max(256, self.window // 4)  # samples between telling the prefetcher the position
        self.position = 0
        self.prefetcher = (Prefetcher(source.ensure, self.use_shards.tolist(), self.use_first.tolist(), self.window,
                                      threads=plan.threads, after=self.after_fetch, start=not policy.prefetch_after_first)
                           if plan.prefetch else _NoPrefetch())
        # collections during the walk skip what was alive before it (fork_gc.py); the release is
        # kept here: at exit this module's globals may be gone before `finish` runs
        self._thaw = fork_gc.release
        fork_gc.hold()

    def protect(self) -> set[int]:
        lo = np.searchsorted(self.use_first, self.position, side="right") - 1
        hi = np.searchsorted(self.use_first, self.position + self.window, side="right")
        return set(self.use_shards[max(0, lo):hi].tolist())

    def where(self) -> tuple[set[int], int]:
        return self.protect(), self.position

    def after_fetch(self, _shard: int | None = None) -> None:
        self.source.after_fetch(self.where)

    def advance(self, position: int) -> None:
        self.position = position
        self.prefetcher.advance(position)

    def finish(self, finished: bool, readers: dict[int, Any]) -> None:
        try:
            self.prefetcher.close(wait=finished)
            self.source.after_fetch(self.where)
            for r in readers.values():
                try:
                    r.close()
                except Exception:  # noqa: BLE001 - a sample may still view the map
                    pass
        finally:
            self._thaw()


# While some shard is read early with ranged reads, samples go out in runs of this many, and each
# run's samples are announced to their early readers first (fetched at once, not a round trip each).
EARLY_LOOKAHEAD = 32
# And the shards first needed within this many samples of one read early are opened together, up to
# this many at once (each open is a round trip or two: its header, its block digests).
EARLY_SPAN = 256
OPEN_AHEAD = 3


# How often the open shards' files are looked at (DeletedShards): a stat each, and with small
# shuffled shards hundreds are open (400 open: a check every 256 samples halved the epoch's rate).
RECHECK_S = 1.0


class DeletedShards:
    """Open again, which fetches again, each open shard whose file was deleted from the cache under
    its reader (by a user, a cleaner, another process's eviction), as mosaicml-streaming's reader
    fetches a missing shard at its next sample. The open reader could go on reading the deleted
    file's bytes (a map, or an open descriptor: they are right), but the cache must hold the shard
    again. Looked at once a second at most; only for plans whose shards can be fetched."""

    def __init__(self, plan: EpochPlan):
        self.active = plan.prefetch
        self.next = time.monotonic() + RECHECK_S

    def check(self, readers: dict[int, Any], source: ShardSource, reopened: Callable[[int, Any], None]) -> None:
        if not self.active or time.monotonic() < self.next:
            return
        reopen_deleted(readers, source, reopened)
        self.next = time.monotonic() + RECHECK_S


def reopen_deleted(readers: dict[int, Any], source: ShardSource, reopened: Callable[[int, Any], None]) -> None:
    """DeletedShards' look: a stat per open shard; `reopened(shard, reader)` for each one opened again."""
    for shard, reader in list(readers.items()):
        path = reader.path
        if path is None or os.path.exists(path):
            continue
        readers[shard] = fresh = source.open(shard)
        reopened(shard, fresh)
        try:
            reader.close()
        except Exception:  # noqa: BLE001 - a sample may still view the old map; GC closes it
            pass


def _expect(early: set[int], readers: dict[int, Any], shards: list[int], indices: list[int]) -> None:
    for sh in early:
        wanted = [j for s, j in zip(shards, indices) if s == sh]
        if wanted:
            readers[sh].expect(wanted)


def iterate(plan: EpochPlan, source: ShardSource, policy: ReadPolicy,
            sample: Callable[[int, int], Any] | None = None, own: Collection[int] = ()) -> Iterator[Any]:
    """The plan's samples. `sample(shard, index)`, when given, makes each one instead of the
    shard's reader (a dataset subclass that transforms samples); shards are fetched, opened and
    closed as usual around it. The samples of the shards in `own` get arrays of their own (copies,
    not views of the shard's map): those the plan yields more than once, so that an in-place
    change to one read never shows in the next."""
    shards, offsets = plan.shards, plan.offsets
    total = len(shards)
    if total == 0:
        return
    walk = _Progress(plan, source, policy)
    step = walk.step
    readers: dict[int, Any] = {}
    getters: dict[int, Any] = {}
    closing: list[tuple[int, int]] = []  # (last use, shard)
    early: set[int] = set()  # shards read before they are whole, for now (read/early/)
    ahead: set[int] = set()  # those of them whose reads can start ahead of the samples (ranged)
    finished = False

    def getter(shard: int, reader: Any) -> Callable[[int], Any]:
        if sample is not None:
            return functools.partial(sample, shard)
        if shard in own:
            return lambda index, get=reader.get_sample: own_arrays(get(index))
        return reader.get_sample

    def reopened(shard: int, reader: Any) -> None:
        getters[shard] = getter(shard, reader)

    deleted = DeletedShards(plan)
    try:
        shard_list, local_list = shards.tolist(), offsets.tolist()
        firsts = walk.use_first.tolist() + [total]
        use_list = walk.use_shards.tolist()
        for k, (shard, last) in enumerate(zip(use_list, walk.use_last.tolist())):
            a, b = firsts[k], firsts[k + 1]
            while closing and closing[0][0] < a:
                _, done = heapq.heappop(closing)
                getters.pop(done, None)
                readers.pop(done).close()
            walk.advance(a)
            reader = readers[shard] = source.open(shard)
            getters[shard] = getter(shard, reader)
            if not reader.settled:
                early.add(shard)
                if reader.reads_ahead:
                    ahead.add(shard)
            if ahead:  # the next shards the first samples need, opened at once
                soon = firsts[k + 1:k + 1 + OPEN_AHEAD]
                source.open_soon([sh for sh, f in zip(use_list[k + 1:k + 1 + OPEN_AHEAD], soon) if f < a + EARLY_SPAN])
            walk.after_fetch()
            heapq.heappush(closing, (last, shard))
            c = told = a
            while c < b:
                if c - told >= step:
                    walk.advance(c)
                    told = c
                deleted.check(readers, source, reopened)
                e = min(b, c + (EARLY_LOOKAHEAD if ahead else step))
                if early:  # a shard made whole since: read it directly from now on
                    for sh in [sh for sh in early if sh not in readers or readers[sh].settled]:
                        early.discard(sh)
                        ahead.discard(sh)
                        if sh in readers:
                            getters[sh] = getter(sh, readers[sh])
                if ahead:
                    _expect(ahead, readers, shard_list[c:c + EARLY_LOOKAHEAD], local_list[c:c + EARLY_LOOKAHEAD])
                run = zip(shard_list[c:e], local_list[c:e])
                if c == 0:  # the epoch's first sample
                    s, j = next(run)
                    yield getters[s](j)
                    walk.prefetcher.start()  # when it waited for it (ReadPolicy.prefetch_after_first)
                for s, j in run:
                    yield getters[s](j)
                c = e
        finished = True
    finally:
        walk.finish(finished, readers)


class BatchMaker(Protocol):
    """How `iterate_batches` batches (loader.worker_batches.WorkerBatches)."""

    size: int
    drop_last: bool

    def make(self, shards: list[int], indices: list[int], readers: dict[int, Any],
             get: Callable[[int, int], Any], reads_rows: bool) -> Any: ...


def iterate_batches(plan: EpochPlan, source: ShardSource, batches: BatchMaker, policy: ReadPolicy,
                    sample: Callable[[int, int], Any] | None = None) -> Iterator[Any]:
    """The plan's samples as batches of `batches.size` consecutive samples (what a DataLoader would
    take from `iterate`, one sample at a time), each made in one go by `batches.make`. Every shard a
    batch needs is open while it is made; a shard is closed once a batch past its last use starts."""
    shards, offsets = plan.shards, plan.offsets
    total = len(shards)
    if total == 0:
        return
    size = int(batches.size)
    walk = _Progress(plan, source, policy)
    readers: dict[int, Any] = {}
    closing: list[tuple[int, int]] = []  # (last use, shard)

    def get(shard: int, index: int) -> Any:
        return readers[shard].get_sample(index) if sample is None else sample(shard, index)

    finished = False
    deleted = DeletedShards(plan)
    try:
        shard_list, local_list = shards.tolist(), offsets.tolist()
        use = list(zip(walk.use_first.tolist(), walk.use_shards.tolist(), walk.use_last.tolist()))
        k = 0
        told = 0
        for begin in range(0, total, size):
            end = min(total, begin + size)
            if end - begin < size and batches.drop_last:
                break
            while closing and closing[0][0] < begin:
                readers.pop(heapq.heappop(closing)[1]).close()
            while k < len(use) and use[k][0] < end:
                first, shard, last = use[k]
                walk.advance(max(first, begin))
                readers[shard] = source.open(shard)
                walk.after_fetch()
                heapq.heappush(closing, (last, shard))
                k += 1
            if begin - told >= walk.step:
                walk.advance(begin)
                told = begin
            deleted.check(readers, source, lambda shard, reader: None)
            yield batches.make(shard_list[begin:end], local_list[begin:end], readers, get, policy.reads_rows)
            if begin == 0:
                walk.prefetcher.start()  # when it waited for the first batch (ReadPolicy.prefetch_after_first)
        finished = True
    finally:
        walk.finish(finished, readers)
