"""A shard deleted from the local cache in the middle of an epoch is fetched again (issue 29.4), as
mosaicml-streaming's get_item fetches a shard whose file is gone: every sample of the epoch still
comes, once, and a shard read from after the deletion is in the cache again, also one that was open
when its file went. Tried repeatedly: which shards are local or open when the deletion comes
depends on the prefetcher's timing and the order."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
from torch.utils.data import DataLoader

import foundry.streaming.read.iterator as iterator_module
import foundry.streaming.read.pool as readers_module
from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset

N, PER_SHARD, BATCH = 600, 10, 4
TRIES = 6


def _delete(local, rng: random.Random, how: str) -> int:
    """Delete local shard files as a user (or a cleaner) would; returns how many went."""
    files = sorted(p for p in local.glob("shard.*"))
    if how == "all":
        victims = files
    elif how == "folder":
        shutil.rmtree(local, ignore_errors=True)  # the cache's own state folder with it
        return len(files)
    else:
        victims = rng.sample(files, min(len(files), 3))
    for p in victims:
        p.unlink(missing_ok=True)
    return len(victims)


@pytest.fixture(autouse=True)
def look_at_every_run(monkeypatch):
    """The iterator looks for deleted shards once a second; these epochs take less."""
    monkeypatch.setattr(iterator_module, "RECHECK_S", 0.0)


def _epoch_with_deletions(remote_url: str, local, seed: int, how: str, loader=None, workers: int = 0,
                          at: tuple[int, ...] = (20, 160, 240)) -> list[int]:
    ds = StreamingDataset(remote=remote_url, local=str(local), shuffle=True, shuffle_seed=seed, batch_size=BATCH,
                          predownload=8 * BATCH)
    rng = random.Random(seed)
    ids: list[int] = []
    batches = loader(ds, batch_size=BATCH, num_workers=workers) if loader else None
    for k, item in enumerate(batches if batches is not None else ds):
        ids.extend(item["id"].tolist() if batches is not None else [int(item["id"])])
        if (k * BATCH if batches is not None else k) in at:
            _delete(local, rng, how)
    return ids


@pytest.mark.parametrize("how", ["some", "all", "folder"])
def test_shards_deleted_mid_epoch_are_fetched_again(make_dataset, tmp_path, how):
    remote = make_dataset(N, PER_SHARD)
    for seed in range(TRIES):
        local = tmp_path / f"cache-{seed}"
        at = 20
        ids = _epoch_with_deletions(f"file://{remote}", local, seed, how, at=(at,))
        assert sorted(ids) == list(range(N)), seed
        # every shard read from again after the deletion (past the reader's next look) is in the
        # cache again, as mosaic fetches a shard whose file is gone at its next sample
        needed = {i // PER_SHARD for i in ids[at + 256:]}
        assert needed and all((local / f"shard.{s:05}.mds").exists() for s in needed), seed


def test_a_sample_looked_up_after_its_shard_was_deleted_fetches_it_again(make_dataset, tmp_path, monkeypatch):
    monkeypatch.setattr(readers_module, "RECHECK_S", 0.0)
    remote = make_dataset(40, 10)
    ds = StreamingDataset(remote=f"file://{remote}", local=str(tmp_path / "cache"))
    assert ds[15]["id"] == 15
    (tmp_path / "cache" / "shard.00001.mds").unlink()
    assert ds[16]["id"] == 16 and (tmp_path / "cache" / "shard.00001.mds").exists()


@pytest.mark.subprocess  # DataLoader workers
@pytest.mark.parametrize("loader", [DataLoader, StreamingDataLoader])
def test_shards_deleted_mid_epoch_are_fetched_again_by_dataloader_workers(make_dataset, tmp_path, loader):
    remote = make_dataset(N, PER_SHARD)
    for seed in range(TRIES):
        for how in ("some", "all"):
            local = tmp_path / f"cache-{seed}-{how}"
            got = _epoch_with_deletions(f"file://{remote}", local, seed, how, loader, workers=2)
            assert sorted(got) == list(range(N)), (seed, how)


@pytest.mark.slow
@pytest.mark.integration
def test_shards_deleted_mid_epoch_are_fetched_again_from_s3(s3_bucket, tmp_path):
    url = f"{s3_bucket.url}/ds"
    with MDSWriter(out=url, columns={"id": "int", "x": "ndarray:int32:64"}, size_limit=2000) as w:
        for i in range(N):
            w.write({"id": i, "x": np.full(64, i, np.int32)})
    for seed in range(TRIES):
        for how in ("some", "all", "folder"):
            got = _epoch_with_deletions(url, tmp_path / f"cache-{seed}-{how}", seed, how)
            assert sorted(got) == list(range(N)), (seed, how)
