"""The ObjectStore contract, run against real servers: SeaweedFS (s3, r2), fake-gcs-server (gs),
folders, and for oci (no emulator exists) the loopback stub replaying recorded OCI responses."""

from __future__ import annotations

import os

import pytest

from foundry.plugins.errors import ConfigError, ObjectNotFoundError
from foundry.plugins.manager import open_store

MiB = 1 << 20
SMALL_PARTS = {"part_size": 5 * MiB, "multipart_threshold": 5 * MiB, "concurrency": 4}


@pytest.fixture(params=["s3", "r2", "gs", "oci", "file"])
def root_url(request, tmp_path):
    if request.param == "file":
        return str(tmp_path / "store"), {}
    if request.param == "oci":
        pytest.importorskip("oci")
        _, options = request.getfixturevalue("oci_stub")
        return "oci://bkt@ns/some/prefix", options
    if request.param in ("s3", "r2"):
        bucket = request.getfixturevalue("s3_bucket")
        return f"{request.param}://{bucket.name}/some/prefix", {}
    bucket = request.getfixturevalue("gcs_bucket")
    return f"gs://{bucket.name}/some/prefix", {}


@pytest.mark.integration
def test_put_get_range_head_list_delete(root_url):
    url, options = root_url
    store = open_store(url, options)
    store.put("a/one.bin", b"0123456789")
    store.put("a/two.bin", b"")
    store.put("b.txt", b"bee")
    assert store.get("a/one.bin") == b"0123456789"
    assert store.get("a/two.bin") == b""
    assert store.get_range("a/one.bin", 2, 5) == b"234"
    assert store.get_range("a/one.bin", 8, 100) == b"89"
    assert store.get_range("a/one.bin", 50, 60) == b""
    assert store.head("a/one.bin").size == 10
    assert store.exists("b.txt") and not store.exists("nope")
    assert [o.key for o in store.list()] == ["a/one.bin", "a/two.bin", "b.txt"]
    assert [o.key for o in store.list("a/")] == ["a/one.bin", "a/two.bin"]
    assert [(o.key, o.size) for o in store.list("b")] == [("b.txt", 3)]
    store.delete("a/one.bin")
    store.delete("a/one.bin")  # deleting a missing key is fine
    assert not store.exists("a/one.bin")
    with pytest.raises(ObjectNotFoundError):
        store.get("a/one.bin")
    with pytest.raises(ObjectNotFoundError):
        store.head("a/one.bin")
    assert store.child_url("x/y").endswith("/x/y")


@pytest.mark.integration
def test_one_level_listing(root_url):
    url, options = root_url
    store = open_store(url, options)
    for key in ["top.txt", "a/one.bin", "a/deep/x.bin", "a/deep/y.bin", "b/two.bin", "ab.txt"]:
        store.put(key, key.encode())
    root = store.list_dir()
    assert root.prefixes == ["a/", "b/"]
    assert [(o.key, o.size) for o in root.objects] == [("ab.txt", 6), ("top.txt", 7)]
    inner = store.list_dir("a")  # with or without the trailing "/"
    assert inner == store.list_dir("a/")
    assert inner.prefixes == ["a/deep/"] and [o.key for o in inner.objects] == ["a/one.bin"]
    assert store.list_dir("a/deep/").prefixes == [] and len(store.list_dir("a/deep/").objects) == 2
    assert store.list_dir("missing/").prefixes == [] and store.list_dir("missing/").objects == []


@pytest.mark.integration
def test_large_file_roundtrip_in_parallel_parts(root_url, tmp_path):
    url, options = root_url
    store = open_store(url, {**options, **SMALL_PARTS})
    payload = os.urandom(12 * MiB + 12345)
    src = tmp_path / "src.bin"
    src.write_bytes(payload)
    sent: list[int] = []
    store.put_file("big/blob.bin", src, progress=sent.append)
    assert sum(sent) == len(payload)
    assert store.head("big/blob.bin").size == len(payload)
    received: list[int] = []
    dest = tmp_path / "out" / "blob.bin"
    store.get_file("big/blob.bin", dest, progress=received.append)
    assert sum(received) == len(payload)
    assert dest.read_bytes() == payload
    assert store.get_range("big/blob.bin", 6 * MiB, 6 * MiB + 7) == payload[6 * MiB:6 * MiB + 7]
    assert [o.key for o in store.list("big/")] == ["big/blob.bin"]  # no leftover parts
    assert sorted(os.listdir(dest.parent)) == ["blob.bin"]  # no temporary files left behind


@pytest.mark.integration
def test_get_file_of_missing_key_writes_nothing(root_url, tmp_path):
    url, options = root_url
    store = open_store(url, options)
    with pytest.raises(ObjectNotFoundError):
        store.get_file("missing.bin", tmp_path / "dl" / "missing.bin")
    assert not (tmp_path / "dl" / "missing.bin").exists()


ESCAPING_KEYS = ["/etc/passwd", "../outside.bin", "a/../../outside.bin", "a/..", "nul\x00byte"]


@pytest.mark.integration
@pytest.mark.parametrize("key", ESCAPING_KEYS)
def test_keys_that_escape_the_root_are_refused(root_url, tmp_path, key):
    url, options = root_url
    store = open_store(url, options)
    store.put("inside.bin", b"ok")
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    before = sorted(p.name for p in tmp_path.iterdir())
    calls = [lambda: store.get(key), lambda: store.get_range(key, 0, 1), lambda: store.put(key, b"x"),
             lambda: store.put_file(key, src), lambda: store.get_file(key, tmp_path / "dl.bin"),
             lambda: store.head(key), lambda: store.delete(key), lambda: list(store.list(key))]
    for call in calls:
        with pytest.raises(ConfigError, match="escapes the store root"):
            call()
    assert [o.key for o in store.list()] == ["inside.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
