"""A cold remote shard's first samples come from ranged reads of its blocks while it downloads
(format.ranged_reader, format.block_digests, early_reader.py), checked block by block against the
digests the writer stores in the dataset's one digest file (`index.blocks`, located by index.json),
and compared with the downloaded file after. Datasets written with a digest file beside each shard
(before) are read early too."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xxhash

import foundry.streaming.cache.shards as shards_module
import foundry.streaming.read.early.reader as early_module
from foundry.plugins.errors import DataError
from foundry.streaming import MDSWriter, StreamingDataset
from foundry.streaming.format.block_digests import (BLOCK_BYTES, DATASET_BASENAME, INDEX_KEY, BlockDigests, BlockHasher,
                                                    digests_basename)
from foundry.streaming.format.ranged_reader import RangedMDSReader

COLUMNS = {"id": "int", "tokens": "ndarray:int32"}
N = 3000  # three shards of ~2 MiB, 128 blocks each: 32 may be read early


def _sample(i: int, version: int = 0) -> dict:
    return {"id": i, "tokens": np.arange(i, i + 500, dtype=np.int32) + version}


def _write(out, n: int = N, version: int = 0, **kwargs) -> None:
    with MDSWriter(out=str(out), columns=COLUMNS, size_limit=2 << 20, **kwargs) as w:
        for i in range(n):
            w.write(_sample(i, version))


def _shards(root: Path) -> list[str]:
    return [s["raw_data"]["basename"] for s in json.loads((root / "index.json").read_text())["shards"]]


def _records(root: Path) -> dict[str, bytes]:
    """Each shard's digest record, where index.json says it is."""
    where = json.loads((root / "index.json").read_text()).get(INDEX_KEY, {})
    return {name: (root / file).read_bytes()[offset:offset + size] for name, (file, offset, size) in where.items()}


def _as_written_before(root: Path) -> None:
    """The layout of datasets written before the one digest file: `<shard>.blocks.json` beside each
    shard, nothing about them in index.json."""
    for name, record in _records(root).items():
        (root / digests_basename(name)).write_bytes(record)
    index = json.loads((root / "index.json").read_text())
    del index[INDEX_KEY]
    (root / "index.json").write_text(json.dumps(index, sort_keys=True))
    (root / DATASET_BASENAME).unlink()


