"""open_shard: MDS and split-format shards read through one API, corruption caught clearly."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from foundry.plugins.errors import DataError
from foundry.streaming.format import load_index, open_shard
from foundry.streaming.writer import CSVWriter, JSONWriter, MDSWriter, TSVWriter


def _write(cls, path, samples, **kw):
    with cls(out=str(path), **kw) as w:
        for s in samples:
            w.write(s)
    return load_index((path / "index.json").read_bytes())


MAPPED = pytest.mark.parametrize("mapped", [True, False], ids=["mmap", "pread"])


@MAPPED
def test_mds_reader_random_access_and_raw_bytes(tmp_path, mapped):
    samples = [{"id": i, "text": "x" * i, "vec": np.full(3, i, np.float32)} for i in range(50)]
    (info,) = _write(MDSWriter, tmp_path, samples, columns={"id": "int", "text": "str", "vec": "ndarray:float32:3"})
    with open_shard(info, tmp_path / info.raw_basename, mapped=mapped) as reader:
        assert len(reader) == 50
        for i in (0, 17, 49, -1):
            got = reader.get_sample(i)
            want = samples[i]
            assert got["id"] == want["id"] and got["text"] == want["text"]
            assert np.array_equal(got["vec"], want["vec"])
        raw = reader.get_sample_bytes(3)
        assert raw == (3).to_bytes(4, "little") + (3).to_bytes(8, "little") + b"xxx" + np.full(3, 3, np.float32).tobytes()
        with pytest.raises(IndexError):
            reader.get_sample(50)


def test_all_fixed_columns(tmp_path):
    samples = [{"a": i, "b": np.uint8(i)} for i in range(10)]
    (info,) = _write(MDSWriter, tmp_path, samples, columns={"a": "int", "b": "uint8"})
    reader = open_shard(info, tmp_path / info.raw_basename)
    assert [reader.get_sample(i)["a"] for i in range(10)] == list(range(10))
    assert reader.get_sample(9)["b"] == np.uint8(9)


@MAPPED
def test_reader_pickles_and_reopens(tmp_path, mapped):
    (info,) = _write(MDSWriter, tmp_path, [{"a": i} for i in range(5)], columns={"a": "int"})
    reader = open_shard(info, tmp_path / info.raw_basename, mapped=mapped)
    assert reader.get_sample(1) == {"a": 1}
    clone = pickle.loads(pickle.dumps(reader))
    assert clone.get_sample(4) == {"a": 4}


@pytest.mark.parametrize("cls,fmt", [(JSONWriter, "json"), (CSVWriter, "csv"), (TSVWriter, "tsv")])
def test_split_formats(tmp_path, cls, fmt):
    samples = [{"name": f"n{i}", "count": i, "score": i / 4} for i in range(20)]
    shards = _write(cls, tmp_path, samples, columns={"name": "str", "count": "int", "score": "float"}, size_limit=200)
    assert len(shards) > 1 and shards[0].format == fmt
    got = []
    for info in shards:
        reader = open_shard(info, tmp_path / info.raw_basename)
        got += [reader.get_sample(i) for i in range(len(reader))]
    assert got == samples


def test_pickle_columns_need_an_explicit_opt_in(tmp_path):
    (info,) = _write(MDSWriter, tmp_path, [{"obj": {"a": 1}}], columns={"obj": "pkl"})
    with pytest.raises(DataError) as err:
        open_shard(info, tmp_path / info.raw_basename)
    assert "allow_unsafe_types=True" in err.value.hint
    assert open_shard(info, tmp_path / info.raw_basename, allow_unsafe_types=True).get_sample(0) == {"obj": {"a": 1}}


@MAPPED
def test_truncated_or_mismatched_shards_are_data_errors(tmp_path, mapped):
    (info,) = _write(MDSWriter, tmp_path, [{"a": i} for i in range(5)], columns={"a": "int"})
    path = tmp_path / info.raw_basename
    info.samples = 6
    with pytest.raises(DataError, match="index.json says 6"):
        open_shard(info, path, mapped=mapped).get_sample(0)
    info.samples = 5
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(DataError, match="truncated"):
        open_shard(info, path, mapped=mapped).get_sample(0)
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(DataError, match="truncated"):
        open_shard(info, path, mapped=mapped).get_sample(0)
    with pytest.raises(DataError, match="does not exist"):
        open_shard(info, tmp_path / "missing.mds", mapped=mapped).get_sample(0)


def test_pread_reader_leaves_no_open_file(tmp_path):
    """A pread reader holds one descriptor from its first sample until close()."""
    import os

    (info,) = _write(MDSWriter, tmp_path, [{"a": i} for i in range(5)], columns={"a": "int"})
    before = len(os.listdir("/proc/self/fd"))
    reader = open_shard(info, tmp_path / info.raw_basename, mapped=False)
    assert reader.get_sample(2) == {"a": 2}
    assert len(os.listdir("/proc/self/fd")) == before + 1
    reader.close()
    assert len(os.listdir("/proc/self/fd")) == before
