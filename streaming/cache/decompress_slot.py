"""One decompression at a time per process, handed to the thread whose shard is needed first.

Decompressing is CPU- and memory-bound, and the reader needs the other core: more than one at a
time would slow the shard the reader waits for. Waiters are served by priority, not by arrival:
prefetch threads start in any order, and the first shard of an epoch must not wait behind the
second (a thread sets its priority with `decompress_priority`, the prefetcher its shard's rank
in first-use order; the reader's own thread comes first). Reentrant per thread.
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
        self._owner: int | None = None
        self._depth = 0
        self._waiting: list[tuple[int, int]] = []  # heap of (priority, arrival)

    def __enter__(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return
            ticket = (getattr(_priority, "rank", READER_PRIORITY), next(_arrival))
            heapq.heappush(self._waiting, ticket)
            queued = getattr(_priority, "queued", None)
            if queued is not None:
                queued.set()
            while self._owner is not None or self._waiting[0] != ticket:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._owner, self._depth = me, 1

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()


SLOT = DecompressSlot()


def _fresh_slot() -> None:  # a fork copies the slot as held by threads that are gone
    global SLOT
    SLOT = DecompressSlot()


os.register_at_fork(after_in_child=_fresh_slot)
