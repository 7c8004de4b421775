"""RequestGate: a bounded number of requests in flight, served by (file ticket, offset); and S3 and
GCS downloads through it (never more than `concurrency` requests, the first-asked file first)."""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
import time

import pytest

from foundry.backends.storage.request_gate import RequestGate
from foundry.plugins.manager import open_store

MiB = 1 << 20


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


def queued(gate: RequestGate) -> int:
    with gate._cond:
        return len(gate._waiting)


def test_waiters_are_served_by_ticket_then_offset_not_by_arrival():
    gate = RequestGate(1)
    granted: list[tuple[int, int]] = []
    with gate.turn() as first, gate.turn() as second:
        hold = gate.slot(first, 0)
        hold.__enter__()
        threads = []
        for ticket, offset in [(second, 0), (first, 20), (first, 10)]:  # arrive in the wrong order
            def take(t=ticket, o=offset):
                with gate.slot(t, o):
                    granted.append((t, o))
            threads.append(threading.Thread(target=take))
            threads[-1].start()
            wait_until(lambda n=len(threads): queued(gate) == n, "request in line")
        hold.__exit__(None, None, None)
        for t in threads:
            t.join(10)
    assert granted == [(first, 10), (first, 20), (second, 0)]
    assert gate.in_flight() == 0


def test_a_file_still_on_its_head_request_keeps_later_files_waiting_until_it_asks_or_leaves():
    gate = RequestGate(4)
    got = threading.Event()
    with gate.turn() as early:
        with gate.turn() as late:
            def take():
                with gate.slot(late):
                    got.set()
            t = threading.Thread(target=take)
            t.start()
            wait_until(lambda: queued(gate) == 1, "late request in line")
            assert not got.is_set() and gate.in_flight() == 0  # free slots, but the earlier file comes first
            with gate.slot(early):  # the earlier file asks: the later one may follow
                t.join(10)
            assert got.is_set()
    # leaving the turn also lets later files go (a HEAD that failed never asks for a slot)
    got.clear()
    failed = gate.turn()
    failed.__enter__()
    with gate.turn() as late:
        def take_late():
            with gate.slot(late):
                got.set()
        t = threading.Thread(target=take_late)
        t.start()
        wait_until(lambda: queued(gate) == 1, "late request in line")
        assert not got.is_set()
        failed.__exit__(None, None, None)
        t.join(10)
    assert got.is_set()


def test_parts_lined_up_keep_their_place_and_leaving_the_turn_clears_them():
    gate = RequestGate(1)
    with gate.turn() as ticket:
        gate.line_up(ticket, [0, 10, 20])
        assert queued(gate) == 3
        with gate.slot(ticket, 0):
            pass
        assert queued(gate) == 2  # parts 10 and 20 were never fetched (the download failed)
    assert queued(gate) == 0
    with gate.turn() as other, gate.slot(other):
        assert gate.in_flight() == 1


def test_a_gate_sent_to_another_process_is_a_fresh_one():
    gate = RequestGate(3)
    with gate.turn() as t, gate.slot(t):
        copy = pickle.loads(pickle.dumps(gate))
    assert copy.slots == 3 and copy.in_flight() == 0


@pytest.mark.integration
def test_s3_downloads_keep_to_concurrency_and_the_first_asked_file_first(s3_bucket, tmp_path):
    options = {"part_size": 5 * MiB, "multipart_threshold": 5 * MiB, "concurrency": 2}
    store = open_store(s3_bucket.url, options).unwrapped
    payloads = {f"f{i}": os.urandom(3 * 5 * MiB) for i in range(3)}  # three parts each
    for key, data in payloads.items():
        s3_bucket.client().put_object(Bucket=s3_bucket.name, Key=key, Body=data)
    lock, live, peak, starts = threading.Lock(), [0], [0], []
    fetch = store._range_exact

    def counted(key, start, end, etag=None):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
            starts.append(key)
        try:
            return fetch(key, start, end, etag)
        finally:
            with lock:
                live[0] -= 1

    store._range_exact = counted
    taken, real_turn = [], store.download_gate.turn

    @contextlib.contextmanager
    def turn():
        with real_turn() as ticket:
            taken.append(ticket)
            yield ticket

    store.download_gate.turn = turn
    threads = []
    for key in payloads:  # asked for in order, each a moment after the one before
        threads.append(threading.Thread(target=store.get_file, args=(key, tmp_path / key)))
        threads[-1].start()
        wait_until(lambda n=len(threads): len(taken) >= n, "ticket taken")
    for t in threads:
        t.join(60)
    assert {k: (tmp_path / k).read_bytes() == v for k, v in payloads.items()} == dict.fromkeys(payloads, True)
    assert peak[0] <= 2
    assert starts == ["f0"] * 3 + ["f1"] * 3 + ["f2"] * 3
