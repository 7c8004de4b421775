"""index.json parsing, compression and hashing."""

from __future__ import annotations

import hashlib
import json

import pytest
import xxhash

from foundry.plugins.errors import ConfigError, DataError
from foundry.streaming.format import (
    compress, compress_file, decompress, decompress_file, dump_index, hash_bytes, hash_file, is_compression,
    load_index, parse_compression, shard_basename, verify_file,
)

ENTRY = {
    "column_encodings": ["int", "str"], "column_names": ["a", "b"], "column_sizes": [8, None],
    "compression": "zstd:7", "format": "mds", "hashes": ["sha1"], "samples": 3, "size_limit": 1024, "version": 2,
    "raw_data": {"basename": "shard.00000.mds", "bytes": 100, "hashes": {"sha1": "aa"}},
    "zip_data": {"basename": "shard.00000.mds.zstd", "bytes": 50, "hashes": {"sha1": "bb"}},
}
CSV_ENTRY = {
    "column_encodings": ["str", "int"], "column_names": ["x", "y"], "compression": None, "format": "csv",
    "hashes": [], "newline": "\n", "samples": 2, "size_limit": None, "version": 2,
    "raw_data": {"basename": "shard.00000.csv", "bytes": 20, "hashes": {}}, "zip_data": None,
    "raw_meta": {"basename": "shard.00000.csv.meta", "bytes": 30, "hashes": {}}, "zip_meta": None,
}


def test_load_index_flattens_each_shard():
    text = dump_index([ENTRY, CSV_ENTRY])
    for form in (text, text.decode(), json.loads(text)):
        mds, csv = load_index(form)
        assert (mds.format, mds.samples, mds.compression) == ("mds", 3, "zstd:7")
        assert mds.remote_basename == "shard.00000.mds.zstd" and mds.raw_basename == "shard.00000.mds"
        assert (mds.raw_bytes, mds.zip_bytes, mds.raw_hashes, mds.zip_hashes) == (100, 50, {"sha1": "aa"}, {"sha1": "bb"})
        assert (mds.column_names, mds.column_encodings, mds.column_sizes) == (["a", "b"], ["int", "str"], [8, None])
        assert mds.entry == ENTRY and mds.size_limit == 1024 and mds.meta is None
        assert csv.remote_basename == "shard.00000.csv" and csv.zip_bytes is None
        assert [f.remote_basename for f in csv.files] == ["shard.00000.csv", "shard.00000.csv.meta"]
        assert csv.remote_bytes == 50


def test_dump_index_is_sorted_compact_json_like_upstream():
    text = dump_index([ENTRY]).decode()
    assert text.startswith('{"shards": [{"column_encodings"') and text.endswith('"version": 2}')
    assert text == json.dumps({"version": 2, "shards": [ENTRY]}, sort_keys=True)


def test_json_shards_take_columns_from_the_columns_map():
    entry = {**CSV_ENTRY, "format": "json", "columns": {"z": "str", "a": "int"}}
    del entry["column_names"], entry["column_encodings"]
    (info,) = load_index({"version": 2, "shards": [entry]})
    assert info.column_names == ["a", "z"] and info.column_encodings == ["int", "str"]


@pytest.mark.parametrize(
    "bad",
    [b"not json", {"version": 1, "shards": []}, {"shards": []}, {"version": 2},
     {"version": 2, "shards": [{**ENTRY, "version": 3}]}, {"version": 2, "shards": [{**ENTRY, "format": "parquet"}]},
     {"version": 2, "shards": [{**ENTRY, "raw_data": None}]}, {"version": 2, "shards": [{**ENTRY, "zip_data": None}]}],
)
def test_invalid_indexes_are_data_errors(bad):
    with pytest.raises(DataError):
        load_index(bad)


def test_shard_basenames():
    assert shard_basename(3, "mds") == "shard.00003.mds"
    assert shard_basename(123456, "json", "meta") == "shard.123456.json.meta"


COMPRESSIONS = ["zstd", "zstd:1", "gz", "gz:1", "bz2", "br", "br:1", "snappy"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_compression_round_trips_in_memory_and_streaming(compression, tmp_path):
    data = bytes(range(256)) * 5000 + b"tail"
    assert decompress(compression, compress(compression, data)) == data
    compress_file(compression, write(tmp_path / "raw", data), tmp_path / "zip")
    assert decompress(compression, (tmp_path / "zip").read_bytes()) == data
    decompress_file(compression, tmp_path / "zip", tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == data
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def write(path, data):
    path.write_bytes(data)
    return path


def test_streamed_zstd_frames_carry_their_content_size(tmp_path):
    import zstandard

    compress_file("zstd", write(tmp_path / "raw", b"x" * 100_000), tmp_path / "zip")
    params = zstandard.get_frame_parameters((tmp_path / "zip").read_bytes())
    assert params.content_size == 100_000


def test_corrupt_compressed_data_is_a_data_error_and_leaves_no_file(tmp_path):
    with pytest.raises(DataError):
        decompress("zstd", b"garbage")
    with pytest.raises(DataError):
        decompress_file("gz", write(tmp_path / "bad.gz", b"garbage"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_compression_names():
    assert parse_compression("zstd").level == 3 and parse_compression("zstd:22").level == 22
    assert parse_compression("snappy").level is None
    for bad in ["lz4", "zstd:0", "zstd:23", "gz:x", "snappy:1"]:
        assert not is_compression(bad)
        with pytest.raises(ConfigError):
            parse_compression(bad)


def test_hashes_match_hashlib_and_xxhash(tmp_path):
    data = b"foundry" * 1000
    assert hash_bytes("sha1", data) == hashlib.sha1(data).hexdigest()
    assert hash_bytes("md5", data) == hashlib.md5(data).hexdigest()
    for algo in ["xxh32", "xxh64", "xxh3_64", "xxh3_128", "xxh128"]:
        assert hash_bytes(algo, data) == getattr(xxhash, algo)(data).hexdigest()
    path = write(tmp_path / "f", data)
    digests = hash_file(path, ["sha256", "xxh64"])
    assert verify_file(path, digests) and verify_file(path, {})
    assert not verify_file(path, {"sha256": "0" * 64})
    with pytest.raises(ConfigError):
        hash_bytes("crc99", data)
