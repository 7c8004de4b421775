"""mosaicml-streaming 0.13's public API as a script that only changed its imports uses it (issue
29.4): sizes and counts in mosaic's units, errors that are also the built-in type mosaic raises,
the names such scripts import, shard access, fancy indexing and hashes=None. The interop half (the
same script run by mosaic itself) is test_mosaic_api_interop.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import foundry.streaming as fs
from foundry.plugins.errors import ConfigError, DataError, FoundryError
from foundry.streaming import (CSVWriter, JSONWriter, LocalDataset, MDSWriter, Stream, StreamingDataset, TSVWriter,
                               XSVWriter, clean_stale_shared_memory, merge_index, streams_registry)
from foundry.streaming.units import parse_bytes, parse_count


def _ids(samples) -> list[int]:
    return [int(s["id"]) for s in samples]


# ---- units ------------------------------------------------------------------------------------
def test_epoch_size_strings_are_sample_counts_as_in_mosaic(make_dataset):
    assert [parse_count(x) for x in ("1k", "1.5k", "2m", "1b", "1t", "250", " 3K ", 7)] == \
        [1000, 1500, 2 * 10**6, 10**9, 10**12, 250, 3000, 7]
    for bad in ("1kb", "ten", "1x", "-"):
        with pytest.raises(ValueError, match="cannot read"):
            parse_count(bad)
    remote = make_dataset(100, 10)
    assert StreamingDataset(local=str(remote), epoch_size="1.5k").epoch_size == 1500
    assert StreamingDataset(local=str(remote), epoch_size="150").epoch_size == 150
    with pytest.raises(ValueError, match="epoch_size cannot be negative"):
        StreamingDataset(local=str(remote), epoch_size=-1)
    with pytest.raises(ValueError, match="sample count"):
        StreamingDataset(local=str(remote), epoch_size="1kb")


def test_cache_limit_units_are_powers_of_1024(make_dataset, tmp_path):
    assert parse_bytes("1kb") == 1024 and parse_bytes("10gb") == 10 * 2**30 and parse_bytes("100b") == 100
    assert parse_bytes("1.5mb") == int(1.5 * 2**20) and parse_bytes(2048) == 2048
    remote = make_dataset(100, 10)
    biggest = max(p.stat().st_size for p in remote.glob("shard.*"))
    need_kb = -(-4 * biggest // 1024)
    # "Nkb" is N x 1024: enough at the rounded-up size, refused (as mosaic refuses) one kb less
    StreamingDataset(remote=str(remote), local=str(tmp_path / "a"), cache_limit=f"{need_kb}kb")
    with pytest.raises(ValueError, match="too low"):
        StreamingDataset(remote=str(remote), local=str(tmp_path / "b"), cache_limit=f"{need_kb - 1}kb")
    # 0 is no limit, as in mosaic
    assert [s["id"] for s in StreamingDataset(remote=str(remote), local=str(tmp_path / "c"), cache_limit=0)] == \
        list(range(100))


# ---- errors -----------------------------------------------------------------------------------
def test_errors_are_also_the_builtin_type_mosaic_raises(make_dataset, tmp_path):
    remote = make_dataset(40, 10)
    bad_arguments = [dict(shuffle_algo="py1x"), dict(sampling_method="x"), dict(batch_size=0),
                     dict(shuffle_seed=-1), dict(partition_algo="x"), dict(epoch_size="x")]
    for kwargs in bad_arguments:
        with pytest.raises(ValueError) as caught:
            StreamingDataset(local=str(remote), **kwargs)
        assert isinstance(caught.value, ConfigError) and caught.value.exit_code == 2, kwargs  # the CLI's mapping
        assert "\n" not in str(caught.value)
    with pytest.raises(ValueError):
        Stream(local=str(remote), proportion=0.5, repeat=2)
    # no index.json and no remote: mosaic raises RuntimeError
    with pytest.raises(RuntimeError) as caught:
        StreamingDataset(local=str(tmp_path / "nothing"))
    assert isinstance(caught.value, DataError)
    # a remote without index.json: FileNotFoundError
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        StreamingDataset(remote=f"file://{tmp_path / 'empty'}", local=str(tmp_path / "cache-empty"))
    # an index.json that is not JSON: json.JSONDecodeError
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "index.json").write_text('{"version": 2, "shards": [')
    with pytest.raises(json.JSONDecodeError) as caught:
        StreamingDataset(local=str(tmp_path / "corrupt"))
    assert isinstance(caught.value, FoundryError) and caught.value.pos > 0
    # a state that does not fit: ValueError (mosaic adopts it silently; Foundry refuses, documented)
    ds = StreamingDataset(local=str(remote), shuffle_seed=1)
    with pytest.raises(ValueError, match="shuffle_seed"):
        ds.load_state_dict({"epoch": 0, "sample_in_epoch": 0, "shuffle_seed": 2})
    # writers: a non-empty output folder is FileExistsError, a bad argument ValueError
    with pytest.raises(FileExistsError) as caught:
        MDSWriter(out=str(remote), columns={"id": "int"})
    assert isinstance(caught.value, DataError) and "exist_ok" in str(caught.value)
    for kwargs in (dict(compression="lzma9"), dict(hashes=["nope"]), dict(size_limit=2**33), dict(progres_bar=True)):
        with pytest.raises(ValueError):
            MDSWriter(out=str(tmp_path / "w"), columns={"id": "int"}, **kwargs)
    with pytest.raises(ValueError):
        MDSWriter(out=str(tmp_path / "w"), columns={"id": "no-such-encoding"})


def test_missing_and_corrupt_shards_are_the_builtin_types_too(make_dataset, tmp_path):
    local = make_dataset(20, 10)
    (local / "shard.00001.mds").unlink()
    with pytest.raises(FileNotFoundError, match="missing"):
        list(StreamingDataset(local=str(local)))
    remote = make_dataset(20, 10, name="remote2")
    (remote / "shard.00000.mds").write_bytes(b"x" * (remote / "shard.00000.mds").stat().st_size)
    with pytest.raises(ValueError, match="corrupt"):
        StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), validate_hash="xxh64")[0]


# ---- names -------------------------------------------------------------------------------------
def test_the_names_mosaic_scripts_import_exist():
    clean_stale_shared_memory()  # does nothing, and says so by returning nothing
    for name in ("CSVWriter", "JSONWriter", "LocalDataset", "MDSWriter", "Stream", "StreamingDataLoader",
                 "StreamingDataset", "TSVWriter", "XSVWriter", "clean_stale_shared_memory", "merge_index"):
        assert name in fs.__all__ and getattr(fs, name) is not None
    assert issubclass(CSVWriter, XSVWriter) and issubclass(TSVWriter, XSVWriter) and JSONWriter is not None
    assert streams_registry.get("stream") is Stream


def _write_part(out, first: int, n: int, **kwargs) -> None:
    with MDSWriter(out=str(out), columns={"id": "int", "x": "ndarray:float32:3"}, size_limit=200, **kwargs) as w:
        for i in range(first, first + n):
            w.write({"id": i, "x": np.full(3, i, np.float32)})


def test_merge_index_joins_the_sub_datasets_parallel_writers_leave(tmp_path):
    root = tmp_path / "root"
    for k in range(3):  # each "worker" writes its own sub-folder
        _write_part(root / f"part-{k:05}", 30 * k, 30)
    merge_index(str(root))
    index = json.loads((root / "index.json").read_text())
    assert all(s["raw_data"]["basename"].startswith("part-") for s in index["shards"])
    assert _ids(StreamingDataset(local=str(root))) == list(range(90))
    # the digests' locations come along: every one names a file that is there
    assert {f for f, _, _ in index["foundry_block_digests"].values()} == {f"part-{k:05}/index.blocks" for k in range(3)}
    # the list form, and a remote `out`
    remote = tmp_path / "remote"
    for k in range(2):
        _write_part(remote / f"w{k}", 10 * k, 10, hashes=None)
    merge_index([str(remote / "w1" / "index.json"), str(remote / "w0" / "index.json")], f"file://{remote}")
    assert _ids(StreamingDataset(remote=f"file://{remote}", local=str(tmp_path / "cache"))) == \
        list(range(10, 20)) + list(range(10))
    with pytest.raises(ValueError):
        merge_index(3)


def test_local_dataset_is_a_map_style_dataset(tmp_path):
    _write_part(tmp_path / "ds", 0, 25)
    ds = LocalDataset(str(tmp_path / "ds"))
    assert len(ds) == ds.size == ds.num_samples == 25
    assert ds[3]["id"] == 3 and ds[-1]["id"] == 24 and _ids(ds[2:5]) == [2, 3, 4]
    loader = torch.utils.data.DataLoader(ds, batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(0))
    assert sorted(torch.cat([b["id"] for b in loader]).tolist()) == list(range(25))
    with pytest.raises(IndexError):
        ds[25]


class TaggedStream(Stream):
    """A custom stream as a mosaic user writes one: extra config, an overridden hook."""

    def __init__(self, *, tag: str, **kwargs):
        super().__init__(**kwargs)
        self.tag = tag
        self.loads = 0

    def load_index(self):
        self.loads += 1
        return super().load_index()


def test_stream_name_and_config_build_the_registered_stream_class(make_dataset):
    remote = make_dataset(30, 10)
    streams_registry.register("tagged", func=TaggedStream)
    try:
        ds = StreamingDataset(local=str(remote), stream_name="tagged", stream_config={"tag": "mine"},
                              download_retry=5)
        (stream,) = ds.streams
        assert isinstance(stream, TaggedStream) and stream.tag == "mine" and stream.loads == 1
        assert stream.download_retry == 5 and _ids(ds) == list(range(30))
        with pytest.raises(ValueError, match="no stream class registered as 'nope'"):
            StreamingDataset(local=str(remote), stream_name="nope")
    finally:
        streams_registry._classes.pop("tagged", None)


# ---- shards and indexing ------------------------------------------------------------------------
def test_shards_prepare_and_evict(make_dataset, tmp_path):
    remote = make_dataset(40, 10)
    cache = tmp_path / "cache"
    ds = StreamingDataset(remote=f"file://{remote}", local=str(cache))
    assert ds.num_shards == len(ds.shards) == 4 and [len(s) for s in ds.shards] == [10] * 4
    assert ds.shards[2].raw_basename == "shard.00002.mds"
    ds.prepare_shard(2)
    assert (cache / "shard.00002.mds").exists() and not (cache / "shard.00001.mds").exists()
    assert ds[25]["id"] == 25
    ds.evict_shard(2)
    assert not (cache / "shard.00002.mds").exists()
    assert ds[25]["id"] == 25 and (cache / "shard.00002.mds").exists()  # fetched again on use
    local_only = StreamingDataset(local=str(remote))
    local_only.evict_shard(0)  # the only copy: never deleted
    assert (remote / "shard.00000.mds").exists()


def test_a_dataset_indexes_with_ints_slices_lists_and_arrays(make_dataset):
    ds = StreamingDataset(local=str(make_dataset(30, 10)))
    assert ds[np.int64(4)]["id"] == 4 and ds[-1]["id"] == 29 and ds[torch.tensor(7)]["id"] == 7
    assert _ids(ds[2:12:3]) == [2, 5, 8, 11] and _ids(ds[-3:]) == [27, 28, 29] and ds[40:] == []
    assert _ids(ds[[1, 25, 3]]) == [1, 25, 3]
    nested = ds[np.array([[0, 1], [2, 3]])]
    assert [_ids(row) for row in nested] == [[0, 1], [2, 3]]
    with pytest.raises(IndexError):
        ds[30]
    with pytest.raises(ValueError, match="cannot index"):
        ds[1.5]


class Doubled(StreamingDataset):
    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return sample if isinstance(sample, list) else {**sample, "id": 2 * sample["id"]}


def test_a_subclass_transform_applies_to_each_sample_of_a_list(make_dataset):
    ds = Doubled(local=str(make_dataset(10, 5)))
    assert _ids(ds[[1, 2]]) == [2, 4] and _ids(ds[3:5]) == [6, 8]


# ---- writer -------------------------------------------------------------------------------------
def test_hashes_none_passed_explicitly_writes_no_hashes(tmp_path):
    _write_part(tmp_path / "none", 0, 20, hashes=None)
    _write_part(tmp_path / "default", 0, 20)
    none = json.loads((tmp_path / "none" / "index.json").read_text())
    assert all(s["hashes"] == [] and s["raw_data"]["hashes"] == {} for s in none["shards"])
    assert set(none) == {"version", "shards"}  # mosaic's index.json, nothing more
    assert sorted(p.name for p in (tmp_path / "none").iterdir()) == \
        sorted(["index.json"] + [s["raw_data"]["basename"] for s in none["shards"]])
    default = json.loads((tmp_path / "default" / "index.json").read_text())
    assert all(s["hashes"] == ["xxh3_64"] for s in default["shards"])  # integrity stays on by default
    # one digest file for the dataset, whatever its number of shards
    assert len(list((tmp_path / "default").iterdir())) == len(default["shards"]) + 2


# ---- in-place changes to a sample ---------------------------------------------------------------
def _arrays_dataset(tmp_path, n: int = 12):
    with MDSWriter(out=str(tmp_path / "arrays"), columns={"id": "int", "x": "ndarray:float32:4", "y": "ndarray"},
                   size_limit=300) as w:
        for i in range(n):
            w.write({"id": i, "x": np.full(4, i, np.float32), "y": np.full((2, 2), i, np.int64)})
    return tmp_path / "arrays"


def test_a_samples_arrays_can_be_changed_in_place_and_the_data_stays(tmp_path):
    local = _arrays_dataset(tmp_path)
    ds = StreamingDataset(local=str(local))
    x = ds[3]["x"]
    torch.from_numpy(x).mul_(2)  # a read-only view of a read-only map would kill the process here
    x += 1
    assert x.tolist() == [7.0] * 4 and ds[3]["x"].tolist() == [3.0] * 4
    for s in ds:  # iterating: each sample's arrays are writable too
        s["x"] += 1
        s["y"] *= 3
    assert [s["x"][0] for s in ds] == list(range(12))  # the next epoch reads the data as stored
    for b in torch.utils.data.DataLoader(ds, batch_size=None):
        b["x"].add_(1)
    assert ds[5]["x"].tolist() == [5.0] * 4


def test_a_sample_an_epoch_repeats_does_not_carry_an_earlier_in_place_change(tmp_path):
    local = _arrays_dataset(tmp_path)
    ds = StreamingDataset(streams=[Stream(local=str(local), repeat=2)], shuffle=True)
    seen = []
    for s in ds:
        seen.append((int(s["id"]), s["x"].tolist()))
        torch.from_numpy(s["x"]).add_(100)
    assert len(seen) == 24 and all(x == [float(i)] * 4 for i, x in seen)
