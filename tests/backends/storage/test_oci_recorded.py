"""oci:// against a loopback stub replaying OCI Object Storage responses (tests/support/oci_stub.py;
no OCI emulator exists): request shapes, multipart, error mapping. The shared store contract runs
against the same stub in test_store_contract.py."""

from __future__ import annotations

import os

import pytest

oci = pytest.importorskip("oci")

from foundry.plugins.errors import (  # noqa: E402
    BucketNotFoundError, ConfigError, CredentialsError, ObjectNotFoundError, TransientStorageError,
)
from foundry.plugins.manager import open_store  # noqa: E402

MiB = 1 << 20


def test_operations_and_request_shapes(oci_stub, tmp_path):
    stub, options = oci_stub
    store = open_store("oci://bkt@ns/pre", options)
    store.put("a/1", b"one")
    store.put("a/2", b"two")
    store.put("b", b"bee")
    put = stub.requests[0]
    assert (put["method"], put["path"]) == ("PUT", "/n/ns/b/bkt/o/pre%2Fa%2F1")  # the SDK escapes "/" in names
    assert put["headers"].get("authorization", put["headers"].get("Authorization", "")).startswith("Signature ")
    assert store.get("a/1") == b"one"
    assert store.get_range("a/2", 1, 3) == b"wo"
    assert stub.requests[-1]["headers"].get("range") == "bytes=1-2"
    assert store.get_range("a/2", 10, 20) == b""
    assert store.head("b").size == 3
    assert [o.key for o in store.list()] == ["a/1", "a/2", "b"]  # two pages
    listing = [r for r in stub.requests if r["method"] == "GET" and r["path"] == "/n/ns/b/bkt/o"]
    assert listing[0]["query"]["prefix"] == "pre/" and "start" in listing[-1]["query"]
    assert [o.key for o in store.list("a/")] == ["a/1", "a/2"]
    store.delete("b")
    store.delete("b")  # missing is fine
    assert not store.exists("b")
    with pytest.raises(ObjectNotFoundError, match="no such object: oci://bkt@ns/pre/b"):
        store.get("b")


def test_multipart_upload_and_parallel_download(oci_stub, tmp_path):
    stub, options = oci_stub
    store = open_store("oci://bkt@ns", {**options, "part_size": 5 * MiB, "multipart_threshold": 5 * MiB})
    payload = os.urandom(11 * MiB)
    (tmp_path / "src").write_bytes(payload)
    store.put_file("big", tmp_path / "src")
    shapes = [(r["method"], r["path"], tuple(sorted(r["query"]))) for r in stub.requests]
    assert shapes[0] == ("POST", "/n/ns/b/bkt/u", ())
    assert sorted(s for s in shapes if s[0] == "PUT") == [("PUT", "/n/ns/b/bkt/u/big", ("uploadId", "uploadPartNum"))] * 3
    assert shapes[-1] == ("POST", "/n/ns/b/bkt/u/big", ("uploadId",))
    assert stub.objects["big"] == payload
    store.get_file("big", tmp_path / "dl")
    assert (tmp_path / "dl").read_bytes() == payload


def test_error_mapping_and_retries(oci_stub):
    stub, options = oci_stub
    store = open_store("oci://bkt@ns", {**options, "attempts": 3})
    stub.fail = [(429, "TooManyRequests"), (503, "ServiceUnavailable")]
    store.put("k", b"v")  # third attempt succeeds
    assert stub.objects["k"] == b"v"
    stub.fail = [(503, "ServiceUnavailable")] * 3
    with pytest.raises(TransientStorageError, match="after 3 attempts"):
        store.get("k")
    stub.fail = [(401, "NotAuthenticated")]
    with pytest.raises(CredentialsError):
        store.get("k")
    assert stub.fail == []  # not retried
    with pytest.raises(BucketNotFoundError):
        open_store("oci://other@ns", options).get("k")
    stub.fail = [(404, "NotAuthorizedOrNotFound")]
    with pytest.raises(BucketNotFoundError, match="not visible"):
        store.get("k")


def test_bad_urls_and_missing_config(tmp_path):
    with pytest.raises(ConfigError, match="BUCKET@NAMESPACE"):
        open_store("oci://bucket/x")
    store = open_store("oci://b@ns", {"config_file": str(tmp_path / "missing")})
    with pytest.raises(CredentialsError) as info:
        store.get("k")
    assert "foundry create secret oci" in info.value.hint
