"""One decompression at a time per process, handed to the thread whose shard is needed first.

Decompressing is CPU- and memory-bound, and the reader needs the other core: more than one at a
time would slow the shard the reader waits for. Waiters are served by priority, not by arrival:
prefetch threads start in any order, and the first shard of an epoch must not wait behind the
second (a thread sets its priority with `decompress_priority`, the prefetcher its shard's rank
in first-use order; the reader's own thread comes first). Reentrant per thread.

While the reader is not reading, its core is free, and the slot lends it: the reader's own
decompression (a shard it makes itself) never waits for a prefetch thread's, and while the reader
is blocked on a shard another thread or process makes (`reader_blocked`) one more prefetch thread
decompresses. Either way two decompressions run at once, never more (the first samples of a
shuffle that mixes shards need every shard at once: 3 zstd shards of 64 MB took 68 ms one by one).
Lent only by the node's only reader (ReadPolicy.lend_reader_core): DataLoader workers and ranks
on one node each block in turn, and lending there would run more decompressions than the node has
cores. The decision is an iteration's, not the process's: its shard source enters the slot inside
`lending(policy.lend_reader_core)` (a per-thread setting for the length of one call), so two
datasets iterated in one process each keep their own.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import threading
from typing import Iterator

_priority = threading.local()
_lending = threading.local()
_arrival = itertools.count()
READER_PRIORITY = -1


@contextlib.contextmanager
def decompress_priority(rank: int, queued: threading.Event | None = None) -> Iterator[None]:
    """Decompressions this thread starts inside the block wait behind lower ranks only; `queued`
    is set once the thread waits for (or holds) the slot, or leaves the block."""
    before = getattr(_priority, "rank", READER_PRIORITY), getattr(_priority, "queued", None)
    _priority.rank, _priority.queued = rank, queued
    try:
        yield
    finally:
        _priority.rank, _priority.queued = before
        if queued is not None:
            queued.set()


@contextlib.contextmanager
def lending(lend: bool) -> Iterator[None]:
    """Decompressions this thread waits for inside the block follow `lend` (ReadPolicy.lend_reader_core)."""
    before = getattr(_lending, "lend", None)
    _lending.lend = lend
    try:
        yield
    finally:
        _lending.lend = before


class DecompressSlot:
    def __init__(self, lend_reader_core: bool = False) -> None:
        self._cond = threading.Condition()
        self._owners: dict[int, int] = {}  # thread -> depth of its reentrant holds
        self._reader_owners: set[int] = set()  # of them, reader threads (no decompress_priority)
        self._waiting: list[tuple[int, int]] = []  # heap of (priority, arrival)
        self._readers_blocked = 0
        self.lend_reader_core = lend_reader_core  # for a thread outside `lending` (random access)

    def lends(self) -> bool:
        """Whether a decompression this thread waits for now may use the reader's core."""
        lend = getattr(_lending, "lend", None)
        return self.lend_reader_core if lend is None else lend

    def _fits(self, reader: bool, lend: bool) -> bool:
        if not lend:
            return not self._owners
        if reader:  # on its own core
            return not self._reader_owners
        prefetching = len(self._owners) - len(self._reader_owners)
        return prefetching < (2 if self._readers_blocked else 1)

    def __enter__(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if me in self._owners:
                self._owners[me] += 1
                return
            ticket = (getattr(_priority, "rank", READER_PRIORITY), next(_arrival))
            reader, lend = ticket[0] == READER_PRIORITY, self.lends()
            heapq.heappush(self._waiting, ticket)
            queued = getattr(_priority, "queued", None)
            if queued is not None:
                queued.set()
            while self._waiting[0] != ticket or not self._fits(reader, lend):
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._owners[me] = 1
            if reader:
                self._reader_owners.add(me)
            self._cond.notify_all()  # the next waiter may fit too

    def __exit__(self, *exc: object) -> None:
        me = threading.get_ident()
        with self._cond:
            self._owners[me] -= 1
            if self._owners[me] == 0:
                del self._owners[me]
                self._reader_owners.discard(me)
                self._cond.notify_all()

    @contextlib.contextmanager
    def reader_blocked(self) -> Iterator[None]:
        """Around a wait of this thread for a shard another thread or process makes: a reader's
        core is lent to the next waiting decompression meanwhile. Other threads' waits lend nothing."""
        if getattr(_priority, "rank", READER_PRIORITY) != READER_PRIORITY:
            yield
            return
        with self._cond:
            self._readers_blocked += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._readers_blocked -= 1


SLOT = DecompressSlot()


def _fresh_slot() -> None:  # a fork copies the slot as held by threads that are gone
    global SLOT
    SLOT = DecompressSlot()


os.register_at_fork(after_in_child=_fresh_slot)
