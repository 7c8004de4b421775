"""Batches cross from DataLoader workers through each worker's ring of reused shared-memory slots
(streaming/loader/ring.py): the batch a loop holds is never overwritten, a loop that keeps every batch
still gets every sample right, and nothing is left behind."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset
from foundry.streaming.loader import ring as batch_ring

ROWS = 96


@pytest.fixture
def data(tmp_path):
    out = tmp_path / "data"
    with MDSWriter(out=str(out), columns={"x": "ndarray:int32:64", "y": "ndarray:float32:2,3", "s": "str"}) as w:
        for i in range(ROWS):
            w.write({"x": np.full(64, i, np.int32), "y": np.full((2, 3), i / 2, np.float32), "s": f"t{i}"})
    return str(out)


def _in_a_ring(tensor: torch.Tensor) -> bool:
    return any(s.data_ptr() <= tensor.data_ptr() < s.data_ptr() + s.nbytes() for s, _ in batch_ring._RINGS.values())


def _nothing_new_in_dev_shm(before: set[str], patience_s: float = 10.0) -> None:
    """No file left in /dev/shm beyond `before`. multiprocessing's named semaphores (sem.mp-*, the
    spawn context's queue locks) go once their queue's feeder thread has ended, which can be a
    moment after the loader is gone; anything still there after `patience_s` is a leak."""
    deadline = time.monotonic() + patience_s
    while (left := set(os.listdir("/dev/shm")) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left - _held_outside_this_test(left)


def _held_outside_this_test(names: set[str]) -> set[str]:
    """Those of `names` mapped by a live process outside this test's process tree: another
    pytest-xdist worker's loader. A leak is a new segment that this process or one of its children
    still holds, or that nobody holds."""
    if not names:
        return set()
    ours = {os.getpid(), *(child.pid for child in psutil.Process().children(recursive=True))}
    held = set()
    for pid in psutil.pids():
        if pid in ours:
            continue
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()   # each process read once, for every name
        except OSError:   # gone meanwhile, or not ours to read
            continue
        held.update(name for name in names if f"/dev/shm/{name}" in maps)
    return held


def _check(batch) -> list[int]:
    ids = batch["x"][:, 0].tolist()
    assert torch.equal(batch["x"], torch.tensor(ids, dtype=torch.int32)[:, None].expand(-1, 64))
    assert torch.equal(batch["y"], (torch.tensor(ids, dtype=torch.float32) / 2)[:, None, None].expand(-1, 2, 3))
    assert batch["s"] == [f"t{i}" for i in ids]
    return ids


def test_batches_come_through_the_ring_and_a_held_batch_is_never_overwritten(data):
    dataset = StreamingDataset(local=data, shuffle=True, batch_size=4)
    loop = StreamingDataLoader(dataset, batch_size=4, num_workers=2)
    seen = []
    for batch in loop:  # a loop that keeps nothing: every slot comes back, no batch goes the usual way
        assert _in_a_ring(batch["x"]) and _in_a_ring(batch["y"])
        seen += _check(batch)
    assert sorted(seen) == list(range(ROWS))

    seen, held = [], []
    for k, batch in enumerate(loop):
        if k in (1, 2, 7):  # keep a view of one column only: its slot must stay out of reuse
            assert _in_a_ring(batch["x"])
            held.append((batch["x"][1:3], batch["x"][1:3].clone()))
        seen += _check(batch)
    assert sorted(seen) == list(range(ROWS))
    for view, copy in held:
        assert torch.equal(view, copy)


def test_a_loop_that_keeps_every_batch_gets_every_sample(data):
    """More batches alive than the rings have slots: the rest go the usual way, nothing waits."""
    loader = StreamingDataLoader(StreamingDataset(local=data, batch_size=2), batch_size=2, num_workers=2)
    batches, ringed = [], 0
    for batch in loader:
        batches.append(batch)
        ringed += _in_a_ring(batch["x"])
    assert len(batches) == ROWS // 2 > 2 * batch_ring.SLOTS
    assert sorted(i for b in batches for i in _check(b)) == list(range(ROWS))
    assert ringed == 2 * batch_ring.SLOTS


@pytest.mark.parametrize("context", [pytest.param("spawn", marks=pytest.mark.subprocess), "fork"])
def test_persistent_workers_across_epochs_and_start_methods(data, context):
    shm_before = set(os.listdir("/dev/shm"))
    dataset = StreamingDataset(local=data, shuffle=True, batch_size=8)
    loader = StreamingDataLoader(dataset, batch_size=8, num_workers=2, persistent_workers=True,
                                 multiprocessing_context=context)
    for _epoch in range(2):
        assert sorted(i for b in loader for i in _check(b)) == list(range(ROWS))
    assert batch_ring._RINGS
    del loader
    gc.collect()
    assert not batch_ring._RINGS  # the workers are gone: their segments are unmapped
    _nothing_new_in_dev_shm(shm_before)


def test_a_batch_bigger_than_the_ring_gets_a_bigger_ring_and_a_huge_one_goes_the_usual_way(monkeypatch):
    monkeypatch.setattr(batch_ring, "_worker_ring", None)
    small = batch_ring.place({"a": [np.zeros(8, np.int64)] * 2})
    first = batch_ring._worker_ring
    big = batch_ring.place({"a": [np.arange(1000, dtype=np.int64)] * 3})
    assert small is not None and big is not None and batch_ring._worker_ring is not first
    assert batch_ring._worker_ring.slot_bytes >= 3 * 8000
    view = batch_ring._worker_ring.bytes
    offset = batch_ring._HEADER + big["a"].ref.slot * batch_ring._worker_ring.slot_bytes
    assert np.array_equal(view[offset: offset + 24000].view(np.int64).reshape(3, 1000), np.tile(np.arange(1000), (3, 1)))
    monkeypatch.setattr(batch_ring, "MAX_RING_BYTES", 1 << 20)
    assert batch_ring.place({"a": [np.zeros(1 << 18, np.uint8)] * 2}) is None
    for _ in range(batch_ring.SLOTS - 1):  # the slots run out: the caller goes the usual way
        assert batch_ring.place({"a": [np.zeros(8, np.int64)] * 2}) is not None
    assert batch_ring.place({"a": [np.zeros(8, np.int64)] * 2}) is None


@pytest.mark.slow
def test_epochs_leave_nothing_in_dev_shm_under_the_file_system_sharing_strategy(data):
    """There a segment is a file in /dev/shm, removed once no process holds it: each worker lets go
    of its ring as it exits, and the main process when the loader's workers are gone."""
    import torch.multiprocessing as tmp

    before_strategy = tmp.get_sharing_strategy()
    tmp.set_sharing_strategy("file_system")
    try:
        shm_before = set(os.listdir("/dev/shm"))
        loader = StreamingDataLoader(StreamingDataset(local=data, batch_size=4), batch_size=4, num_workers=2)
        for _epoch in range(3):
            ringed = 0
            for batch in loader:
                ringed += _in_a_ring(batch["x"])
            assert ringed == ROWS // 4
            del batch
            gc.collect()
            _nothing_new_in_dev_shm(shm_before)
    finally:
        tmp.set_sharing_strategy(before_strategy)


