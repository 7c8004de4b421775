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


def _holder(slot: DecompressSlot, rank: int, entered: threading.Event, leave: threading.Event) -> threading.Thread:
    def hold() -> None:
        with decompress_priority(rank), slot:
            entered.set()
            leave.wait(60)  # longer than any wait below: only the slot lets another in

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def test_a_blocked_reader_lends_its_core_to_the_next_decompression():
    slot = DecompressSlot()
    slot.lend_reader_core = True
    first, second, leave = threading.Event(), threading.Event(), threading.Event()
    threads = [_holder(slot, 0, first, leave)]
    assert first.wait(10)
    threads.append(_holder(slot, 1, second, leave))
    assert not second.wait(0.2)  # one at a time while the reader reads
    with slot.reader_blocked():  # the reader waits for shard 0
        assert second.wait(5)
    leave.set()
    for t in threads:
        t.join(10)


def test_a_reader_that_decompresses_itself_does_not_wait_for_a_prefetch_thread():
    slot = DecompressSlot()
    slot.lend_reader_core = True
    held, leave = threading.Event(), threading.Event()
    thread = _holder(slot, 0, held, leave)
    assert held.wait(10)
    got_in = threading.Event()
    reader = threading.Thread(target=lambda: (slot.__enter__(), got_in.set(), slot.__exit__()), daemon=True)
    reader.start()  # no decompress_priority: the reader's own thread
    assert got_in.wait(5)
    leave.set()
    for t in (thread, reader):
        t.join(10)


def test_nothing_is_lent_by_a_process_that_is_not_the_node_only_reader_nor_by_prefetch_threads():
    slot = DecompressSlot()  # lend_reader_core is off until the dataset says this process is alone
    first, second, leave = threading.Event(), threading.Event(), threading.Event()
    threads = [_holder(slot, 0, first, leave)]
    assert first.wait(10)
    threads.append(_holder(slot, 1, second, leave))
    with slot.reader_blocked():
        assert not second.wait(0.2)
    slot.lend_reader_core = True
    with decompress_priority(5), slot.reader_blocked():  # a prefetch thread waiting lends nothing
        assert not second.wait(0.2)
    leave.set()
    assert second.wait(10)
    for t in threads:
        t.join(10)


def test_while_the_reader_decompresses_itself_one_prefetch_thread_runs_beside_it_and_no_second():
    slot = DecompressSlot()
    slot.lend_reader_core = True
    first, second, leave = threading.Event(), threading.Event(), threading.Event()
    with slot:  # the reader's own thread makes a shard
        threads = [_holder(slot, 0, first, leave)]
        assert first.wait(5)  # on the core the reader is not reading with
        threads.append(_holder(slot, 1, second, leave))
        assert not second.wait(0.2)  # two at once, never three
    assert not second.wait(0.2)  # the reader is back to reading: still one prefetch thread
    leave.set()
    assert second.wait(10)
    for t in threads:
        t.join(10)
