"""S3 fault probe, end to end: a StreamingDataset read from SeaweedFS through a proxy that injects
connection resets, 503 SlowDown and truncated bodies into 30% of requests yields exactly the
samples, in exactly the order, that the same read without faults does (hash-checked shards)."""

from __future__ import annotations

import numpy as np
import pytest

from foundry.streaming import MDSWriter, StreamingDataset
from support.fault_proxy import FaultProxy

pytestmark = pytest.mark.integration


def _epoch(url: str, cache: str) -> list[tuple[int, bytes]]:
    ds = StreamingDataset(remote=url, local=cache, shuffle=True, shuffle_seed=5, batch_size=4,
                          validate_hash="xxh64", download_timeout=30)
    return [(int(s["id"]), s["tokens"].tobytes()) for s in ds]


def test_streaming_through_30_percent_faults_reads_what_a_clean_read_does(s3_bucket, tmp_path, monkeypatch):
    url = f"{s3_bucket.url}/chaos/data"
    with MDSWriter(out=url, columns={"id": "int", "tokens": "ndarray:int64:32"}, hashes=["xxh64"],
                   size_limit=1 << 12) as writer:   # ~15 shards: many requests to fault
        for i in range(240):
            writer.write({"id": i, "tokens": np.arange(i, i + 32, dtype=np.int64)})
    clean = _epoch(url, str(tmp_path / "clean"))
    assert sorted(i for i, _ in clean) == list(range(240))
    kinds = ("reset", "slowdown", "truncate")
    with FaultProxy(s3_bucket.server.endpoint, rate=0.3, kinds=kinds, seed=11) as proxy:
        monkeypatch.setenv("S3_ENDPOINT_URL", proxy.url)
        faulty = _epoch(url, str(tmp_path / "faulty"))
    assert sum(proxy.faults.values()) >= 3, proxy.faults   # the probe really broke requests
    assert faulty == clean
