"""The shard cache: once per node, SIGKILL-safe, independent caches, corrupt shards, eviction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from foundry.plugins.errors import ConfigError, DataError
from foundry.streaming import StreamingDataset
from foundry.streaming.cache import parse_bytes

READER = Path(__file__).with_name("reader_proc.py")


def _shards(cache):
    return sorted(p.name for p in Path(cache).glob("shard.*"))


@pytest.mark.subprocess
def test_each_shard_downloaded_once_for_many_workers_and_processes(make_dataset, logged, tmp_path):
    remote = make_dataset(160, 10, compression="zstd")
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, str(READER), logged.url(remote), str(cache), str(tmp_path / f"ids{i}")])
             for i in range(2)]
    ds = StreamingDataset(remote=logged.url(remote), local=str(cache), shuffle=True, batch_size=4)
    ids = np.concatenate([b["id"].numpy() for b in DataLoader(ds, batch_size=4, num_workers=2)])
    assert [p.wait(120) for p in procs] == [0, 0]
    assert sorted(ids.tolist()) == list(range(160))
    for i in range(2):
        assert (tmp_path / f"ids{i}").read_text().split() == [str(k) for k in range(160)]
    counts = Counter(k for k in logged.downloads(remote) if k != "index.json")
    assert len(counts) == 16 and set(counts.values()) == {1}
    assert _shards(cache) == [f"shard.{k:05d}.mds" for k in range(16)]  # zip removed after decompressing


@pytest.mark.subprocess
def test_sigkill_mid_download_then_rerun_on_the_same_cache(make_dataset, logged, tmp_path):
    remote = make_dataset(60, 10)
    cache = tmp_path / "cache"
    stall = Path(f"{remote}.stall")
    stall.write_text("60")
    proc = subprocess.Popen([sys.executable, str(READER), logged.url(remote), str(cache)])
    deadline = time.time() + 60
    while time.time() < deadline and not list((cache / ".foundry" / "tmp").glob("**/.*.part")):
        time.sleep(0.05)
    assert list((cache / ".foundry" / "tmp").glob("**/.*.part")), "reader never started a download"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stall.unlink()
    assert not list(cache.glob("shard.*"))  # nothing half-written under a final name
    ds = StreamingDataset(remote=logged.url(remote), local=str(cache))
    assert [s["id"] for s in ds] == list(range(60))
    leftovers = [p for p in (cache / ".foundry" / "tmp").rglob("*") if p.is_file()]
    assert leftovers == []  # the killed downloads' temporary files were cleared by the next ones


def test_two_datasets_with_different_caches_at_once(make_dataset, tmp_path):
    a, b = make_dataset(80, 10, name="a"), make_dataset(90, 10, name="b")
    out = {}

    def read(name, remote):
        ds = StreamingDataset(remote=str(remote), local=str(tmp_path / f"cache-{name}"), shuffle=True, batch_size=2)
        out[name] = sorted(s["id"] for s in ds)

    threads = [threading.Thread(target=read, args=x) for x in (("a", a), ("b", b))]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert out == {"a": list(range(80)), "b": list(range(90))}


def test_corrupt_shard_in_the_store_is_fetched_again_then_refused_by_name(make_dataset, logged, tmp_path):
    remote = make_dataset(40, 10)
    shard = remote / "shard.00002.mds"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF  # same size, different bytes
    shard.write_bytes(bytes(data))
    ds = StreamingDataset(remote=logged.url(remote), local=str(tmp_path / "cache"))
    assert ds[5]["id"] == 5
    with pytest.raises(DataError, match=r"shard\.00002\.mds.*corrupt.*xxh64"):
        ds[25]
    assert Counter(logged.downloads(remote))["shard.00002.mds"] == 2
    assert "shard.00002.mds" not in _shards(tmp_path / "cache")
    with pytest.raises(DataError, match="validate_hash='sha1'"):
        StreamingDataset(remote=str(remote), local=str(tmp_path / "c2"), validate_hash="sha1")[0]


def test_unreachable_shard_is_a_clear_error(make_dataset, tmp_path):
    remote = make_dataset(20, 10)
    (remote / "shard.00001.mds").unlink()
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), download_retry=1)
    with pytest.raises(DataError, match=r"could not download shard shard\.00001\.mds"):
        ds[15]


def test_missing_shard_is_asked_for_once_not_retried(make_dataset, logged, tmp_path):
    remote = make_dataset(20, 10)
    (remote / "shard.00001.mds").unlink()
    ds = StreamingDataset(remote=logged.url(remote), local=str(tmp_path / "cache"), download_retry=3)
    with pytest.raises(DataError, match=r"could not download shard shard\.00001\.mds"):
        ds[15]
    assert logged.downloads(remote).count("shard.00001.mds") == 1   # not found is not transient


def test_cache_limit_evicts_least_recently_used_and_reads_everything(make_dataset, tmp_path):
    remote = make_dataset(200, 10)
    shard_bytes = (remote / "shard.00000.mds").stat().st_size
    cache = tmp_path / "cache"
    ds = StreamingDataset(remote=str(remote), local=str(cache), cache_limit=6 * shard_bytes + 100, predownload=20)
    assert [s["id"] for s in ds] == list(range(200))
    assert 0 < len(_shards(cache)) <= 8
    assert "shard.00019.mds" in _shards(cache)
    assert ds[3]["id"] == 3  # evicted shards come back on demand


def test_eviction_never_deletes_local_only_data(make_dataset, tmp_path):
    local = make_dataset(100, 10)
    before = _shards(local)
    limit = 4 * max(p.stat().st_size for p in local.glob("shard.*"))  # the least mosaic allows: under 10 shards
    with pytest.warns(UserWarning, match="exists only locally"):
        ds = StreamingDataset(local=str(local), cache_limit=limit, download_retry=0)
        ds._evictor.maybe_evict()
    assert [s["id"] for s in ds] == list(range(100))
    assert _shards(local) == before
    # remote == local: the same folder, never evicted either
    ds = StreamingDataset(remote=str(local), local=str(local), cache_limit=limit)
    assert [s["id"] for s in ds] == list(range(100)) and _shards(local) == before


def test_cache_limit_under_four_shards_is_refused_as_mosaic_does(make_dataset, tmp_path):
    remote = make_dataset(20, 10)
    biggest = max(p.stat().st_size for p in remote.glob("shard.*"))
    for limit in (10, 4 * biggest - 1):
        with pytest.raises(ValueError, match="cache_limit .* too low"):  # a ConfigError and a ValueError
            StreamingDataset(remote=str(remote), local=str(tmp_path / "c"), cache_limit=limit)
    StreamingDataset(remote=str(remote), local=str(tmp_path / "c"), cache_limit=4 * biggest)
    assert parse_bytes("10gb") == 10 * 2**30 and parse_bytes("1.5KiB") == 1536  # mosaic's units: 1024
    with pytest.raises(ConfigError):
        parse_bytes("ten")


def test_missing_local_shard_without_remote(make_dataset):
    local = make_dataset(20, 10)
    (local / "shard.00001.mds").unlink()
    with pytest.raises(DataError, match=r"shard\.00001\.mds is missing.*no remote"):
        list(StreamingDataset(local=str(local)))


def test_a_shard_another_process_decompresses_does_not_hold_this_process_back(make_dataset):
    """Waiting for another process's shard, a thread gives up its decompression slot, so this
    process decompresses the next shard meanwhile (workers of a node share the work)."""
    from foundry.streaming.cache import ShardCache
    from foundry.streaming.format import load_index

    local = make_dataset(20, 10, compression="zstd")
    cache = ShardCache(local, None, load_index((local / "index.json").read_bytes()))
    other = cache._lock(0)  # a second lock object holds the shard's file lock as another process would
    other.acquire()
    waiter = threading.Thread(target=cache.ensure, args=(0,), daemon=True)
    try:
        waiter.start()
        time.sleep(0.2)  # let it block on shard 0's lock
        done = threading.Event()
        threading.Thread(target=lambda: (cache.ensure(1), done.set()), daemon=True).start()
        assert done.wait(60), "shard 1 waited for a shard another process holds"
        assert waiter.is_alive()
    finally:
        other.release()
    waiter.join(60)
    assert _shards(local).count("shard.00000.mds") == 1 and (local / "shard.00001.mds").exists()


@pytest.mark.parametrize("delta", [-4096, 4096])
def test_a_shard_that_decompresses_to_another_size_than_the_index_says_is_refused_and_leaves_nothing(make_dataset, delta):
    """Its blocks are allocated up front from index.json's size (cache.shards._reserve): the file
    must still end where the decompressed bytes end, so that the size check sees them."""
    import json

    data = make_dataset(40, 10, compression="zstd")
    index = json.loads((data / "index.json").read_text())
    shard = index["shards"][0]
    shard["raw_data"]["bytes"] += delta
    (data / "index.json").write_text(json.dumps(index))
    with pytest.raises(DataError, match=r"decompresses to \d+ bytes, index.json says"):
        list(StreamingDataset(local=str(data), batch_size=1))
    assert not (data / shard["raw_data"]["basename"]).exists()
    assert not any((data / ".foundry" / "tmp").iterdir())
