"""Publishing verifies each uploaded checkpoint file in the store: each file is hashed in the
upload's own pass over it (sha256 for the manifest, the parts' md5s for the multipart ETag), the
store's ETag is checked against what was sent (no read-back of the whole object, which cost a
second transfer per save), and anything that does not match falls back to reading it back. A
download is checked against the sha256 of the bytes as they arrive."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foundry.plugins.errors import CheckpointError
from foundry.plugins.manager import open_store
from foundry.trainer.checkpoint import store_ops
from foundry.trainer.checkpoint.format import Manifest, digest_file

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


def test_multipart_upload_hashed_as_sent_and_verified_without_reading_back(tmp_path, s3_bucket):
    store, reads = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "state.pt", 20 * MiB)  # above the 8 MiB threshold: three parts
    [(path, entry)] = store_ops.upload_files(store, "ep0-ba1", [(local, "state.pt")])
    assert path == local and entry.key == "state.pt"
    assert (entry.size, entry.sha256) == (digest_file(local).size, digest_file(local).sha256)
    assert store.head("ep0-ba1/state.pt").etag.endswith("-3")
    assert reads == []


def test_small_file_sent_in_one_request_keeps_its_md5(tmp_path, s3_bucket):
    store, reads = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "extra.pt", 1 * MiB)
    [(_, entry)] = store_ops.upload_files(store, "ep0-ba1", [(local, "extra.pt")])
    assert entry == digest_file(local, "extra.pt")  # size, sha256 and the md5 the plain ETag is checked against
    assert reads == []


def test_a_store_that_hashes_nothing_gets_the_file_hashed(tmp_path):
    store = open_store(str(tmp_path / "bucket"))  # a local folder: a copy, no parts
    local = _file(tmp_path / "state.pt", 12 * MiB)
    [(_, entry)] = store_ops.upload_files(store, "ep0-ba1", [(local, "state.pt")])
    assert entry == digest_file(local, "state.pt")


def test_parts_etag_unlike_the_store_s_falls_back_to_reading_back(tmp_path, s3_bucket):
    store, reads = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "state.pt", 12 * MiB)
    entry = digest_file(local)
    store.put_file("ep0-ba1/state.pt", local)
    store_ops.verify_object(store, "ep0-ba1/state.pt", entry, parts_etag="0" * 32 + "-2")  # the object is right
    assert reads == ["ep0-ba1/state.pt"]


def test_object_unlike_the_manifest_entry_is_refused(tmp_path, s3_bucket):
    store, _ = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "state.pt", 12 * MiB)
    entry = digest_file(local)
    other = _file(tmp_path / "other.pt", 12 * MiB, seed=b"c")
    store.put_file("ep0-ba1/state.pt", other)
    with pytest.raises(CheckpointError, match="wrong checksum"):
        store_ops.verify_object(store, "ep0-ba1/state.pt", entry)
    small = _file(tmp_path / "small.pt", 1 * MiB)
    store.put_file("ep0-ba1/small.pt", _file(tmp_path / "other-small.pt", 1 * MiB, seed=b"d"))
    with pytest.raises(CheckpointError, match="wrong checksum"):
        store_ops.verify_object(store, "ep0-ba1/small.pt", digest_file(small))


def test_download_checked_against_the_bytes_as_they_arrive(tmp_path, s3_bucket):
    store, _ = _store_counting_reads(s3_bucket.url)
    local = _file(tmp_path / "state.pt", 20 * MiB)
    files = store_ops.upload_files(store, "ep0-ba1", [(local, "state.pt")])
    store_ops.publish(store, Manifest(name="ep0-ba1", run_name="r", layout="full", world_size=1, timestamp={},
                                      files=[e for _, e in files]), verified=["state.pt"])
    store_ops.download_verified(store, "ep0-ba1", tmp_path / "down")
    assert (tmp_path / "down" / "state.pt").read_bytes() == local.read_bytes()
    store.put_file("ep0-ba1/state.pt", _file(tmp_path / "other.pt", 20 * MiB, seed=b"e"))  # same size, other bytes
    with pytest.raises(CheckpointError, match="corrupt"):
        store_ops.download_verified(store, "ep0-ba1", tmp_path / "again")


def _tiny_trainer(save_folder: str, run_dir: Path, **settings):
    import torch

    from foundry.trainer import Trainer

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 1))  # ~12.6 MB with AdamW
    batches = [(torch.randn(4, 1024), torch.randn(4, 1)) for _ in range(2)]
    return Trainer(run_name="xfer", model=model, train_dataloader=batches, max_duration="2ba",
                   loss_fn=torch.nn.functional.mse_loss, save_folder=save_folder, save_interval="2ba",
                   device="cpu", run_dir=str(run_dir), progress_bar=False, **settings)


def test_checkpoint_transfer_sets_the_part_size_of_saves_and_restores(tmp_path, s3_bucket):
    xfer = {"part_size": 5 * MiB, "concurrency": 2, "multipart_threshold": 5 * MiB}
    _tiny_trainer(s3_bucket.url, tmp_path / "a", checkpoint_transfer=xfer).fit()
    store = open_store(s3_bucket.url)
    info = store.head("ep0-ba2/state.pt")
    assert info.etag.endswith(f"-{-(-info.size // (5 * MiB))}")  # 5 MiB parts, not the default 8 MiB
    resumed = _tiny_trainer(s3_bucket.url, tmp_path / "b", checkpoint_transfer=xfer, autoresume=True)
    resumed.fit(max_duration="2ba")
    assert resumed.checkpoints.resumed_from == "ep0-ba2"


@pytest.mark.parametrize("xfer, message", [
    ({"access_key_id": "AKIA..."}, "unknown setting 'access_key_id'"),
    ({"part_size": 1 << 20}, "below 5 MiB"),
    ({"concurrency": 0}, "positive int"),
    ([("part_size", 8)], "must be a dict"),
])
def test_checkpoint_transfer_takes_transfer_settings_only(xfer, message):
    from foundry.plugins.errors import ConfigError
    from foundry.trainer.config import TrainerConfig

    with pytest.raises(ConfigError, match=message):
        TrainerConfig(run_name="r", max_duration="1ba", checkpoint_transfer=xfer)
