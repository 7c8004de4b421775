"""Download shards ahead of the reader in background threads.

The iterator knows, for its whole epoch, the order in which it first needs each shard and at which
sample. The prefetcher fetches shards in that order, never more than `window` samples ahead of
the reader's position, with a few download threads. Errors are left for the reader's own
`ensure`, which raises them with the shard's name.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from .decompress_slot import decompress_priority


_QUEUE_WAIT_S = 0.02


class Prefetcher:
    def __init__(self, ensure: Callable[[int], object], shards: Sequence[int], first_use: Sequence[int],
                 window: int, threads: int = 4, after: Callable[[int], object] | None = None, start: bool = True):
        self._ensure = ensure
        self._after = after
        self._shards = list(shards)
        self._first_use = list(first_use)
        self._window = max(1, int(window))
        self._position = 0
        self._cond = threading.Condition()
        self._stop = False
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="foundry-prefetch")
        self._slots = threading.Semaphore(max(1, threads) * 2)
        self._thread = threading.Thread(target=self._run, daemon=True, name="foundry-prefetch-dispatch")
        if start:
            self.start()

    def start(self) -> None:
        """Start fetching (at once, unless made with start=False); again: nothing."""
        with self._cond:
            if self._thread.ident is None and not self._stop:
                self._thread.start()

    def advance(self, position: int) -> None:
        """The reader is at sample `position` of its sequence."""
        with self._cond:
            self._position = position
            self._cond.notify()

    def close(self, wait: bool = False, _finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
        """Stop fetching; `wait` for the downloads already running (at the end of an epoch they
        are its last, and the cache should be settled when the epoch is)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        # An iterator left unfinished at exit: the pool's module is torn down, and so may be this
        # one's globals (`sys` is None then: the default keeps the function).
        if _finalizing():
            return
        self._pool.shutdown(wait=wait, cancel_futures=True)

    def _run(self) -> None:
        for rank, (shard, pos) in enumerate(zip(self._shards, self._first_use)):
            with self._cond:
                while not self._stop and pos > self._position + self._window:
                    self._cond.wait(1.0)
                if self._stop:
                    return
            self._slots.acquire()
            queued = threading.Event()
            try:
                self._pool.submit(self._one, shard, rank, queued)
            except RuntimeError:  # pool shut down
                return
            # Threads start in any order: let this one queue for the decompression slot first, so
            # that the shards the reader needs first are decompressed first (a download, which
            # queues only once it has its bytes, holds the next one back by _QUEUE_WAIT_S at most).
            queued.wait(_QUEUE_WAIT_S)

    def _one(self, shard: int, rank: int, queued: threading.Event) -> None:
        try:
            if not self._stop:
                with decompress_priority(rank, queued):  # the shard needed first is decompressed first
                    self._ensure(shard)
                if self._after is not None:
                    self._after(shard)
        except Exception:  # noqa: BLE001 - the reader's own ensure() raises it with context
            pass
        finally:
            self._slots.release()
