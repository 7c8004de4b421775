"""Retries against SeaweedFS behind a fault-injecting proxy (resets, 503 SlowDown, stalls, short reads)."""

from __future__ import annotations

import os
import time

import pytest

from foundry.plugins.errors import TransientStorageError
from foundry.plugins.manager import open_store
from support.fault_proxy import FaultProxy

pytestmark = pytest.mark.integration
MiB = 1 << 20


def _options(s3_bucket, proxy, attempts, read_timeout=0.5):
    return {
        **s3_bucket.options,
        "endpoint_url": proxy.url,
        "attempts": attempts,
        "retry_base_delay": 0.01,
        "retry_max_delay": 0.1,
        "read_timeout": read_timeout,
        "connect_timeout": 0.5,
        "part_size": 5 * MiB,
        "multipart_threshold": 5 * MiB,
        "concurrency": 4,
    }


def test_every_operation_succeeds_at_20_percent_faults(s3_bucket, tmp_path):
    payload = os.urandom(11 * MiB + 7)
    src = tmp_path / "src.bin"
    src.write_bytes(payload)
    # read_timeout well above a loaded machine's slowest honest answer, so only stalls time out
    # a stall costs a whole read timeout: make it rarer than the other kinds
    kinds = ("reset",) * 3 + ("slowdown",) * 3 + ("truncate",) * 3 + ("stall",)
    with FaultProxy(s3_bucket.server.endpoint, rate=0.2, kinds=kinds, stall_s=2.5, seed=7) as proxy:
        store = open_store(s3_bucket.url + "/data", _options(s3_bucket, proxy, attempts=12, read_timeout=1.5))
        for i in range(8):
            store.put(f"small/{i}", bytes([i]) * 1000)
        store.put_file("big.bin", src)
        assert [store.get(f"small/{i}") for i in range(8)] == [bytes([i]) * 1000 for i in range(8)]
        assert store.get_range("big.bin", 5 * MiB - 3, 5 * MiB + 3) == payload[5 * MiB - 3:5 * MiB + 3]
        store.get_file("big.bin", tmp_path / "copy.bin")
        assert (tmp_path / "copy.bin").read_bytes() == payload
        assert [o.key for o in store.list()] == ["big.bin"] + [f"small/{i}" for i in range(8)]
        for i in range(8):
            store.delete(f"small/{i}")
        assert [o.key for o in store.list()] == ["big.bin"]
        assert store.head("big.bin").size == len(payload)
    assert sum(proxy.faults.values()) > 0 and len(proxy.faults) >= 3, proxy.faults
    # the server holds exactly the bytes we sent
    assert s3_bucket.client().get_object(Bucket=s3_bucket.name, Key="data/big.bin")["Body"].read() == payload


@pytest.mark.parametrize("kind", ["reset", "slowdown", "stall"])
def test_all_faults_give_a_clear_error_after_the_configured_attempts(s3_bucket, kind):
    with FaultProxy(s3_bucket.server.endpoint, rate=1.0, kinds=(kind,), stall_s=2.0) as proxy:
        store = open_store(s3_bucket.url, _options(s3_bucket, proxy, attempts=3))
        started = time.monotonic()
        with pytest.raises(TransientStorageError) as info:
            store.put("k", b"v")
        elapsed = time.monotonic() - started
    assert "after 3 attempts" in info.value.message
    assert info.value.hint
    assert proxy.requests == 3  # attempts means attempts: botocore did not retry on its own
    # bounded, not hanging: 3 attempts of at most the 0.5 s read timeout plus short backoff take ~2 s on
    # an idle machine; botocore's own timeouts and retries would take minutes (a guard, not a timing)
    assert elapsed < 60


@pytest.mark.parametrize("mode", ["standard", "adaptive"])
def test_botocore_retry_modes_leave_a_cut_body_to_the_caller_the_policy_retries_it(s3_bucket, mode):
    """Why the backends keep one RetryPolicy with the SDKs' own retries off (docs/storage.md):
    botocore's retry modes wrap the request, not the reading of its body, so a GET whose body is cut
    halfway reaches the caller after one request. The policy retries it like any transient fault."""
    import boto3
    from botocore.config import Config

    payload = os.urandom(MiB)
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key="cut.bin", Body=payload)
    with FaultProxy(s3_bucket.server.endpoint, rate=1.0, kinds=("truncate",)) as proxy:
        server = s3_bucket.server
        sdk = boto3.session.Session().client(
            "s3", endpoint_url=proxy.url, aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key, region_name=server.region,
            config=Config(retries={"mode": mode, "max_attempts": 5}, response_checksum_validation="when_required"))
        with pytest.raises(Exception):
            sdk.get_object(Bucket=s3_bucket.name, Key="cut.bin")["Body"].read()
        assert proxy.requests == 1  # max_attempts=5, yet no second request
        store = open_store(s3_bucket.url, _options(s3_bucket, proxy, attempts=3))
        with pytest.raises(TransientStorageError, match="after 3 attempts"):
            store.get("cut.bin")
        assert proxy.requests == 1 + 3
        proxy.rate = 0.0
        assert store.get("cut.bin") == payload
