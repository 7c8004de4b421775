"""StreamingDataLoader's workers make whole batches (streaming/loader/worker_batches.py): the batches are
exactly torch's per-sample ones, whatever the columns, the collate, drop_last or the epoch, and
fixed-size numeric columns are read straight into the batch."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset
from foundry.streaming.loader import ring as batch_ring
from foundry.streaming.loader import worker_batches as batch_reads
from foundry.streaming.loader.collate import collate_read_only as _collate_read_only
from foundry.streaming.read import rows as read_rows

FIXED = {"tokens": "ndarray:int32:16", "grid": "ndarray:float32:2,3", "id": "int", "w": "float32", "u": "uint8",
         "h": "int16"}


def _write(out, columns, n, **kw):
    rng = np.random.default_rng(0)
    with MDSWriter(out=str(out), columns=columns, size_limit=4096, **kw) as writer:
        for i in range(n):
            writer.write({"tokens": rng.integers(0, 1 << 30, 16, dtype=np.int32),
                          "grid": rng.random((2, 3), dtype=np.float32), "id": i, "w": np.float32(i / 3),
                          "u": np.uint8(i % 256), "h": np.int16(-i), "text": "t" * (i % 9), "blob": b"x" * (i % 5)})
    return str(out)


def _same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def _torch_batches(src, batch, epochs=1, **kw):
    """What torch's own DataLoader makes, one sample at a time, with the same collate."""
    ds = StreamingDataset(local=src, shuffle=True, batch_size=batch)
    loader = DataLoader(ds, batch_size=batch, num_workers=2, collate_fn=kw.pop("collate_fn", _collate_read_only), **kw)
    epochs_made, pids = [], []
    for _ in range(epochs):
        batches = iter(loader)
        epochs_made.append(list(batches))
        pids += [w.pid for w in batches._workers]
    batch_ring.forget_rings(pids)  # what StreamingDataLoader does when its workers are gone
    return epochs_made


@pytest.fixture
def count_row_reads(monkeypatch, tmp_path):
    """Batches read straight into the ring by (forked) workers, counted through a file."""
    log = tmp_path / "row-reads"
    real = batch_reads.read_rows

    def counted(*args):
        out = real(*args)
        if out is not None:
            with open(log, "a") as f:
                f.write("x")
        return out

    monkeypatch.setattr(batch_reads, "read_rows", counted)
    return lambda: len(log.read_text()) if log.exists() else 0


@pytest.mark.parametrize("batch,drop_last,persistent", [(8, False, False), (7, True, True), (7, False, True)])
def test_fixed_columns_are_read_into_the_batch_and_match_torch(tmp_path, count_row_reads, batch, drop_last, persistent):
    src = _write(tmp_path / "data", FIXED, 203)
    ds = StreamingDataset(local=src, shuffle=True, batch_size=batch)
    loader = StreamingDataLoader(ds, batch_size=batch, num_workers=2, drop_last=drop_last, persistent_workers=persistent,
                                 multiprocessing_context="fork")
    assert (loader.batch_size, loader.drop_last) == (batch, drop_last)
    want = _torch_batches(src, batch, epochs=2, drop_last=drop_last, persistent_workers=persistent)
    got = [list(loader), list(loader)]
    assert len(loader) == len(want[0]) or not drop_last  # torch's estimate, as for any IterableDataset
    for epoch_got, epoch_want in zip(got, want):
        assert len(epoch_got) == len(epoch_want)
        for a, b in zip(epoch_got, epoch_want):
            _same(a, b)
    assert sorted(int(i) for b in got[0] for i in b["id"]) == sorted(int(i) for b in want[0] for i in b["id"])
    assert count_row_reads() == len(got[0]) + len(got[1])
    assert loader.num_samples_yielded == sum(len(b["id"]) for b in got[1])


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")  # torch's own collate, below
def test_other_columns_and_collates_get_the_samples_as_torch_would(tmp_path, count_row_reads):
    from torch.utils.data import default_collate

    src = _write(tmp_path / "data", {**FIXED, "text": "str", "blob": "bytes"}, 120, compression="zstd")
    got = list(StreamingDataLoader(StreamingDataset(local=src, shuffle=True, batch_size=8), batch_size=8,
                                   num_workers=2, multiprocessing_context="fork"))
    # str, bytes and number columns cross in the ring (batch_ring.place): torch's own collate and
    # hand-over make the same batches
    for want in (_torch_batches(src, 8)[0], _torch_batches(src, 8, collate_fn=default_collate)[0]):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)

    def ids_only(samples):
        return [s["id"] for s in samples]

    mine = StreamingDataLoader(StreamingDataset(local=src, shuffle=True, batch_size=8), batch_size=8, num_workers=2,
                               collate_fn=ids_only, multiprocessing_context="fork")
    assert list(mine) == _torch_batches(src, 8, collate_fn=ids_only)[0]
    assert count_row_reads() == 0


