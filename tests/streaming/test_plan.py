"""Properties of the pure epoch plan: coverage, disjoint ranks, world-size and worker invariance."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundry.plugins.errors import ConfigError
from foundry.streaming.plan import (
    OrderConfig,
    choose_counts,
    epoch_order,
    make_layout,
    padded_length,
    rank_batches,
    worker_samples,
)

ALGOS = ["py1e", "py1b", "py1s", "naive"]


def _layout(shard_sizes):
    return make_layout([shard_sizes], [sum(shard_sizes)])


def _global_batches_from_ranks(order, g, world, workers):
    """Rebuild the global batch sequence the way DataLoaders on `world` ranks would yield it."""
    per_rank = []
    for rank in range(world):
        batches = rank_batches(order, g, world, rank)
        streams = [worker_samples(batches, w, workers).reshape(-1, g // world) for w in range(workers)]
        seq = []  # DataLoader round-robin over workers
        for i in range(len(batches)):
            seq.append(streams[i % workers][i // workers])
        per_rank.append(np.stack(seq) if seq else np.zeros((0, g // world), dtype=np.int64))
    return np.concatenate(per_rank, axis=1).reshape(-1)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    per_device=st.sampled_from([1, 2, 3, 4]),
    canonical=st.sampled_from([1, 2, 3, 4, 8]),
    workers=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 2**31 - 1),
    epoch=st.integers(0, 3),
    shuffle=st.booleans(),
    algo=st.sampled_from(ALGOS),
)
def test_epoch_covers_every_sample_once_and_is_world_size_invariant(sizes, per_device, canonical, workers, seed, epoch, shuffle, algo):
    layout = _layout(sizes)
    n = sum(sizes)
    g = per_device * 8  # divisible by 1, 2, 4, 8 ranks
    cfg = OrderConfig(seed=seed, shuffle=shuffle, algo=algo, block_size=7, num_canonical_nodes=canonical, global_batch=g)
    order = epoch_order(layout, cfg, epoch)
    assert len(order) == padded_length(n, g)
    # every sample exactly once, plus at most g-1 documented padding repeats
    counts = np.bincount(order, minlength=n)
    assert (counts >= 1).all()
    assert counts.sum() - n == len(order) - n < g
    # rebuilt from 1, 2, 4, 8 ranks with any worker count: the same global batch sequence
    for world in (1, 2, 4, 8):
        assert np.array_equal(_global_batches_from_ranks(order, g, world, workers), order)
    # ranks are disjoint positions of the order
    pieces = [rank_batches(order, g, 4, r).reshape(-1) for r in range(4)]
    assert sum(len(p) for p in pieces) == len(order)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=8),
    g=st.sampled_from([4, 8, 12]),
    world=st.sampled_from([1, 2, 4]),
    data=st.data(),
)
def test_resume_from_any_position_continues_exactly(sizes, g, world, data):
    layout = _layout(sizes)
    order = epoch_order(layout, OrderConfig(seed=3, shuffle=True, num_canonical_nodes=2, global_batch=g), 1)
    start = data.draw(st.integers(0, len(order)))
    rest = np.concatenate([rank_batches(order, g, world, r, start) for r in range(world)], axis=1).reshape(-1)
    assert np.array_equal(rest[: len(order) - start], order[start:])


def test_order_depends_only_on_seed_epoch_canonical_nodes_and_global_batch():
    layout = _layout([100] * 10)
    base = OrderConfig(seed=1, shuffle=True, num_canonical_nodes=2, global_batch=16, block_size=64)
    a = epoch_order(layout, base, 0)
    assert np.array_equal(a, epoch_order(layout, base, 0))
    for other in (
        OrderConfig(seed=2, shuffle=True, num_canonical_nodes=2, global_batch=16, block_size=64),
        OrderConfig(seed=1, shuffle=True, num_canonical_nodes=4, global_batch=16, block_size=64),
    ):
        assert not np.array_equal(a, epoch_order(layout, other, 0))
    assert not np.array_equal(a, epoch_order(layout, base, 1))


def test_shuffle_is_shard_local():
    """py1e keeps each rank's reads within a window of shards: few distinct shards per 100 samples."""
    sizes = [500] * 40
    layout = _layout(sizes)
    order = epoch_order(layout, OrderConfig(seed=5, shuffle=True, num_canonical_nodes=1, global_batch=1, block_size=1000), 0)
    shards = order // 500
    windows = [len(set(shards[i:i + 100].tolist())) for i in range(0, len(order), 100)]
    assert max(windows) <= 4
    assert not np.array_equal(order, np.arange(len(order)))


