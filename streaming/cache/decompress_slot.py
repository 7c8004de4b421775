"""One decompression at a time per process, handed to the thread whose shard is needed first.

Decompressing is CPU- and memory-bound, and the reader needs the other core: more than one at a
time would slow the shard the reader waits for. Waiters are served by priority, not by arrival:
prefetch threads start in any order, and the first shard of an epoch must not wait behind the
second (a thread sets its priority with `decompress_priority`, the prefetcher its shard's rank
in first-use order; the reader's own thread comes first). Reentrant per thread.

While the reader's thread is blocked (`reader_blocked`: it waits for a shard another thread makes,
or for the slot itself) its core is idle, so the slot lends it: one more decompression runs. A
reader that decompresses a shard itself then starts at once, beside a prefetch thread's, and a
reader that waits for shard 1 lets shard 2's prefetch thread start beside it (the first samples
of a shuffle that mixes shards need them all at once: 3 zstd shards of 64 MB took 68 ms one by one).
Lent only by a process that is the node's only reader (`lend_reader_core`): DataLoader workers
and ranks on one node each block in turn, and lending there would run more decompressions than
the node has cores.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import threading
from typing import Iterator

_priority = threading.local()
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


class DecompressSlot:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owners: dict[int, int] = {}  # thread -> depth of its reentrant holds
        self._waiting: list[tuple[int, int]] = []  # heap of (priority, arrival)
        self._readers_blocked = 0
        self.lend_reader_core = False

    def _capacity(self) -> int:
        return 2 if self.lend_reader_core and self._readers_blocked else 1

    def __enter__(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if me in self._owners:
                self._owners[me] += 1
                return
            ticket = (getattr(_priority, "rank", READER_PRIORITY), next(_arrival))
            heapq.heappush(self._waiting, ticket)
            queued = getattr(_priority, "queued", None)
            if queued is not None:
                queued.set()
            reader = ticket[0] == READER_PRIORITY
            self._readers_blocked += reader  # a reader waiting here lends its own core: to itself
            try:
                while len(self._owners) >= self._capacity() or self._waiting[0] != ticket:
                    self._cond.wait()
            finally:
                self._readers_blocked -= reader
            heapq.heappop(self._waiting)
            self._owners[me] = 1
            self._cond.notify_all()  # the next waiter may fit too

    def __exit__(self, *exc: object) -> None:
        me = threading.get_ident()
        with self._cond:
            self._owners[me] -= 1
            if self._owners[me] == 0:
                del self._owners[me]
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


def lend_reader_core(lend: bool) -> None:
    """Whether this process's reader lends its core while it waits: set per iteration."""
    SLOT.lend_reader_core = lend


def _fresh_slot() -> None:  # a fork copies the slot as held by threads that are gone
    global SLOT
    SLOT = DecompressSlot()


os.register_at_fork(after_in_child=_fresh_slot)
