"""PartDigests: the hash of a transfer's parts, fed out of order by worker threads, equals the
file's; a failed part wakes the parts waiting for their turn (a transfer never hangs on it)."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from foundry.backends.storage.transfer import TransferConfig, parallel_download, parallel_upload_parts
from foundry.plugins.part_digests import PartDigests, current_digests, digesting

MiB = 1 << 20


def test_parts_fed_out_of_order_hash_like_the_whole(tmp_path):
    data = os.urandom(5 * MiB + 123)
    parts = [(start, data[start:start + MiB]) for start in range(0, len(data), MiB)]
    digests = PartDigests(part_md5=True)
    threads = [threading.Thread(target=digests.feed, args=part) for part in reversed(parts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert digests.size == len(data)
    assert digests.sha256 == hashlib.sha256(data).hexdigest()
    md5s = b"".join(hashlib.md5(p).digest() for _, p in parts)
    assert digests.multipart_etag() == f"{hashlib.md5(md5s).hexdigest()}-{len(parts)}"


def test_transfers_feed_the_enclosing_digests(tmp_path):
    data = os.urandom(3 * MiB + 7)
    src = tmp_path / "src"
    src.write_bytes(data)
    config = TransferConfig(part_size=MiB, concurrency=4)
    with digesting(part_md5=True) as up:
        parallel_upload_parts(src, len(data), lambda n, d: n, config)
    with digesting() as down:
        parallel_download(tmp_path / "dst", len(data), lambda s, e: data[s:e], config)
    assert current_digests() is None
    assert up.sha256 == down.sha256 == hashlib.sha256(data).hexdigest()
    assert len(up.part_md5s) == 4 and down.part_md5s == []


def test_a_failed_part_ends_the_transfer_instead_of_hanging(tmp_path):
    data = os.urandom(4 * MiB)

    def fetch(start: int, end: int) -> bytes:
        if start == 0:
            raise OSError("first part lost")
        return data[start:end]

    with digesting(), pytest.raises(OSError, match="first part lost"):
        parallel_download(tmp_path / "dst", len(data), fetch, TransferConfig(part_size=MiB, concurrency=4))
