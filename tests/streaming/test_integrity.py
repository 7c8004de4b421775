"""Integrity by default (issue 15.7): MDSWriter records a fast hash, a flipped bit is refused
wherever a shard enters the loader (downloaded, or already on disk) and `dataset verify` names it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading

import pytest

from foundry.app.cli.main import main
from foundry.plugins.errors import DataError
from foundry.streaming import MDSWriter, StreamingDataset
from foundry.streaming.format import hashing, load_index

N = 200


def _write(out, compression=None):
    with MDSWriter(out=str(out), columns={"id": "int", "text": "str"}, compression=compression, size_limit=2000) as w:
        for i in range(N):
            w.write({"id": i, "text": f"sample {i} " * 5})
    return load_index((out / "index.json").read_bytes())


def _flip_last_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # one bit, in the last sample's payload: the header stays sound
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_the_writer_records_xxh3_64_by_default(tmp_path, compression):
    for info in _write(tmp_path / "ds", compression):
        assert info.hashes == ["xxh3_64"] and set(info.raw_hashes) == {"xxh3_64"}
        assert compression is None or set(info.zip_hashes) == {"xxh3_64"}
    # opting out, as mosaic's default
    with MDSWriter(out=str(tmp_path / "plain"), columns={"a": "int"}, hashes=[]) as w:
        w.write({"a": 1})
    assert load_index((tmp_path / "plain" / "index.json").read_bytes())[0].hashes == []


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_flipped_bit_in_the_remote_is_refused_on_download(tmp_path, compression):
    shards = _write(tmp_path / "remote", compression)
    _flip_last_byte(tmp_path / "remote" / shards[1].remote_basename)
    ds = StreamingDataset(remote=str(tmp_path / "remote"), local=str(tmp_path / "cache"), batch_size=4)
    assert [ds[i]["id"] for i in range(shards[0].samples)] == list(range(shards[0].samples))
    with pytest.raises(DataError, match=f"shard {shards[1].remote_basename} .* corrupt"):
        list(ds)
    assert not (tmp_path / "cache" / shards[1].raw_basename).exists()  # never made visible


def test_a_flipped_bit_on_disk_is_refused_when_read(tmp_path):
    shards = _write(tmp_path / "ds")
    bad = tmp_path / "ds" / shards[2].raw_basename
    _flip_last_byte(bad)
    ds = StreamingDataset(local=str(tmp_path / "ds"), batch_size=4)
    with pytest.raises(DataError, match=f"shard {shards[2].raw_basename} of .* is corrupt"):
        list(ds)
    with pytest.raises(DataError, match="corrupt"):
        ds[shards[0].samples + shards[1].samples]  # the first sample of that shard
    # opting out reads the bytes as they are, as mosaic does
    assert len(list(StreamingDataset(local=str(tmp_path / "ds"), batch_size=4, validate_hash=False))) == N


def test_a_checked_file_is_checked_again_once_rewritten(tmp_path):
    shards = _write(tmp_path / "ds")
    assert [s["id"] for s in StreamingDataset(local=str(tmp_path / "ds"), batch_size=4)] == list(range(N))
    stamps = tmp_path / "ds" / ".foundry" / "verified"
    assert sorted(p.name for p in stamps.iterdir()) == sorted(s.raw_basename + ".ok" for s in shards)
    bad = tmp_path / "ds" / shards[0].raw_basename
    _flip_last_byte(bad)
    st = bad.stat()
    os.utime(bad, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(DataError, match="corrupt"):
        StreamingDataset(local=str(tmp_path / "ds"), batch_size=4)[0]


def test_a_checked_file_is_not_hashed_again_while_unchanged(tmp_path, monkeypatch):
    _write(tmp_path / "ds")
    assert len(list(StreamingDataset(local=str(tmp_path / "ds"), batch_size=4))) == N  # checks and stamps
    monkeypatch.setattr(hashing, "hash_open_file", lambda *a, **k: pytest.fail("an unchanged, checked shard was hashed"))
    assert [s["id"] for s in StreamingDataset(local=str(tmp_path / "ds"), batch_size=4)] == list(range(N))


def test_a_shard_decompressed_from_a_checked_file_is_not_hashed_again_by_the_others(tmp_path, monkeypatch):
    """The process that decompresses a checked .zstd stamps the result: the node's other processes
    (DataLoader workers, ranks) take the shard as checked instead of hashing it side by side; a file
    changed after that is checked again."""
    infos = _write(tmp_path / "ds", "zstd")
    assert sorted(s["id"] for s in StreamingDataset(local=str(tmp_path / "ds"), batch_size=4)) == list(range(N))
    hashed = []
    real = hashing.hash_open_file
    monkeypatch.setattr(hashing, "hash_open_file", lambda f, algos: hashed.append(1) or real(f, algos))
    assert sorted(s["id"] for s in StreamingDataset(local=str(tmp_path / "ds"), batch_size=4)) == list(range(N))
    assert hashed == []
    raw = tmp_path / "ds" / infos[0].raw_basename
    _flip_last_byte(raw)
    st = raw.stat()  # a later write (mtimes tick by the jiffy: a write this soon could keep the old one)
    os.utime(raw, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(DataError, match="corrupt"):
        list(StreamingDataset(local=str(tmp_path / "ds"), batch_size=4))


def test_a_check_waits_for_the_one_in_progress_and_takes_its_stamp(tmp_path, monkeypatch):
    """The processes of a node that need a shard at once hash it once (a flock on the shard)."""
    info = _write(tmp_path / "ds")[0]
    path, stamps = tmp_path / "ds" / info.raw_basename, tmp_path / "stamps"

    def check(folder):
        hashing.check_shard_file(path, info.raw_hashes, shard=info.raw_basename, dataset="ds", stamps=folder)

    check(tmp_path / "elsewhere")  # the stamp the other process will leave
    looked, errors = threading.Event(), []
    real_stamped = hashing._stamped
    monkeypatch.setattr(hashing, "_stamped", lambda *a: (real_stamped(*a), looked.set())[0])

    def waiter():
        try:
            check(stamps)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    with open(path, "rb") as other:  # another process is hashing the shard
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        thread = threading.Thread(target=waiter)
        thread.start()
        assert looked.wait(30)  # no stamp yet: it waits for the lock
        monkeypatch.setattr(hashing, "hash_open_file", lambda *a, **k: pytest.fail("hashed a second time"))
        stamps.mkdir()
        shutil.copy(tmp_path / "elsewhere" / (info.raw_basename + ".ok"), stamps)
    thread.join(30)
    assert not thread.is_alive() and errors == []


def test_dataset_verify_names_the_flipped_shard(tmp_path, capsys):
    shards = _write(tmp_path / "ds", "zstd")
    _flip_last_byte(tmp_path / "ds" / shards[3].remote_basename)
    with pytest.raises(SystemExit) as exit_:
        main(["dataset", "verify", str(tmp_path / "ds"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert exit_.value.code == 1
    assert [b["shard"] for b in report["bad_shards"]] == [shards[3].remote_basename]
    assert any("xxh3_64 mismatch" in p for p in report["bad_shards"][0]["problems"])


def test_dataset_inspect_refuses_to_preview_a_corrupt_shard(tmp_path, capsys):
    shards = _write(tmp_path / "ds")
    _flip_last_byte(tmp_path / "ds" / shards[0].raw_basename)
    with pytest.raises(SystemExit) as exit_:
        main(["dataset", "inspect", str(tmp_path / "ds")])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and f"shard {shards[0].raw_basename} of " in err and "is corrupt" in err


def test_reading_a_local_dataset_leaves_its_files_and_stamps_alone(tmp_path, monkeypatch):
    """Epochs over a local-only dataset never touch the user's shard files (recency is for eviction,
    and a changed mtime would send the next process to hash every shard again)."""
    infos = _write(tmp_path / "ds")
    files = [tmp_path / "ds" / info.raw_basename for info in infos]
    before = [f.stat().st_mtime_ns for f in files]
    ds = StreamingDataset(local=str(tmp_path / "ds"), batch_size=1)
    for _ in range(2):  # the second epoch finds every shard ready in this process
        assert sorted(s["id"] for s in ds) == list(range(N))
    assert [f.stat().st_mtime_ns for f in files] == before
    hashed = []
    monkeypatch.setattr(hashing, "hash_open_file", lambda f, algos: hashed.append(1) or {})
    assert sorted(s["id"] for s in StreamingDataset(local=str(tmp_path / "ds"), batch_size=1)) == list(range(N))
    assert hashed == []  # a new dataset object (a new process) takes every stamp
