"""Parallel transfers: atomic downloads when interrupted, GCS composition of many parts, part planning."""

from __future__ import annotations

import os

import pytest

from foundry.backends.storage.transfer import TransferConfig, part_ranges
from foundry.plugins.manager import open_store

MiB = 1 << 20


class Interrupted(Exception):
    pass


@pytest.mark.integration
def test_interrupted_download_leaves_nothing_under_the_final_name(s3_bucket, tmp_path):
    payload = os.urandom(12 * MiB)
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key="big", Body=payload)
    store = open_store(s3_bucket.url, {"part_size": 5 * MiB, "multipart_threshold": 5 * MiB, "concurrency": 2})
    dest = tmp_path / "dl" / "big"
    dest.parent.mkdir()
    dest.write_bytes(b"previous complete version")

    def crash(n: int) -> None:
        raise Interrupted

    with pytest.raises(Interrupted):
        store.get_file("big", dest, progress=crash)
    assert dest.read_bytes() == b"previous complete version"
    assert os.listdir(dest.parent) == ["big"]  # the temporary file is gone
    store.get_file("big", dest)
    assert dest.read_bytes() == payload


@pytest.mark.integration
def test_gcs_composes_more_than_32_parts(gcs_bucket, tmp_path):
    options = {"part_size": 64 * 1024, "multipart_threshold": 64 * 1024, "allow_small_parts": True, "concurrency": 8}
    store = open_store(gcs_bucket.url + "/p", options)
    payload = os.urandom(70 * 64 * 1024 + 5)  # 71 parts: two levels of compose
    (tmp_path / "src").write_bytes(payload)
    store.put_file("obj", tmp_path / "src")
    assert store.get("obj") == payload
    assert [o.key for o in store.list()] == ["obj"]  # staging parts removed


def test_part_planning():
    assert part_ranges(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert part_ranges(0, 4) == []
    config = TransferConfig()
    assert config.part_size_for(10 * MiB) == config.part_size
    assert config.part_size_for(200_000 * MiB) * 10_000 >= 200_000 * MiB  # never more than 10,000 parts
