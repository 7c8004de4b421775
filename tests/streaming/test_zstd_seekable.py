"""Seekable zstd shards: frames plus a seek table, read by mosaicml-streaming as one stream, and by
Foundry's reader frame by frame before the shard is decompressed (early_reader.py)."""

from __future__ import annotations

import json
import os
import struct
import threading
import time

import numpy as np
import pytest

import foundry.streaming.cache.shards as shards_module
import foundry.streaming.read.early.reader as early_module
from foundry.plugins.errors import DataError
from foundry.streaming import MDSWriter, StreamingDataset
from foundry.streaming.format import compress_file, decompress, decompress_file, load_index, open_shard
from foundry.streaming.format.framed_reader import FramedMDSReader, is_seekable
from foundry.streaming.format.zstd_seekable import FRAME_RAW_BYTES, FrameReader, read_seek_table

COLUMNS = {"id": "int", "tokens": "ndarray:int32", "text": "str"}


def _sample(i: int) -> dict:
    rng = np.random.default_rng(i)  # incompressible enough that a shard spans several frames
    return {"id": i, "tokens": rng.integers(0, 50_000, 100 + i % 900, dtype=np.int32), "text": f"sample {i} " * (i % 7)}


N = 2922  # three shards of 2 MiB, two frames each


def _write(out, n: int = N, compression: str | None = "zstd", size_limit: int = 2 << 20) -> None:
    with MDSWriter(out=str(out), columns=COLUMNS, compression=compression, size_limit=size_limit) as w:
        for i in range(n):
            w.write(_sample(i))


def _same(a: dict, b: dict) -> bool:
    return a["id"] == b["id"] and a["text"] == b["text"] and np.array_equal(a["tokens"], b["tokens"])


