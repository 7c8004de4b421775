"""Stream-aware batching methods (plan/batching.py): what each promises about a batch's streams, whole
global batches on resumption, refusals; and a mixed StreamingDataset that uses them end to end.
Their sample order against the real mosaicml-streaming is in test_batching_mosaic.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from foundry.plugins.errors import ConfigError
from foundry.streaming import Stream, StreamingDataLoader, StreamingDataset
from foundry.streaming.plan import OrderConfig, WorldShape, epoch_length, epoch_work, make_layout, rank_length, \
    stream_proportions
from foundry.streaming.plan.batching import resume_warning, stratified_portions

# the streams' shuffle blocks are shuffle_block_size x their proportion: smaller than these shards
pytestmark = pytest.mark.filterwarnings("ignore:shuffle_block_size is smaller")

# stream 0: ids 0..119 (3 shards), stream 1: ids 120..179 (2 shards)
SHARDS = [[40, 40, 40], [30, 30]]


def _layout(choose=(120, 60), proportion=None):
    return make_layout(SHARDS, list(choose), proportion)


def _cfg(method, batch, **kw):
    kw.setdefault("shuffle", True)
    kw.setdefault("block_size", 50)
    return OrderConfig(seed=5, batch_size=batch, batching_method=method, **kw)


def _global_batches(work: np.ndarray, world: WorldShape, batch: int) -> np.ndarray:
    """(global batches, global batch) in training order, -1 rows dropped."""
    rows = work.transpose(3, 2, 0, 1, 4).reshape(-1, world.num_ranks * batch)
    return rows[(rows != -1).any(axis=1)]


def _stream(ids):
    return np.where(ids >= 120, 1, 0)


@pytest.mark.parametrize("world", [WorldShape(), WorldShape(1, 2, 2), WorldShape(2, 2, 1)])
def test_per_stream_global_batches_come_from_one_stream(world):
    batch = 8 // world.num_ranks
    work = epoch_work(_layout(), _cfg("per_stream", batch, num_canonical_nodes=2), world, 0)
    rows = _global_batches(work, world, batch)
    kinds = _stream(rows)
    assert (kinds == kinds[:, :1]).all()  # one stream per global batch
    assert (rows >= 0).all() and len(rows) == 180 // 8  # 15 + 7 full batches; the partial ones are dropped
    assert sorted(np.bincount(kinds[:, 0]).tolist()) == [7, 15]
    assert len(set(kinds[:, 0].tolist())) == 2 and not (kinds[:7, 0] == kinds[0, 0]).all()  # the streams interleave


def test_per_stream_same_global_batches_for_any_ranks_and_workers():
    """With stream sizes that need no padding, the global batches (as sets: the world decides which
    rank reads which sample of one) do not depend on the world."""
    layout = make_layout([[32, 32], [16, 16]], [64, 32])
    seen = []
    for world in (WorldShape(), WorldShape(1, 2, 1), WorldShape(1, 4, 2), WorldShape(2, 2, 1)):
        batch = 8 // world.num_ranks
        seen.append(np.sort(_global_batches(epoch_work(layout, _cfg("per_stream", batch, num_canonical_nodes=2),
                                                       world, 1), world, batch), axis=1))
    assert all(np.array_equal(s, seen[0]) for s in seen)


def test_stratified_every_global_batch_has_each_streams_share():
    layout = _layout(proportion=[0.75, 0.25])
    world = WorldShape(1, 2, 2)
    work = epoch_work(layout, _cfg("stratified", 4), world, 0)
    rows = _global_batches(work, world, 4)
    assert (np.bincount(_stream(rows).reshape(-1), minlength=2) == [6 * len(rows), 2 * len(rows)]).all()
    assert all(sorted(np.bincount(_stream(r), minlength=2).tolist()) == [2, 6] for r in rows)
    assert len(rows) == min(120 // 6, 60 // 2) == 20
    assert len(set(rows.reshape(-1).tolist())) == rows.size  # no sample twice


def test_stratified_portions_give_the_shortfall_to_the_closest_streams():
    assert stratified_portions(np.array([0.5, 0.3, 0.2]), 8).tolist() == [4, 2, 2]  # 4, 2.4, 1.6
    assert stratified_portions(np.array([0.6, 0.4]), 10).tolist() == [6, 4]
    with pytest.raises(ConfigError, match="stream 1 gets 0 samples of each global batch of 4"):
        stratified_portions(np.array([0.95, 0.05]), 4)


@pytest.mark.parametrize("world", [WorldShape(), WorldShape(1, 2, 2), WorldShape(2, 1, 1)])
def test_device_per_stream_device_batches_come_from_one_stream(world):
    work = epoch_work(_layout(), _cfg("device_per_stream", 4, num_canonical_nodes=2), world, 0)
    device = work.reshape(-1, 4)
    device = device[(device != -1).all(axis=1)]
    kinds = _stream(device)
    assert (kinds == kinds[:, :1]).all() and len(set(kinds[:, 0].tolist())) == 2
    assert len(set(device.reshape(-1).tolist())) == device.size


@pytest.mark.parametrize("method", ["per_stream", "stratified", "device_per_stream"])
def test_resumption_starts_at_a_whole_global_batch(method):
    world, batch = WorldShape(1, 2, 2), 2
    cfg = _cfg(method, batch, num_canonical_nodes=2)
    full = _global_batches(epoch_work(_layout(), cfg, world, 1), world, batch)
    for k in (0, 3, 7):
        for extra in (0, 1, 3):  # a count within a global batch reads that batch again (mosaic: floor)
            tail = _global_batches(epoch_work(_layout(), cfg, world, 1, k * 4 + extra), world, batch)
            assert np.array_equal(tail, full[k:])


def test_stream_proportions_as_mosaic_leaves_them():
    assert stream_proportions([10, 30], [1, 3], [25, 75], None).tolist() == [0.25, 0.75]  # the weights
    assert stream_proportions([10, 30], [None, None], [5, 15], 20).tolist() == [0.25, 0.75]  # sizes
    assert stream_proportions([10, 30], [None, None], [20, 20], None).tolist() == [0.5, 0.5]  # the epoch's


def test_refusals_are_one_clear_line(make_dataset):
    data = str(make_dataset(20, 10))
    with pytest.raises(ConfigError, match="needs batch_size"):
        StreamingDataset(local=data, batching_method="per_stream")
    with pytest.raises(ConfigError, match="unknown batching_method 'mixed'"):
        StreamingDataset(local=data, batching_method="mixed", batch_size=2)
    with pytest.raises(ConfigError, match="multiple of the number of nodes"):
        epoch_work(_layout(), _cfg("device_per_stream", 2, num_canonical_nodes=3), WorldShape(2, 1, 1), 0)
    with pytest.raises(ConfigError, match="too few samples for one global batch"):
        epoch_work(make_layout([[40], [3]], [40, 3]), _cfg("per_stream", 4), WorldShape(), 0)


@pytest.fixture
def mixed(make_dataset, tmp_path):
    a, b = make_dataset(90, 10, name="a"), make_dataset(50, 10, name="b")  # global ids: a 0..89, b 90..139

    def make(method, batch=4):
        streams = [Stream(remote=str(a), local=str(tmp_path / "ca"), repeat=1.5), Stream(local=str(b), choose=40)]
        return StreamingDataset(streams=streams, shuffle=True, batch_size=batch, batching_method=method,
                                shuffle_block_size=30)

    return make


def _ids(loader, limit=None):
    out = []
    for i, b in enumerate(loader):
        out.append(b["id"].numpy())
        if limit is not None and i + 1 == limit:
            break
    return out


@pytest.mark.parametrize("method,samples", [("per_stream", (135 // 4 + 40 // 4) * 4),
                                            ("device_per_stream", (135 // 4 + 40 // 4) * 4),
                                            ("stratified", 40 * 4)])  # 3 + 1 a batch, b's 40 run out first
@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.subprocess)])  # worker processes
def test_a_mixed_dataset_reads_its_plan_and_resumes_exactly(mixed, method, samples, workers):
    ds = mixed(method)
    plan = epoch_work(ds._layout, ds._order_config(), WorldShape(), 0).reshape(-1, 4)
    plan = plan[(plan != -1).all(axis=1)]
    full = _ids(StreamingDataLoader(ds, batch_size=4, num_workers=workers))
    assert len(ds) == len(plan) * 4 == sum(len(b) for b in full) == samples
    assert np.array_equal(np.stack(full), np.where(plan >= 90, plan - 90, plan))  # the plan, as local ids
    loader = StreamingDataLoader(mixed(method), batch_size=4, num_workers=workers)
    head = _ids(loader, 5)
    again = StreamingDataLoader(mixed(method), batch_size=4, num_workers=workers)
    again.load_state_dict(loader.state_dict())
    assert np.array_equal(np.stack(head + _ids(again)), np.stack(full))


def test_resume_warning_names_the_shape_that_keeps_the_batches():
    cfg = _cfg("device_per_stream", 2, num_canonical_nodes=2)
    note = resume_warning(_layout(), cfg, (1, 2), WorldShape(1, 4, 2), 1, 16)
    assert note is not None and "\n" not in note
    assert "on 1 node(s) x 4 rank(s) than on 1 x 2" in note and "resume on 1 x 2" in note
    assert resume_warning(_layout(), cfg, (1, 4), WorldShape(1, 4, 2), 1, 16) is None  # workers do not matter
    even = make_layout([[32, 32], [16, 16]], [64, 32])
    for method in ("per_stream", "stratified"):  # the same global batches: nothing to say
        assert resume_warning(even, _cfg(method, 2, num_canonical_nodes=2), (2, 1), WorldShape(1, 4, 1), 0, 8) is None
    assert resume_warning(_layout(), _cfg("random", 2), (1, 2), WorldShape(1, 4, 1), 0, 8) is None


def test_a_state_resumed_on_another_shape_warns_when_the_batches_differ(mixed, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    ds = mixed("device_per_stream")
    next(iter(ds))
    state = ds.state_dict(16)
    assert state["world_shape"] == [1, 2]
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.warns(UserWarning, match="device_per_stream.*resume on 1 x 2"):
        mixed("device_per_stream", batch=2).load_state_dict(state)  # the same global batch, 4 ranks
    monkeypatch.setenv("WORLD_SIZE", "2")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mixed("device_per_stream").load_state_dict(state)  # the same shape: nothing to say
    assert not [w for w in seen if "batching_method" in str(w.message)]


@pytest.mark.parametrize("method", ["per_stream", "stratified", "device_per_stream"])
def test_epoch_and_rank_lengths_count_what_every_epoch_reads(method):
    world = WorldShape(2, 2, 2)
    cfg = _cfg(method, 3, num_canonical_nodes=2, sampling_method="balanced")
    layout = _layout(choose=(150, 45))  # partial draws: other samples every epoch, as many
    for epoch in (0, 1, 3):
        work = epoch_work(layout, cfg, world, epoch)
        assert epoch_length(layout, cfg, world) == (work != -1).sum()
        assert [rank_length(layout, cfg, world, n, r) for n in (0, 1) for r in (0, 1)] == \
            [(work[n, r] != -1).sum() for n in (0, 1) for r in (0, 1)]


def test_stratified_resumes_elsewhere_without_a_warning():
    """Its batches do not depend on the world (up to the epoch's last, as 'random''s)."""
    for saved, now in (((1, 1), WorldShape(1, 2, 1)), ((1, 2), WorldShape(1, 4, 2)), ((1, 4), WorldShape(2, 2, 1))):
        cfg = _cfg("stratified", 8 // now.num_ranks, num_canonical_nodes=4)
        assert resume_warning(_layout(choose=(150, 45)), cfg, saved, now, 1, 16) is None
