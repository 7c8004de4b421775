"""MDSWriter and friends: shard splitting, the 4 GiB guard, streaming to disk, aborts, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from foundry.plugins.errors import ConfigError, DataError
from foundry.streaming.format import decompress_file, load_index, open_shard, shard_files, verify_file
from foundry.streaming.writer import CSVWriter, MDSWriter, parse_size


def _read_all(root):
    out = []
    for info in load_index((root / "index.json").read_bytes()):
        reader = open_shard(info, root / info.raw_basename)
        out += [reader.get_sample(i) for i in range(len(reader))]
    return out


def test_size_limit_splits_like_upstream(tmp_path):
    limit = 2000
    with MDSWriter(out=str(tmp_path), columns={"id": "int", "text": "str"}, size_limit=limit, hashes=["xxh64", "sha1"]) as w:
        for i in range(300):
            w.write({"id": i, "text": "abc" * (i % 20)})
    shards = load_index((tmp_path / "index.json").read_bytes())
    assert len(shards) > 5
    for info in shards:
        assert info.raw_bytes <= limit and info.hashes == ["sha1", "xxh64"]
        assert verify_file(tmp_path / info.raw_basename, info.raw_hashes)
        assert os.path.getsize(tmp_path / info.raw_basename) == info.raw_bytes
    assert [s["id"] for s in _read_all(tmp_path)] == list(range(300))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_sample_bigger_than_the_limit_gets_its_own_shard(tmp_path):
    with MDSWriter(out=str(tmp_path), columns={"b": "bytes"}, size_limit=500) as w:
        for size in (10, 2000, 10):
            w.write({"b": b"x" * size})
    assert [s.samples for s in load_index((tmp_path / "index.json").read_bytes())] == [1, 1, 1]


def test_size_limits_at_or_over_4_gib_are_refused(tmp_path):
    for limit in (1 << 32, "4gb", 5 << 30):
        with pytest.raises(DataError, match="4 GiB"):
            MDSWriter(out=str(tmp_path / "x"), columns={"a": "int"}, size_limit=limit)
    MDSWriter(out=str(tmp_path / "ok"), columns={"a": "int"}, size_limit=(1 << 32) - 1).abort()


def test_an_unlimited_shard_stops_before_4_gib(tmp_path, monkeypatch):
    monkeypatch.setattr(shard_files, "MAX_SHARD_BYTES", 10_000)  # the same guard, at a size a test can reach
    w = MDSWriter(out=str(tmp_path), columns={"b": "bytes"}, size_limit=None)
    with pytest.raises(DataError, match="4 GiB") as err:
        for _ in range(100):
            w.write({"b": b"x" * 1000})
    assert "size_limit" in err.value.hint
    w.abort()
    assert not (tmp_path / "index.json").exists()


def test_offsets_table_guard_is_arithmetic():
    with pytest.raises(DataError):
        shard_files.offsets_table([1 << 31, 1 << 31], 0, "shard")
    assert shard_files.offsets_table([(1 << 32) - 101], 100, "shard")[-1] == (1 << 32) - 1


def test_samples_stream_to_disk_while_writing(tmp_path):
    w = MDSWriter(out=str(tmp_path), columns={"b": "bytes"}, size_limit=None)
    for _ in range(100):
        w.write({"b": b"y" * 100_000})
    on_disk = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert on_disk >= 9_000_000  # the body is on disk, not in memory
    w.finish()
    assert len(_read_all(tmp_path)) == 100


def test_an_exception_inside_the_block_writes_no_index(tmp_path):
    with pytest.raises(RuntimeError):
        with MDSWriter(out=str(tmp_path), columns={"a": "int"}, size_limit=200) as w:
            for i in range(100):
                w.write({"a": i})
            raise RuntimeError("boom")
    assert not (tmp_path / "index.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


@pytest.mark.subprocess
def test_sigkill_mid_write_leaves_no_index(tmp_path):
    script = textwrap.dedent(f"""
        from foundry.streaming.writer import MDSWriter
        with MDSWriter(out={str(tmp_path)!r}, columns={{"b": "bytes"}}, size_limit=10_000) as w:
            i = 0
            while True:
                w.write({{"b": b"z" * 1000}})
                i += 1
                if i == 200:
                    print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert any(p.name.startswith("shard.") for p in tmp_path.iterdir())
    assert not (tmp_path / "index.json").exists()


def test_bad_samples_are_clear_errors(tmp_path):
    with MDSWriter(out=str(tmp_path / "a"), columns={"v": "ndarray:int32:4", "s": "str"}) as w:
        with pytest.raises(DataError, match="16 bytes"):
            w.write({"v": b"abc", "s": "x"})
        with pytest.raises(DataError, match="no column 's'"):
            w.write({"v": np.zeros(4, np.int32)})
        w.write({"v": np.zeros(4, np.int32), "s": "ok"})
    with CSVWriter(out=str(tmp_path / "c"), columns={"t": "str"}) as w:
        with pytest.raises(DataError, match="separator"):
            w.write({"t": "a,b"})
        w.write({"t": "fine"})


def test_bad_configuration_is_a_config_error(tmp_path):
    for kwargs in ({"compression": "lz4"}, {"hashes": ["crc99"]}, {"columns": {"a": "nope"}},
                   {"columns": {}}, {"unknown_arg": 1}, {"size_limit": "lots"}):
        args = {"out": str(tmp_path / "x"), "columns": {"a": "int"}, **kwargs}
        with pytest.raises(ConfigError):
            MDSWriter(**args)


def test_existing_output_is_refused_unless_exist_ok(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(DataError, match="not empty"):
        MDSWriter(out=str(tmp_path), columns={"a": "int"})
    with MDSWriter(out=str(tmp_path), columns={"a": "int"}, exist_ok=True) as w:
        w.write({"a": 1})
    assert not (tmp_path / "old.txt").exists() and (tmp_path / "index.json").exists()


def test_index_json_matches_the_shard_files(tmp_path):
    with MDSWriter(out=str(tmp_path), columns={"a": "int"}, compression="zstd", hashes=["sha1"], size_limit=300) as w:
        for i in range(100):
            w.write({"a": i})
    index = json.loads((tmp_path / "index.json").read_text())
    for entry in index["shards"]:
        assert os.path.getsize(tmp_path / entry["zip_data"]["basename"]) == entry["zip_data"]["bytes"]
        assert entry["zip_data"]["basename"] == entry["raw_data"]["basename"] + ".zstd"
        assert entry["compression"] == "zstd" and entry["size_limit"] == 300
    # only the compressed files, as mosaicml-streaming writes them (the raw file lives in a reader's cache)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["index.json"] + [e["zip_data"]["basename"] for e in index["shards"]])
    for entry in index["shards"]:
        decompress_file("zstd", tmp_path / entry["zip_data"]["basename"], tmp_path / entry["raw_data"]["basename"])
    assert [s["a"] for s in _read_all(tmp_path)] == list(range(100))


def test_parse_size():
    assert parse_size("64mb") == 1 << 26 and parse_size("100kb") == 102400 and parse_size("512b") == 512
    assert parse_size(None) is None and parse_size(0) is None and parse_size("1024") == 1024