def test_no_shuffle_single_node_is_sequential():
    layout = _layout([5, 7, 3])
    order = epoch_order(layout, OrderConfig(shuffle=False, global_batch=5), 0)
    assert np.array_equal(order, np.arange(15))


def test_canonical_nodes_each_read_their_own_span():
    layout = _layout([100] * 8)
    order = epoch_order(layout, OrderConfig(seed=0, shuffle=True, num_canonical_nodes=4, global_batch=8), 0)
    shards_per_rank = [set((rank_batches(order, 8, 4, r).reshape(-1) // 100).tolist()) for r in range(4)]
    assert all(len(s) == 2 for s in shards_per_rank)
    assert set().union(*shards_per_rank) == set(range(8))


def test_bad_world_size_is_a_clear_error():
    order = np.arange(12)
    with pytest.raises(ConfigError, match="not divisible"):
        rank_batches(order, 12, 5, 0)


def test_choose_counts_rules():
    assert choose_counts([10, 20], [None, None], [None, 2], [None, None], None).tolist() == [10, 40]
    assert choose_counts([10, 20], [None, None], [None, None], [5, None], None).tolist() == [5, 20]
    assert choose_counts([10, 20], [1, 3], [None, None], [None, None], 100).tolist() == [25, 75]
    assert choose_counts([10, 20], [None, None], [None, None], [None, None], 15).tolist() == [5, 10]
    with pytest.raises(ConfigError):
        choose_counts([10, 20], [1, None], [None, None], [None, None], None)


def test_mixed_streams_draw_the_requested_counts_deterministically():
    layout = make_layout([[10, 10], [30]], [5, 70])
    cfg = OrderConfig(seed=11, shuffle=True, num_canonical_nodes=1, global_batch=5)
    order = epoch_order(layout, cfg, 0)
    assert len(order) == 75
    assert (order < 20).sum() == 5 and len(set(order[order < 20].tolist())) == 5
    counts = np.bincount(order[order >= 20] - 20, minlength=30)
    assert counts.min() == 2 and counts.max() == 3
    assert np.array_equal(order, epoch_order(layout, cfg, 0))
    assert not np.array_equal(np.sort(order[order < 20]), np.sort(epoch_order(layout, cfg, 1)[epoch_order(layout, cfg, 1) < 20]))
    fixed = OrderConfig(seed=11, shuffle=True, num_canonical_nodes=1, global_batch=5, sampling_method="fixed")
    e0, e1 = epoch_order(layout, fixed, 0), epoch_order(layout, fixed, 1)
    assert np.array_equal(np.sort(e0), np.sort(e1))


def test_golden_order_is_stable_across_releases():
    """Changing the order breaks every resumed run: update the golden file only on purpose."""
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).parent / "golden" / "order_seed1234.json").read_text())
    layout = make_layout(golden["shard_sizes"], golden["choose"])
    for key, expected in golden["orders"].items():
        algo, epoch = key.split("/")
        cfg = OrderConfig(seed=golden["seed"], shuffle=True, algo=algo, block_size=golden["block_size"],
                          num_canonical_nodes=golden["num_canonical_nodes"], global_batch=golden["global_batch"])
        assert epoch_order(layout, cfg, int(epoch)).tolist() == expected, key