@pytest.fixture
def held_downloads(monkeypatch):
    """Hold every whole-shard download until released, and record the early readers made."""
    release = threading.Event()
    made: list = []
    real_fetch = shards_module.ShardCache._fetch
    real_open = RangedMDSReader.__init__

    def held(self, key, dest=None):
        if not key.endswith("index.json"):
            release.wait(30)
        return real_fetch(self, key, dest)

    def recorded(self, *args, **kwargs):
        real_open(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(shards_module.ShardCache, "_fetch", held)
    monkeypatch.setattr(RangedMDSReader, "__init__", recorded)
    # these stores are on this machine: read early as from a store across a WAN
    monkeypatch.setattr(shards_module, "FAR_STORE_INDEX_S", 0.0)
    monkeypatch.setattr(shards_module, "MIN_EARLY_SHARD_BYTES", 0)  # ~2 MiB shards here
    yield release, made
    release.set()  # a failed test leaves no download held


def _open(remote_url: str, local: Path, **kwargs) -> StreamingDataset:
    kwargs = {"shuffle": True, "shuffle_seed": 7, **kwargs}
    return StreamingDataset(remote=remote_url, local=str(local), batch_size=4, **kwargs)


def _ids(samples) -> list[int]:
    return [int(s["id"]) for s in samples]


def _check(samples, version: int = 0) -> None:
    for s in samples:
        assert np.array_equal(s["tokens"], _sample(int(s["id"]), version)["tokens"])


def test_digests_of_blocks_round_trip_whatever_the_chunks():
    data = np.random.default_rng(0).bytes(3 * BLOCK_BYTES + 1000)
    hasher = BlockHasher()
    for a, b in [(0, 7), (7, BLOCK_BYTES + 3), (BLOCK_BYTES + 3, 3 * BLOCK_BYTES), (3 * BLOCK_BYTES, len(data))]:
        hasher.update(data[a:b])
    digests = BlockDigests.parse(hasher.dump(len(data), {"xxh3_64": "abc"}))
    assert digests is not None and len(digests.blocks) == 16 * 4
    for b in range(4):
        block = data[b * BLOCK_BYTES:(b + 1) * BLOCK_BYTES]
        assert digests.matches(b, block)
        assert xxhash.xxh3_64(block).hexdigest() == digests.blocks[16 * b:16 * (b + 1)]
    assert not digests.matches(1, data[:BLOCK_BYTES])  # another block's bytes
    assert not digests.matches(3, data[3 * BLOCK_BYTES:-1])  # short
    assert digests.describes(len(data), {"xxh3_64": "abc", "sha1": "x"})
    assert not digests.describes(len(data), {"xxh3_64": "abd"})  # digests of an older file
    assert not digests.describes(len(data) + 1, {"xxh3_64": "abc"})
    assert not digests.describes(len(data), {"sha1": "x"})  # nothing to tie them to the file
    for bad in (b"", b"{", b'{"version": 2}', hasher.dump(len(data) + BLOCK_BYTES, {})):
        assert BlockDigests.parse(bad) is None


def test_writer_puts_the_digests_of_checked_uncompressed_shards_in_one_file(tmp_path):
    _write(tmp_path / "plain")
    names = _shards(tmp_path / "plain")
    records = _records(tmp_path / "plain")
    assert sorted(records) == sorted(names)
    for name in names:
        raw = (tmp_path / "plain" / name).read_bytes()
        digests = BlockDigests.parse(records[name])
        assert digests is not None and digests.file_bytes == len(raw)
        assert all(digests.matches(b, raw[b * BLOCK_BYTES:(b + 1) * BLOCK_BYTES]) for b in range(len(raw) // BLOCK_BYTES))
    # one file more than mosaic writes, whatever the number of shards; none without hashes or compressed
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == sorted(["index.json", DATASET_BASENAME] + names)
    for kwargs in (dict(hashes=[]), dict(hashes=None), dict(compression="zstd")):
        _write(tmp_path / "other", exist_ok=True, **kwargs)
        assert not (tmp_path / "other" / DATASET_BASENAME).exists(), kwargs
        assert INDEX_KEY not in json.loads((tmp_path / "other" / "index.json").read_text()), kwargs
    # uploaded with the shards, before index.json
    with MDSWriter(out=(str(tmp_path / "stage"), f"file://{tmp_path / 'store'}"), columns=COLUMNS, size_limit=2 << 20) as w:
        for i in range(N):
            w.write(_sample(i))
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == sorted(["index.json", DATASET_BASENAME] + names)


def test_a_dataset_written_with_digests_beside_each_shard_is_read_early_too(tmp_path, logged, held_downloads):
    release, made = held_downloads
    _write(tmp_path / "remote")
    _as_written_before(tmp_path / "remote")
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache"))
    got = [next(it) for _ in range(12)]  # every whole download is still held
    assert made and all(r._digests is not None for r in made)
    release.set()
    got += list(it)
    assert len(got) == N
    _check(got)


def test_first_samples_come_from_ranged_reads_before_the_download(tmp_path, logged, held_downloads):
    release, made = held_downloads
    _write(tmp_path / "remote")
    expected = list(StreamingDataset(local=str(tmp_path / "remote"), shuffle=True, shuffle_seed=7, batch_size=4))
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache"))
    got = [next(it) for _ in range(12)]  # every whole download is still held
    assert made and sum(r.blocks_fetched for r in made) >= 1
    assert not any((tmp_path / "cache" / name).exists() for name in _shards(tmp_path / "remote"))
    release.set()
    got += list(it)
    assert _ids(got) == _ids(expected)
    _check(got)
    assert all((tmp_path / "cache" / name).exists() for name in _shards(tmp_path / "remote"))
    assert not (tmp_path / "cache" / DATASET_BASENAME).exists()  # read into memory, never cached


def test_the_next_samples_are_fetched_together(tmp_path, logged, held_downloads):
    """Across a WAN each ranged read is a round trip: the blocks of the samples coming next are
    asked for at once, not as each sample is reached."""
    release, made = held_downloads
    _write(tmp_path / "remote")
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache"))
    first = next(it)
    # without the look-ahead, the first sample's shard has its header's block and the sample's (<= 2)
    assert max(r.blocks_fetched for r in made) >= 5
    # and the other shards the next samples need are being opened already, before they are reached
    deadline = time.monotonic() + 10
    while len(made) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(made) == 3
    release.set()
    _check([first] + list(it))


def test_early_reading_is_bounded_then_waits_for_the_download(tmp_path, logged, held_downloads, monkeypatch):
    release, made = held_downloads
    monkeypatch.setattr(early_module, "BLOCK_BUDGET", 0.0)  # the header's block is at least 2
    _write(tmp_path / "remote")
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache", shuffle=False))
    assert [int(next(it)["id"]) for _ in range(3)] == [0, 1, 2]  # from the header's block
    timer = threading.Timer(0.5, release.set)
    timer.start()
    got = list(it)
    timer.join()
    assert _ids(got) == list(range(3, N)) and made and all(r.blocks_fetched <= 2 for r in made)
    _check(got)


def test_a_block_that_fails_its_digest_is_never_served(tmp_path, logged, held_downloads):
    release, made = held_downloads
    _write(tmp_path / "remote")
    first = _shards(tmp_path / "remote")[0]
    path = tmp_path / "remote" / first
    raw = np.frombuffer(path.read_bytes(), np.uint8).copy()
    raw[BLOCK_BYTES:] ^= 0xFF  # every sample past the header's block, keeping the size
    path.write_bytes(raw.tobytes())
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache"))
    threading.Timer(0.5, release.set).start()
    got = []
    with pytest.raises(DataError, match=f"{first}.*corrupt in the store"):
        for s in it:
            got.append(s)
    _check(got)  # what came before the error is right


def test_a_store_a_few_ms_away_is_not_read_early(tmp_path, logged, held_downloads, monkeypatch):
    """Its shards come in a fraction of a second: many small reads beside them cost more than they
    give. index.json coming quickly tells."""
    release, made = held_downloads
    monkeypatch.setattr(shards_module, "FAR_STORE_INDEX_S", 30.0)
    _write(tmp_path / "remote")
    _read_only_once_downloaded(tmp_path, logged, release)
    assert not made


def test_small_shards_and_ranks_sharing_a_node_are_not_read_early(tmp_path, logged, held_downloads, monkeypatch):
    """A small shard comes in about the round trips its early reads would take; and ranks of one
    node share one download of each shard, where each would make its own early reads."""
    release, made = held_downloads
    _write(tmp_path / "remote")
    monkeypatch.setattr(shards_module, "MIN_EARLY_SHARD_BYTES", 8 << 20)
    _read_only_once_downloaded(tmp_path, logged, release)
    monkeypatch.setattr(shards_module, "MIN_EARLY_SHARD_BYTES", 0)
    release.clear()
    for key, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    threading.Timer(0.5, release.set).start()
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache2"))
    got = [next(it)]
    assert release.is_set()  # waited for the download
    _check(got + list(it))
    assert not made


def _read_only_once_downloaded(tmp_path, logged, release) -> None:
    """Every sample is right, and the first one waited for its shard's (held) download."""
    threading.Timer(0.5, release.set).start()
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache"))
    got = [next(it)]
    assert release.is_set()
    got += list(it)
    assert len(got) == N
    _check(got)


def test_digests_of_another_version_are_not_used(tmp_path, logged, held_downloads):
    release, made = held_downloads
    _write(tmp_path / "remote")
    _write(tmp_path / "older", version=1)
    # same sizes, other bytes: the digests of the older shards, in the same places
    (tmp_path / "remote" / DATASET_BASENAME).write_bytes((tmp_path / "older" / DATASET_BASENAME).read_bytes())
    _read_only_once_downloaded(tmp_path, logged, release)


def test_unchecked_shards_are_read_early_without_digests(tmp_path, logged, held_downloads):
    """hashes=[] (mosaic's default): nothing to check, so no digests are needed to read early."""
    release, made = held_downloads
    _write(tmp_path / "remote", hashes=[])
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache"))
    got = [next(it) for _ in range(5)]
    assert made and all(r._digests is None for r in made)
    release.set()
    got += list(it)
    assert len(got) == N
    _check(got)


def test_a_shard_rewritten_while_read_is_an_error_not_a_mix(tmp_path, logged, held_downloads):
    release, made = held_downloads
    _write(tmp_path / "remote", hashes=[])
    _write(tmp_path / "newer", hashes=[], version=1)
    it = iter(_open(logged.url(tmp_path / "remote"), tmp_path / "cache"))
    got = [next(it) for _ in range(3)]
    _check(got)
    for name in _shards(tmp_path / "remote"):  # the store's shards change under the reader
        (tmp_path / "remote" / name).write_bytes((tmp_path / "newer" / name).read_bytes())
    release.set()
    with pytest.raises(DataError, match="changed in the store while it was being read"):
        list(it)


def test_checked_shards_without_digests_wait_for_the_download(tmp_path, logged, held_downloads):
    """A dataset written by mosaicml-streaming with hashes (or by an older Foundry) has no digests."""
    release, made = held_downloads
    _write(tmp_path / "remote")
    (tmp_path / "remote" / DATASET_BASENAME).unlink()  # index.json names a digest file that is gone
    _read_only_once_downloaded(tmp_path, logged, release)
    index = json.loads((tmp_path / "remote" / "index.json").read_text())
    del index[INDEX_KEY]  # and one that names none (mosaic's writer)
    (tmp_path / "remote" / "index.json").write_text(json.dumps(index, sort_keys=True))
    release.clear()
    import shutil

    shutil.rmtree(tmp_path / "cache")
    _read_only_once_downloaded(tmp_path, logged, release)


@pytest.mark.integration
def test_early_samples_from_seaweedfs(s3_bucket, tmp_path, held_downloads):
    release, made = held_downloads
    url = f"{s3_bucket.url}/ds"
    with MDSWriter(out=url, columns=COLUMNS, size_limit=2 << 20) as w:
        for i in range(N):
            w.write(_sample(i))
    it = iter(_open(url, tmp_path / "cache"))
    got = [next(it) for _ in range(6)]
    assert made and all(r._checked_against() is not None for r in made) and sum(r.blocks_fetched for r in made) >= 1
    release.set()
    got += list(it)
    assert sorted(_ids(got)) == list(range(N))
    _check(got)
