"""The node's use schedule under a cache limit (streaming/cache/schedule.py): what counts as in
flight when a reader does not know where the node's other readers are, and the size it announces."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from foundry.streaming.cache import Evictor, UseSchedule


def test_a_shard_the_reader_ahead_fetched_is_in_flight_for_the_one_behind():
    # one rank, two workers, one sample per batch: shard k is used once, at tick k, by worker k % 2
    schedule = UseSchedule.build([np.arange(60)], per_batch=1, worker=0, num_workers=2)
    lookahead = schedule.lookahead(1)  # each worker fetches its next batch ahead
    own = 20
    slowest = schedule.tick(own // 2)  # worker 0 is at tick 20; the others within `lag` of it
    assert slowest == own - schedule.lag
    fastest_fetches = own + schedule.lag + lookahead
    flying = schedule.in_flight(list(range(60)), slowest, lookahead)
    assert np.flatnonzero(flying).tolist() == list(range(slowest, fastest_fetches + 1))


def test_the_announced_size_holds_every_shard_in_flight_at_any_tick():
    rng = np.random.default_rng(0)
    ranks = [np.concatenate([rng.permutation(block) for block in np.repeat(np.arange(30), 4).reshape(10, 12)])
             for _ in range(2)]  # each shard read over a few ticks, as a block shuffle does
    schedule = UseSchedule.build(ranks, per_batch=4, worker=1, num_workers=2)
    sizes = rng.integers(100, 1000, size=30)
    lookahead = schedule.lookahead(4)
    widest = max(int(sizes[schedule.in_flight(list(range(30)), tick, lookahead)].sum())
                 for tick in range(-40, 80))
    assert schedule.peak_in_flight(sizes, lookahead) == widest


class _Cache:
    """Shards of one byte each, downloadable again; 0, 1 and 2 are local."""

    evictable, keep_zip = True, False

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        self.shards = [SimpleNamespace(raw_bytes=1, zip_bytes=None) for _ in range(4)]
        self.present = {0, 1, 2}

    def present_bytes(self, i):
        return int(i in self.present)

    def last_used(self, i):
        return 0.0

    def evict(self, i):
        self.present.discard(i)
        return 1


def test_a_shard_still_to_be_read_again_is_kept_before_one_not_fetched_yet(tmp_path):
    # one reader: shard 0 at ticks 0 and 10, shard 1 (left from the last epoch) at 5, shard 2 at 1
    schedule = UseSchedule.build([np.array([0, 2, 3, 3, 3, 1, 3, 3, 3, 3, 0])], per_batch=1)
    cache = _Cache(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Evictor([cache], limit=2).maybe_evict(lambda: ({2}, 1), schedule)
    # shard 0 is used farthest away, but evicting it downloads it twice; shard 1 comes once anyway
    assert cache.present == {0, 2}
    assert not caught
