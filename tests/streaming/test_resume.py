"""Exact resumption: StreamingDataLoader counts what it yielded; a new dataset continues right after,
with workers, across a change in the number of ranks; states that do not fit are refused."""

from __future__ import annotations

import numpy as np
import pytest

from foundry.plugins.errors import DataError
from foundry.streaming import StreamingDataLoader, StreamingDataset
from foundry.streaming.plan import interleave_ranks


def _ds(path, batch, **kw):
    kw.setdefault("shuffle", True)
    kw.setdefault("shuffle_block_size", 40)
    return StreamingDataset(local=str(path), batch_size=batch, **kw)


def _ids(loader, limit=None):
    out = []
    for i, b in enumerate(loader):
        out.append(b["id"].numpy())
        if limit is not None and i + 1 == limit:
            break
    return out


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stop", [1, 5, 12])
def test_resume_continues_exactly_with_workers(make_dataset, workers, stop):
    data = make_dataset(101, 9)
    full = np.concatenate(_ids(StreamingDataLoader(_ds(data, 4), batch_size=4, num_workers=workers)))
    loader = StreamingDataLoader(_ds(data, 4), batch_size=4, num_workers=workers)
    head = _ids(loader, stop)
    state = loader.state_dict()
    assert state["epoch"] == 0 and state["sample_in_epoch"] == 4 * stop
    assert {"num_canonical_nodes", "shuffle_seed", "initial_physical_nodes"} <= set(state)
    resumed = StreamingDataLoader(_ds(data, 4), batch_size=4, num_workers=workers)
    resumed.load_state_dict(state)
    tail = _ids(resumed)
    assert np.array_equal(np.concatenate(head + tail), full)
    # the following epoch is epoch 1, the same as uninterrupted
    ref = _ds(data, 4)
    list(ref)
    assert np.array_equal(np.concatenate(_ids(resumed)), np.array([s["id"] for s in ref]))


def test_resume_at_any_sample_without_a_loader(make_dataset):
    data = make_dataset(50, 7)
    full = [s["id"] for s in _ds(data, 1)]
    for k in (0, 1, 17, 49, 50):
        ds = _ds(data, 1)
        it = iter(ds)
        head = [next(it)["id"] for _ in range(k)]
        state = ds.state_dict(k)
        again = _ds(data, 1)
        again.load_state_dict(state)
        tail = [s["id"] for s in again]
        if k == 50:  # a finished epoch resumes at the start of the next one
            assert state["epoch"] == 1 and state["sample_in_epoch"] == 0
            assert sorted(tail) == list(range(50))
        else:
            assert head + tail == full


@pytest.mark.parametrize("before,after", [(2, 4), (4, 1), (1, 2)])
def test_resume_on_a_different_number_of_ranks(make_dataset, monkeypatch, before, after):
    data = make_dataset(130, 11)
    g = 8

    def run(world, state=None, stop=None):
        per_rank, states = [], []
        for rank in range(world):
            monkeypatch.setenv("RANK", str(rank))
            monkeypatch.setenv("WORLD_SIZE", str(world))
            loader = StreamingDataLoader(_ds(data, g // world, num_canonical_nodes=2), batch_size=g // world)
            if state:
                loader.load_state_dict(state)
            per_rank.append(np.concatenate(_ids(loader, stop)))
            states.append(loader.state_dict())
        assert all(s == states[0] for s in states)
        return interleave_ranks(per_rank, 1, world), states[0]  # RANK/WORLD_SIZE only: one node

    full, _ = run(1)
    assert sorted(full.tolist()) == list(range(130))
    head, state = run(before, stop=6)
    assert state["sample_in_epoch"] == 6 * g
    tail, _ = run(after, state=state)
    # the same global sequence; ranks that cannot split the rest evenly repeat a few (< ranks)
    got = np.concatenate([head, tail])
    assert np.array_equal(got[:130], full) and len(got) - 130 == (-(130 - 6 * g)) % after


def test_mismatched_states_are_refused(make_dataset, monkeypatch):
    data = make_dataset(40, 8)
    ds = _ds(data, 4)
    it = iter(ds)
    [next(it) for _ in range(8)]
    state = ds.state_dict(8)
    with pytest.raises(DataError, match="shuffle_seed"):
        _ds(data, 4, shuffle_seed=1).load_state_dict(state)
    with pytest.raises(DataError, match="different data"):
        _ds(make_dataset(41, 8, name="other"), 4).load_state_dict(state)
    with pytest.raises(DataError, match="global batch"):
        _ds(data, 2).load_state_dict(state)
    with pytest.raises(DataError, match="num_canonical_nodes"):
        _ds(data, 4, num_canonical_nodes=3).load_state_dict(state)
    with pytest.raises(DataError, match="lacks"):
        _ds(data, 4).load_state_dict({"epoch": 0})
    monkeypatch.setenv("WORLD_SIZE", "2")
    unbatched = StreamingDataset(local=str(data), shuffle=True)
    unbatched.load_state_dict(state)  # batch size unknown until iteration: checked there
    with pytest.raises(DataError, match="global batch"):
        next(iter(unbatched))


def test_resume_is_fast_and_downloads_nothing_consumed(make_dataset, tmp_path):
    remote = make_dataset(400, 20)
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "c"), shuffle=False, batch_size=10)
    ds.load_state_dict({"epoch": 0, "sample_in_epoch": 300, "shuffle_seed": 9176, "num_canonical_nodes": 1})
    ids = [s["id"] for s in ds]
    assert ids == list(range(300, 400))
    assert sorted(p.name for p in (tmp_path / "c").glob("shard.*")) == [f"shard.{k:05d}.mds" for k in range(15, 20)]


def test_loader_state_after_a_full_epoch_points_at_the_next(make_dataset):
    data = make_dataset(48, 8)
    loader = StreamingDataLoader(_ds(data, 4), batch_size=4, num_workers=2, persistent_workers=True)
    first = _ids(loader)
    state = loader.state_dict()
    assert (state["epoch"], state["sample_in_epoch"]) == (1, 0)
    second = _ids(loader)  # the persistent workers continue with epoch 1
    fresh = StreamingDataLoader(_ds(data, 4), batch_size=4)
    fresh.load_state_dict(state)
    assert np.array_equal(np.concatenate(_ids(fresh)), np.concatenate(second))
    assert not np.array_equal(np.concatenate(first), np.concatenate(second))
