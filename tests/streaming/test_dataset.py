"""StreamingDataset end to end on a file:// remote: coverage, len, random access, DataLoader
workers and ranks, epochs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from foundry.plugins.errors import ConfigError, DataError
from foundry.streaming import StreamingDataset
from foundry.streaming.plan import interleave_ranks


def test_plain_iteration_yields_every_sample_once(make_dataset, tmp_path, sample_payload):
    remote = make_dataset(103, 10, compression="zstd")
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), shuffle=True, batch_size=1)
    samples = list(ds)
    assert sorted(s["id"] for s in samples) == list(range(103))
    assert all(s["data"] == sample_payload(s["id"]) for s in samples)
    assert len(ds) == 103 and ds.num_samples == 103


def test_one_process_reads_every_sample_once_whatever_the_batch(make_dataset, tmp_path):
    ds = StreamingDataset(local=str(make_dataset(103, 10)), shuffle=True, batch_size=8)
    ids = [s["id"] for s in ds]
    assert len(ids) == len(ds) == 103
    assert sorted(ids) == list(range(103))


def test_random_access_fetches_only_that_shard(make_dataset, tmp_path, sample_payload):
    remote = make_dataset(100, 10)
    cache = tmp_path / "cache"
    ds = StreamingDataset(remote=str(remote), local=str(cache))
    assert ds[57] == {"id": 57, "data": sample_payload(57)}
    assert ds[-1]["id"] == 99
    assert sorted(p.name for p in cache.glob("shard.*")) == ["shard.00005.mds", "shard.00009.mds"]
    with pytest.raises(IndexError):
        ds[100]


def test_missing_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="index.json"):
        StreamingDataset(local=str(tmp_path / "nothing"))


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_dataloader_workers_do_not_change_the_batches(make_dataset, tmp_path, workers):
    remote = make_dataset(200, 16)

    def batches(w):
        ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), shuffle=True, batch_size=4,
                              shuffle_block_size=50)
        return np.concatenate([b["id"].numpy() for b in DataLoader(ds, batch_size=4, num_workers=w)])

    ref = batches(0)
    assert sorted(ref.tolist()) == list(range(200))
    assert np.array_equal(batches(workers), ref)


@pytest.mark.parametrize("world,workers", [(2, 0), (4, 2), (8, 1)])
def test_same_global_batches_for_any_world_size(make_dataset, tmp_path, ranks_iter, world, workers):
    remote = make_dataset(150, 16)
    global_batch = 8

    def make(batch):
        return StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), shuffle=True, batch_size=batch,
                                num_canonical_nodes=2, shuffle_block_size=40)

    ref = ranks_iter(make, 1, 0, global_batch)
    got = ranks_iter(make, world, workers, global_batch // world)
    assert sorted(ref.tolist()) == list(range(150))
    # the same sequence; ranks that cannot share the last samples evenly repeat a few (< world)
    assert np.array_equal(got[:150], ref) and len(got) - 150 == (-150) % world


def test_epochs_advance_and_differ(make_dataset, tmp_path):
    ds = StreamingDataset(local=str(make_dataset(60, 10)), shuffle=True, batch_size=2)
    e0, e1 = [s["id"] for s in ds], [s["id"] for s in ds]
    assert sorted(e0) == sorted(e1) == list(range(60)) and e0 != e1
    # a DataLoader with workers (fork) continues the count; so does a persistent-worker loader
    e2 = np.concatenate([b["id"].numpy() for b in DataLoader(ds, batch_size=2, num_workers=2)]).tolist()
    fresh = StreamingDataset(local=str(ds.streams[0].local), shuffle=True, batch_size=2)
    expected = [[s["id"] for s in fresh] for _ in range(3)]
    assert [e0, e1, e2] == expected
    loader = DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True)
    e3 = np.concatenate([b["id"].numpy() for b in loader]).tolist()
    e4 = np.concatenate([b["id"].numpy() for b in loader]).tolist()
    expected += [[s["id"] for s in fresh] for _ in range(2)]
    assert [e3, e4] == expected[3:]


@pytest.mark.subprocess
def test_two_real_ranks_with_two_workers_each(make_dataset, tmp_path):
    """Two processes joined by torch.distributed (gloo), each with 2 DataLoader workers, one cache."""
    remote = make_dataset(120, 10, compression="zstd")
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    script = Path(__file__).with_name("rank_worker.py")
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", str(remote), str(cache), str(out)])
             for r in range(2)]
    assert [p.wait(180) for p in procs] == [0, 0]
    got = interleave_ranks([np.load(f"{out}.{r}.npy") for r in range(2)], 1, 2)
    ref = StreamingDataset(remote=str(remote), local=str(cache), shuffle=True, batch_size=8, shuffle_block_size=30)
    assert np.array_equal(got, np.array([s["id"] for s in ref]))
    assert sorted(got.tolist()) == list(range(120))


def test_two_nodes_default_canonical_nodes_and_node_local_shards(make_dataset, tmp_path, monkeypatch):
    """WORLD_SIZE=4 with LOCAL_WORLD_SIZE=2 is two nodes: two canonical nodes by default, and the
    order equals a one-rank run told num_canonical_nodes=2; each node reads half of the shards."""
    remote = make_dataset(160, 10)
    per_rank, node_shards = [], [set(), set()]
    for rank in range(4):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "4")
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        ds = StreamingDataset(remote=str(remote), local=str(tmp_path / f"node{rank // 2}"), shuffle=True, batch_size=2)
        per_rank.append(np.stack([b["id"].numpy() for b in DataLoader(ds, batch_size=2)]))
        node_shards[rank // 2] |= {i // 10 for i in per_rank[-1].ravel().tolist()}
        assert ds.state_dict()["num_canonical_nodes"] == 2
    for var in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var)
    got = interleave_ranks(per_rank, 2, 2)
    ref = StreamingDataset(remote=str(remote), local=str(tmp_path / "one"), shuffle=True, batch_size=8,
                           num_canonical_nodes=2)
    assert np.array_equal(got, [s["id"] for s in ref])
    assert not node_shards[0] & node_shards[1] and len(node_shards[0] | node_shards[1]) == 16
    assert len(list((tmp_path / "node0").glob("shard.*"))) == 8


@pytest.mark.parametrize("kw,match", [
    ({"shuffle_algo": "py1b"}, "py1b.*does not exist in mosaicml-streaming 0.13"),
    ({"shuffle_algo": "py9"}, "unknown shuffle_algo"),
    ({"batching_method": "fancy"}, "unknown batching_method"),
    ({"partition_algo": "fancy"}, "unknown partition_algo"),
    ({"sampling_method": "random"}, "unknown sampling_method"),
    ({"replication": 2}, "replication"),
    ({"shuffle_seed": -1}, "non-negative"),
])
def test_what_cannot_match_mosaic_is_refused_at_construction(make_dataset, kw, match):
    with pytest.raises(ConfigError, match=match) as err:
        StreamingDataset(local=str(make_dataset(20, 10)), batch_size=2, **kw)
    assert "\n" not in str(err.value)


@pytest.mark.subprocess
def test_an_iterator_left_unfinished_at_exit_prints_nothing(make_dataset, tmp_path):
    where = f"remote={str(make_dataset(300, 10, compression='zstd'))!r}, local={str(tmp_path / 'cache')!r}"
    script = ("import time\n"
              "from foundry.streaming import StreamingDataset\n"
              "from foundry.streaming.cache.shards import ShardCache\n"
              "real = ShardCache._decompress_into\n"
              "def slow(*a, **k):\n"
              "    time.sleep(0.2)\n"  # prefetch threads still at work when the interpreter exits
              "    return real(*a, **k)\n"
              "ShardCache._decompress_into = slow\n"
              f"it = iter(StreamingDataset({where}, shuffle=True, batch_size=4))\n"
              "next(it)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