def test_file_round_trips_through_every_reader(tmp_path):
    data = os.urandom(FRAME_RAW_BYTES // 3) * 8 + b"tail"  # 2.7 frames
    (tmp_path / "raw").write_bytes(data)
    compress_file("zstd", tmp_path / "raw", tmp_path / "z")
    packed = (tmp_path / "z").read_bytes()
    table = read_seek_table(packed)
    assert table is not None and table.frames == 3 and table.raw_size == len(data)
    assert decompress("zstd", packed) == data
    decompress_file("zstd", tmp_path / "z", tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == data
    frames = FrameReader(packed, table)
    rng = np.random.default_rng(0)
    for begin in rng.integers(0, len(data), 50).tolist() + [0, FRAME_RAW_BYTES - 1, len(data) - 1]:
        end = min(len(data), begin + int(rng.integers(1, 2 * FRAME_RAW_BYTES)))
        assert frames.read(begin, end) == data[begin:end]


def test_one_frame_file_has_no_table_and_table_must_match_the_file(tmp_path):
    (tmp_path / "small").write_bytes(b"x" * 1000)
    compress_file("zstd", tmp_path / "small", tmp_path / "small.zstd")
    assert read_seek_table((tmp_path / "small.zstd").read_bytes()) is None  # as mosaic writes it
    (tmp_path / "big").write_bytes(os.urandom(FRAME_RAW_BYTES + 10))
    compress_file("zstd", tmp_path / "big", tmp_path / "big.zstd")
    packed = (tmp_path / "big.zstd").read_bytes()
    assert read_seek_table(packed) is not None
    assert read_seek_table(b"junk" + packed) is None  # sizes no longer add up: read as one stream
    bad_magic = packed[:-4] + struct.pack("<I", 0x12345678)
    assert read_seek_table(bad_magic) is None


def test_mosaic_reads_seekable_shards_sample_for_sample(mosaic_peer, tmp_path):
    _write(tmp_path / "ds")
    index = json.loads((tmp_path / "ds" / "index.json").read_text())
    zips = [tmp_path / "ds" / s["zip_data"]["basename"] for s in index["shards"]]
    assert all(is_seekable(z) for z in zips)  # the interesting case: several frames per shard
    script = """
import json, sys
from streaming import StreamingDataset
ds = StreamingDataset(local=sys.argv[1], batch_size=1, shuffle=False)
print(json.dumps([[int(ds[i]["id"]), ds[i]["tokens"].tolist(), ds[i]["text"]] for i in range(len(ds))]))
"""
    seen = json.loads(mosaic_peer(script, str(tmp_path / "ds")))
    assert len(seen) == N
    for i, (sid, tokens, text) in enumerate(seen):
        assert _same({"id": sid, "tokens": np.asarray(tokens, np.int32), "text": text}, _sample(i))


def test_framed_reader_matches_the_decompressed_shard(tmp_path):
    _write(tmp_path / "ds", n=800)
    info = load_index((tmp_path / "ds" / "index.json").read_bytes())[0]
    framed = FramedMDSReader(info, tmp_path / "ds" / info.remote_basename)
    decompress_file("zstd", tmp_path / "ds" / info.remote_basename, tmp_path / "raw")
    whole = open_shard(info, tmp_path / "raw")
    assert framed.frames >= 2
    for i in np.random.default_rng(1).permutation(info.samples).tolist():
        assert _same(framed.get_sample(i), whole.get_sample(i))
    framed.close()
    whole.close()


def test_truncated_frames_are_a_data_error(tmp_path):
    _write(tmp_path / "ds", n=800)
    info = load_index((tmp_path / "ds" / "index.json").read_bytes())[0]
    packed = bytearray((tmp_path / "ds" / info.remote_basename).read_bytes())
    table = read_seek_table(bytes(packed))
    packed[int(table.packed[0]) + 20: int(table.packed[0]) + 200] = b"\0" * 180  # frame 0: the header
    (tmp_path / "bad.zstd").write_bytes(bytes(packed))
    with pytest.raises(DataError, match="does not decompress"):
        FramedMDSReader(info, tmp_path / "bad.zstd").get_sample(0)


@pytest.fixture
def slow_decompression(monkeypatch):
    """Hold every whole-shard decompression until released, and record the early readers made."""
    release = threading.Event()
    made: list = []
    real_decompress = shards_module.ShardCache._decompress_into

    def held(self, *args, **kwargs):
        release.wait(30)
        return real_decompress(self, *args, **kwargs)

    class Recorded(early_module.EarlyShardReader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(shards_module.ShardCache, "_decompress_into", held)
    monkeypatch.setattr("foundry.streaming.read.early.opener.EarlyShardReader", Recorded)
    return release, made


def test_first_samples_come_before_the_shard_is_decompressed(tmp_path, slow_decompression):
    release, made = slow_decompression
    _write(tmp_path / "ds")
    _write(tmp_path / "plain", compression=None)
    expected = list(StreamingDataset(local=str(tmp_path / "plain"), shuffle=True, shuffle_seed=5, batch_size=8))
    it = iter(StreamingDataset(local=str(tmp_path / "ds"), shuffle=True, shuffle_seed=5, batch_size=8))
    got = [next(it) for _ in range(20)]  # every whole decompression is still held
    assert len(made) == 3 and sum(r.early_samples for r in made) == 20 and not any(r.settled for r in made)
    release.set()
    got += list(it)
    assert len(got) == len(expected) == N
    assert all(_same(a, b) for a, b in zip(got, expected))  # same samples, same order
    index = json.loads((tmp_path / "ds" / "index.json").read_text())
    assert all((tmp_path / "ds" / s["raw_data"]["basename"]).exists() for s in index["shards"])  # decompressed too


def test_early_reading_is_bounded_then_waits_for_the_whole_shard(tmp_path, slow_decompression, monkeypatch):
    release, made = slow_decompression
    _write(tmp_path / "ds")
    monkeypatch.setattr(early_module, "EARLY_FRAMES", 0)  # no frame past the header's: wait at once
    it = iter(StreamingDataset(local=str(tmp_path / "ds"), shuffle=False, batch_size=8))
    timer = threading.Timer(1.0, release.set)
    timer.start()
    t0 = time.monotonic()
    samples = list(it)
    assert time.monotonic() - t0 >= 0.9  # the first sample waited for the held whole shard
    timer.join()
    assert [s["id"] for s in samples] == list(range(N))
    assert made and all(r.early_samples == 0 and r.settled for r in made)


def test_mosaic_written_single_frame_shards_are_read_whole(tmp_path, monkeypatch):
    """A shard of one zstd frame (what mosaicml-streaming writes) has no table: no early reader."""
    made: list = []
    monkeypatch.setattr("foundry.streaming.read.early.opener.EarlyShardReader",
                        lambda *a, **k: made.append(1))
    _write(tmp_path / "ds", n=300, size_limit=1 << 19)  # every shard under one frame
    assert [s["id"] for s in StreamingDataset(local=str(tmp_path / "ds"), batch_size=1)] == list(range(300))
    assert not made


def test_a_waiting_reader_lends_its_core_so_two_shards_decompress_at_once_and_never_more(tmp_path, monkeypatch):
    _write(tmp_path / "ds")
    real_decompress = shards_module.ShardCache._decompress_into
    guard, running, most = threading.Lock(), [0], [0]

    def counted(self, *args, **kwargs):
        with guard:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.3)  # the reader waits meanwhile
            return real_decompress(self, *args, **kwargs)
        finally:
            with guard:
                running[0] -= 1

    monkeypatch.setattr(shards_module.ShardCache, "_decompress_into", counted)
    monkeypatch.setattr(early_module, "EARLY_FRAMES", 1)  # the offsets' frame only: the reader waits at once
    ds = StreamingDataset(local=str(tmp_path / "ds"), shuffle=True, shuffle_seed=5, batch_size=8)
    assert sorted(s["id"] for s in ds) == list(range(N))
    assert most[0] == 2  # one prefetch thread's, and one on the core the waiting reader lent
