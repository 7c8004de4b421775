"""Writing to a store: background uploads confirmed with head, index.json strictly last."""

from __future__ import annotations

import threading

import pytest

from foundry.backends.storage.file import FileStore
from foundry.plugins.errors import DataError, StorageError
from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.manager import open_store, register_plugin, unregister_plugin
from foundry.plugins.storage import StorageURL
from foundry.streaming.format import decompress, load_index
from foundry.streaming.writer import JSONWriter, MDSWriter


class RecordingStore(FileStore):
    """A file store under `root` that records every call, and can fail one key's upload."""

    root_dir = None
    calls: list[tuple[str, str]] = []
    fail_key: str | None = None
    lock = threading.Lock()

    @classmethod
    def from_url(cls, url, options=None):
        store = cls(cls.root_dir / StorageURL.parse(url).bucket)
        store.url = url
        return store

    def _record(self, op, key):
        with self.lock:
            self.calls.append((op, key))

    def put(self, key, data):
        self._record("put", key)
        super().put(key, data)

    def put_file(self, key, path, progress=None):
        if key == self.fail_key:
            raise StorageError(f"injected failure for {key}")
        self._record("put_file", key)
        super().put_file(key, path, progress)

    def head(self, key):
        self._record("head", key)
        return super().head(key)


class _Plugin:
    @hookimpl
    def register_storage(self, register):
        register("rec", RecordingStore)


@pytest.fixture
def rec(tmp_path):
    RecordingStore.root_dir = tmp_path / "store"
    RecordingStore.calls = []
    RecordingStore.fail_key = None
    name = register_plugin(_Plugin(), name="recording-store")
    try:
        yield RecordingStore
    finally:
        unregister_plugin(name)


def _write(out, n=200, **kw):
    with MDSWriter(out=out, columns={"id": "int", "text": "str"}, size_limit=500, **kw) as w:
        for i in range(n):
            w.write({"id": i, "text": "t" * (i % 13)})


def test_index_is_uploaded_last_after_every_shard_is_confirmed(rec, tmp_path):
    _write("rec://bucket/ds", compression="zstd", hashes=["sha1"])
    calls = rec.calls
    assert calls[-1] == ("put", "index.json")
    shards = load_index((tmp_path / "store" / "bucket" / "index.json").read_bytes())
    assert len(shards) > 5
    for info in shards:
        assert ("put_file", info.remote_basename) in calls and ("head", info.remote_basename) in calls
        assert calls.index(("head", info.remote_basename)) < len(calls) - 1
    stored = sorted(p.name for p in (tmp_path / "store" / "bucket").iterdir())
    assert stored == sorted(["index.json"] + [s.remote_basename for s in shards])  # no raw files remotely


def test_a_failed_upload_fails_finish_and_writes_no_index(rec, tmp_path):
    rec.fail_key = "shard.00002.mds"
    with pytest.raises(StorageError, match="injected"):
        _write("rec://bucket/ds")
    assert not (tmp_path / "store" / "bucket" / "index.json").exists()


def test_file_url_out_stages_in_a_temporary_dir(tmp_path):
    remote = tmp_path / "remote"
    _write(remote.as_uri(), compression="gz", hashes=["xxh64"])
    shards = load_index((remote / "index.json").read_bytes())
    assert all(p.name == "index.json" or p.name.endswith(".gz") for p in remote.iterdir())
    data = decompress("gz", (remote / shards[0].remote_basename).read_bytes())
    assert len(data) == shards[0].raw_bytes
    store = open_store(remote.as_uri())
    assert store.exists("index.json")


def test_local_and_remote_pair_keeps_the_local_copy(tmp_path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    _write((str(local), remote.as_uri()), compression="zstd")
    assert (local / "index.json").read_bytes() == (remote / "index.json").read_bytes()
    shards = load_index((local / "index.json").read_bytes())
    # the local copy is what was uploaded: compressed shards only, as mosaicml-streaming keeps it
    assert sorted(p.name for p in local.iterdir()) == sorted(p.name for p in remote.iterdir())
    assert not any((remote / s.raw_basename).exists() for s in shards)


def test_an_existing_remote_dataset_is_not_overwritten(tmp_path):
    remote = (tmp_path / "remote").as_uri()
    _write(remote, n=5)
    with pytest.raises(DataError, match="already holds"):
        _write(remote, n=5)
    _write(remote, n=7, exist_ok=True)
    assert sum(s.samples for s in load_index((tmp_path / "remote" / "index.json").read_bytes())) == 7


def test_split_format_uploads_data_and_meta(rec, tmp_path):
    with JSONWriter(out="rec://bucket/j", columns={"a": "int"}, size_limit=100) as w:
        for i in range(50):
            w.write({"a": i})
    shards = load_index((tmp_path / "store" / "bucket" / "index.json").read_bytes())
    keys = {k for op, k in rec.calls if op == "head" and k != "index.json"}
    assert keys == {f.remote_basename for s in shards for f in s.files}
    assert rec.calls[-1] == ("put", "index.json")


@pytest.mark.integration
def test_write_to_seaweedfs(s3_bucket, tmp_path):
    url = f"{s3_bucket.url}/datasets/demo"
    _write(url, n=300, compression="zstd", hashes=["sha1"])
    store = open_store(url)
    shards = load_index(store.get("index.json"))
    assert sum(s.samples for s in shards) == 300
    keys = [o.key for o in store.list()]
    assert sorted(keys) == sorted(["index.json"] + [s.remote_basename for s in shards])
