"""At most N object downloads of one store in flight, the earliest-asked file served first.

A streaming reader fetches several shards at once, and each large shard is itself fetched as
`concurrency` ranged parts. Left alone, four shards of eight parts are 32 requests sharing one link:
the shard the reader waits for arrives when all four do (measured at 40 ms RTT: the first sample
after 4 s where one shard's download takes 1.4 s, and a slower epoch; docs/bench-streaming.md).
Through the gate a store has at most `slots` requests in flight, and a waiting request goes in
the order of its file's ticket (taken when the file was asked for), then its offset: the first
shard gets every slot, the next one's parts take the slots its last parts free, so the link stays
full and shards arrive in the order they were asked for.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from typing import Iterator


class RequestGate:
    def __init__(self, slots: int):
        self.slots = max(1, int(slots))
        self._free = self.slots
        self._waiting: list[tuple[int, int]] = []  # heap of (ticket, offset): requests in line
        self._lined: set[tuple[int, int]] = set()  # the same, to look up
        self._silent: set[int] = set()  # tickets whose file asks for no slot yet (its HEAD is on the way)
        self._cond = threading.Condition()
        self._tickets = itertools.count()

    @contextlib.contextmanager
    def turn(self) -> Iterator[int]:
        """A file's place in line, taken when the file is asked for, before any request: until the
        file asks for its first slot, later files wait (responses come back in any order). Leaving
        the block takes whatever the file left in line out of it (a download that failed)."""
        with self._cond:
            ticket = next(self._tickets)
            self._silent.add(ticket)
        try:
            yield ticket
        finally:
            with self._cond:
                self._silent.discard(ticket)
                left = [w for w in self._waiting if w[0] != ticket]
                if len(left) != len(self._waiting):
                    self._waiting, self._lined = left, set(left)
                    heapq.heapify(self._waiting)
                self._cond.notify_all()

    def line_up(self, ticket: int, offsets: list[int]) -> None:
        """Put every part of a file in line at once: a part whose thread is still busy with the part
        before keeps its place (otherwise the next file takes each slot this file frees)."""
        with self._cond:
            self._silent.discard(ticket)
            for offset in offsets:
                if (ticket, offset) not in self._lined:
                    self._lined.add((ticket, offset))
                    heapq.heappush(self._waiting, (ticket, offset))
            self._cond.notify_all()

    @contextlib.contextmanager
    def slot(self, ticket: int, offset: int = 0) -> Iterator[None]:
        """Hold one of the slots for one request (after lower tickets, then lower offsets)."""
        me = (ticket, offset)
        with self._cond:
            self._silent.discard(ticket)
            if me not in self._lined:
                self._lined.add(me)
                heapq.heappush(self._waiting, me)
                self._cond.notify_all()
            while not (self._free > 0 and self._waiting[0] == me
                       and (not self._silent or min(self._silent) > ticket)):
                self._cond.wait()
            self._lined.discard(heapq.heappop(self._waiting))
            self._free -= 1
            self._cond.notify_all()  # the next in line may take a slot too
        try:
            yield
        finally:
            with self._cond:
                self._free += 1
                self._cond.notify_all()

    def __reduce__(self):  # a store sent to another process gets a gate of its own there
        return (RequestGate, (self.slots,))

    def in_flight(self) -> int:
        with self._cond:
            return self.slots - self._free
