"""A cache limit below the data an epoch reads (issue 15.10): eviction follows the node's use
schedule, so a cache that holds the shards in flight downloads each shard once per epoch; a
smaller one warns once, with the size that fixes it."""

from __future__ import annotations

import re
import sys
import warnings
from collections import Counter

import numpy as np
import pytest
from torch.utils.data import DataLoader

from foundry.streaming import StreamingDataset

SHARDS, PER_SHARD, BATCH = 40, 10, 4


def _warnings_to_stderr(_worker_id):
    """pytest records warnings; a forked worker's record is lost, so workers print theirs."""
    warnings.showwarning = lambda message, category, *a, **k: print(f"{category.__name__}: {message}", file=sys.stderr)


def _epoch(ds, workers):
    if not workers:
        return [s["id"] for s in ds]
    loader = DataLoader(ds, batch_size=BATCH, num_workers=workers, worker_init_fn=_warnings_to_stderr)
    return np.concatenate([b["id"].numpy() for b in loader]).tolist()


@pytest.mark.parametrize("workers", [0, 2])
def test_cache_holding_the_shards_in_flight_downloads_each_shard_once(make_dataset, logged, tmp_path, capfd,
                                                                      workers):
    remote = make_dataset(SHARDS * PER_SHARD, PER_SHARD)
    shard_bytes = (remote / "shard.00000.mds").stat().st_size
    kw = dict(remote=logged.url(remote), shuffle=True, shuffle_algo="py1e", shuffle_block_size=60,
              batch_size=BATCH, predownload=BATCH)
    # Too small: shards are evicted before their last use and come back; one warning says how much is enough.
    small = StreamingDataset(local=str(tmp_path / "small"), cache_limit=4 * shard_bytes, **kw)  # the least mosaic allows
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert sorted(_epoch(small, workers)) == list(range(SHARDS * PER_SHARD))
    # DataLoader workers warn on their own stderr, once per process
    said = [str(w.message) for w in caught] + capfd.readouterr().err.splitlines()
    thrash = [m for m in said if "download them again" in m]
    assert len(thrash) == max(1, workers), said
    need = int(re.search(r"at least (\d+) bytes", thrash[0]).group(1))
    if workers:  # a worker re-downloads what the other evicted before it opened it
        assert sum(Counter(logged.downloads(remote)).values()) > SHARDS
    assert 4 * shard_bytes < need < SHARDS * shard_bytes * 3 // 4  # eviction is needed at that size too
    (remote.parent / f"{remote.name}.log").unlink()

    enough = StreamingDataset(local=str(tmp_path / "enough"), cache_limit=need, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = Counter()
        for epoch in range(2):
            assert sorted(_epoch(enough, workers)) == list(range(SHARDS * PER_SHARD))
            counts = Counter(logged.downloads(remote))
            assert set((counts - before).values()) <= {1}, counts - before  # at most once per epoch
            assert len(counts) == SHARDS and set(counts.values()) <= {1, 2}
            before = counts
            assert len(list((tmp_path / "enough").glob("shard.*"))) * shard_bytes <= need
    assert not [m for m in [str(w.message) for w in caught] + capfd.readouterr().err.splitlines() if "cache" in m]
