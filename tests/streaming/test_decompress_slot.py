"""The per-process decompression slot: waiters served by priority (first-use rank), reentrant."""

from __future__ import annotations

import threading
import time

from foundry.streaming.cache.decompress_slot import DecompressSlot, decompress_priority


def test_waiters_are_served_lowest_rank_first_and_a_holder_reenters():
    slot = DecompressSlot()
    served: list[int] = []

    def wait_for_slot(rank: int, queued: threading.Event) -> None:
        with decompress_priority(rank, queued), slot:
            with slot:  # reentrant: the shard's file lock is claimed under it, then it decompresses
                served.append(rank)

    with slot:
        threads = []
        for rank in (2, 0, 1):  # arrive out of order while the slot is held
            queued = threading.Event()
            threads.append(threading.Thread(target=wait_for_slot, args=(rank, queued)))
            threads[-1].start()
            assert queued.wait(10)
        time.sleep(0.05)
    for t in threads:
        t.join(10)
    assert served == [0, 1, 2]