@pytest.mark.subprocess
def test_spawned_workers_make_the_same_batches(tmp_path):
    src = _write(tmp_path / "data", FIXED, 64)
    ds = StreamingDataset(local=src, shuffle=True, batch_size=8)
    got = list(StreamingDataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context="spawn"))
    for a, b in zip(got, _torch_batches(src, 8)[0], strict=True):
        _same(a, b)


def test_resume_mid_epoch_continues_with_the_next_batch(tmp_path):
    src = _write(tmp_path / "data", FIXED, 150)

    def loader():
        return StreamingDataLoader(StreamingDataset(local=src, shuffle=True, batch_size=6), batch_size=6, num_workers=2)

    whole = [b["id"].tolist() for b in loader()]
    first = loader()
    seen = []
    for batch in first:
        seen.append(batch["id"].tolist())
        if len(seen) == 7:
            state = first.state_dict()
            break
    rest = loader()
    rest.load_state_dict(state)
    assert seen + [b["id"].tolist() for b in rest] == whole


def test_a_shard_cut_short_under_an_open_reader_is_a_data_error(tmp_path):
    import os

    from foundry.plugins.errors import DataError
    from foundry.streaming.format import open_shard
    from foundry.streaming.format.index import load_index

    src = _write(tmp_path / "data", FIXED, 10)
    info = load_index(open(f"{src}/index.json").read())[0]
    path = f"{src}/{info.raw_basename}"
    reader = open_shard(info, path, mapped=False)
    columns = read_rows.fixed_columns(reader)  # opens the file
    rows = [memoryview(np.zeros(c.nbytes, np.uint8)) for c in columns]
    reader.read_rows_into([len(reader) - 1], [rows])
    os.truncate(path, os.path.getsize(path) - 10)
    with pytest.raises(DataError, match="truncated"):
        reader.read_rows_into([len(reader) - 1], [rows])
    reader.close()


@pytest.mark.filterwarnings("ignore:shuffle_block_size is smaller")  # rank_worker.py's block, small shards
@pytest.mark.subprocess
def test_two_real_ranks_read_rows_into_the_same_global_batches(tmp_path):
    """Two processes joined by torch.distributed (gloo), each a StreamingDataLoader with 2 workers,
    one cache, zstd shards of fixed-size columns: the global order of one process reading alone."""
    import subprocess
    import sys
    from pathlib import Path

    from foundry.streaming.plan import interleave_ranks

    remote = _write(tmp_path / "remote", FIXED, 120, compression="zstd")
    cache, out = tmp_path / "cache", tmp_path / "out"
    script = Path(__file__).with_name("rank_worker.py")
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", remote, str(cache), str(out), "streaming"])
             for r in range(2)]
    assert [p.wait(180) for p in procs] == [0, 0]
    got = interleave_ranks([np.load(f"{out}.{r}.npy") for r in range(2)], 1, 2)
    alone = StreamingDataset(remote=remote, local=str(tmp_path / "alone"), shuffle=True, batch_size=8,
                             shuffle_block_size=30)
    assert got.tolist() == [s["id"] for s in alone]
