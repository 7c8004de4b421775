"""Mixing streams: proportion, repeat, choose, epoch_size — deterministic like the rest."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from foundry.plugins.errors import ConfigError
from foundry.streaming import Stream, StreamingDataLoader, StreamingDataset
from foundry.streaming.plan import WorldShape, epoch_work, rank_ids


def _epoch_ids(ds, epoch):
    """Global sample ids one process reads in `epoch`."""
    return rank_ids(epoch_work(ds._layout, ds._order_config(), WorldShape(), epoch), 0, 0)


def _source(ids):
    return Counter("a" if i < 1000 else "b" for i in ids)


@pytest.fixture
def two(make_dataset, tmp_path):
    a = make_dataset(60, 10, name="a")
    b = make_dataset(40, 10, name="b")
    return a, b, tmp_path


def test_streams_repeat_and_choose(two):
    a, b, tmp = two
    ds = StreamingDataset(streams=[Stream(remote=str(a), local=str(tmp / "ca"), repeat=2),
                                   Stream(local=str(b), choose=10)], shuffle=True, batch_size=5)
    assert ds.num_samples == ds.size == 100 and ds.epoch_size == len(ds) == 120 + 10
    order = _epoch_ids(ds, 0)  # global ids: stream a is 0..59, stream b 60..99
    assert np.array_equal(np.bincount(order[order < 60], minlength=60), np.full(60, 2))
    assert len(set(order[order >= 60].tolist())) == 10 and (order >= 60).sum() == 10
    assert len([s for s in ds]) == 130
    assert not np.array_equal(order, _epoch_ids(ds, 1))


def test_streams_proportion_with_epoch_size_is_deterministic(two):
    a, b, tmp = two

    def make():
        return StreamingDataset(streams=[Stream(local=str(a), proportion=3), Stream(local=str(b), proportion=1)],
                                epoch_size=80, shuffle=True, batch_size=4, shuffle_seed=7)

    first = make()
    e0 = [s["id"] for s in first]
    assert len(e0) == 80
    assert e0 == [s["id"] for s in make()]
    # 60 from a (all of it), 20 drawn from b: ids of b are 0..39, of a 0..59 -> count a's by global order
    glob = _epoch_ids(first, 0)
    assert (glob < 60).sum() == 60 and (glob >= 60).sum() == 20


def test_streams_resume_exactly(two):
    a, b, tmp = two

    def loader():
        ds = StreamingDataset(streams=[Stream(local=str(a), repeat=0.5), Stream(local=str(b), repeat=1.5)],
                              shuffle=True, batch_size=4)
        return StreamingDataLoader(ds, batch_size=4, num_workers=2)

    full = np.concatenate([x["id"].numpy() for x in loader()])
    first = loader()
    head = []
    for i, x in enumerate(first):
        head.append(x["id"].numpy())
        if i == 6:
            break
    second = loader()
    second.load_state_dict(first.state_dict())
    tail = [x["id"].numpy() for x in second]
    assert np.array_equal(np.concatenate(head + tail), full)


def test_stream_config_errors(two):
    a, b, tmp = two
    with pytest.raises(ConfigError):
        Stream(local=str(a), proportion=1, repeat=2)
    with pytest.raises(ConfigError, match="every stream sets proportion"):
        StreamingDataset(streams=[Stream(local=str(a), proportion=1), Stream(local=str(b))])
    with pytest.raises(ConfigError, match="not both"):
        StreamingDataset(remote=str(a), streams=[Stream(local=str(b))])
