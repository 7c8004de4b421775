"""Publishing verifies each uploaded checkpoint file in the store: a multipart upload's ETag is
recomputed from the local file just uploaded (no read-back of the whole object, which cost a
second transfer per save), and anything that does not match falls back to reading it back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foundry.plugins.errors import CheckpointError
from foundry.plugins.manager import open_store
from foundry.trainer.checkpoint import store_ops
from foundry.trainer.checkpoint.format import digest_file

MiB = 1 << 20


def _store_counting_reads(url: str):
    store = open_store(url)
    reads: list[str] = []
    get_file = store.get_file

    def counting(key, path, *args, **kwargs):
        reads.append(key)
        return get_file(key, path, *args, **kwargs)

    store.get_file = counting
    return store, reads


def _file(path: Path, size: int, seed: bytes = b"a") -> Path:
    path.write_bytes((seed * 251 + os.urandom(5))[:256] * (size // 256))
    return path


def test_multipart_upload_verified_without_reading_back(tmp_path, s3_bucket):
    store, reads = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "state.pt", 20 * MiB)  # above the 8 MiB threshold: three parts
    entry = digest_file(local)
    assert store_ops.upload_files(store, "ep0-ba1", [(local, entry)]) == ["state.pt"]
    assert store.head("ep0-ba1/state.pt").etag.endswith("-3")
    assert reads == []


def test_local_file_changed_after_upload_falls_back_to_reading_back(tmp_path, s3_bucket):
    store, reads = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "state.pt", 12 * MiB)
    entry = digest_file(local)
    store.put_file("ep0-ba1/state.pt", local)
    _file(local, 12 * MiB, seed=b"b")  # same size, other bytes: its ETag no longer vouches for the object
    store_ops.verify_object(store, "ep0-ba1/state.pt", entry, local=local)  # the object itself is right
    assert reads == ["ep0-ba1/state.pt"]


def test_object_unlike_the_manifest_entry_is_refused(tmp_path, s3_bucket):
    store, _ = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "state.pt", 12 * MiB)
    entry = digest_file(local)
    other = _file(tmp_path / "other.pt", 12 * MiB, seed=b"c")
    store.put_file("ep0-ba1/state.pt", other)
    with pytest.raises(CheckpointError, match="wrong checksum"):
        store_ops.verify_object(store, "ep0-ba1/state.pt", entry, local=other)
    with pytest.raises(CheckpointError, match="wrong checksum"):
        store_ops.verify_object(store, "ep0-ba1/state.pt", entry, local=local)