def test_number_bytes_and_str_columns_cross_in_the_ring_as_default_collate_makes_them(monkeypatch):
    """In a worker, numbers (Python's and numpy's), bytes and str go into a slot; what the main
    process unpickles is exactly default_collate's batch. Columns that default_collate would treat
    otherwise (mixed types, a str pickle must carry) keep the usual way."""
    import pickle

    from torch.utils.data import default_collate
    from torch.utils.data._utils import worker

    from foundry.streaming.loader.collate import collate_read_only as _collate_read_only

    monkeypatch.setattr(batch_ring, "_worker_ring", None)
    monkeypatch.setattr(worker, "_worker_info", object())  # get_worker_info(): in a worker
    batch = [{"i": i * 7 - 3, "f": i / 3, "b": i % 2 == 0, "f32": np.float32(i / 7), "i16": np.int16(-i),
              "bytes": b"\x00\xff" * i, "text": "z\u00e9\u4e2d" * (i % 3), "mixed": i if i % 2 else i / 2,
              "lone": "\ud800" if i == 2 else "x", "x": np.full(3, i, np.int32)} for i in range(5)]
    made = _collate_read_only(batch)
    for key in ("i", "f", "b", "f32", "i16", "x"):
        assert isinstance(made[key], batch_ring._RingColumn), key
    for key in ("bytes", "text"):
        assert isinstance(made[key], batch_ring._RingValues), key
    assert isinstance(made["mixed"], torch.Tensor) and made["lone"][2] == "\ud800"  # not in the ring
    # this process plays the main process too: it has the worker's segment already, so the batch
    # pickles as slot numbers and offsets, as every batch after a worker's first does
    ring = batch_ring._worker_ring
    ring.announced = True
    batch_ring._RINGS[ring.key] = (ring.storage, batch_ring._bytes_of(ring.storage, batch_ring.SLOTS))
    got = pickle.loads(pickle.dumps(made))
    want = default_collate(batch)
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), key
        else:
            assert got[key] == value and [type(v) for v in got[key]] == [type(v) for v in value], key
    del got, made
    batch_ring.forget_rings([os.getpid()])
