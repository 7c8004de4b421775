"""The hot loop on its own: an EpochPlan and a fake shard source, no dataset, no files."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from foundry.streaming.format.contract import SampleReader
from foundry.streaming.read.iterator import iterate
from foundry.streaming.plan.iteration import EpochPlan, ReadPolicy


class FakeShards:
    """Shards as lists of samples; records what the loop asks for."""

    def __init__(self, shards: dict[int, list]):
        self.shards = shards
        self.ensured: list[int] = []
        self.opened: list[int] = []
        self.open_now: set[int] = set()
        self.peak_open = 0
        self.evict_calls = 0
        self._lock = threading.Lock()

    def ensure(self, shard):
        with self._lock:
            self.ensured.append(shard)

    def open_soon(self, shards):
        pass

    def open(self, shard):
        fake = self

        class Reader(SampleReader):
            def __len__(self):
                return len(fake.shards[shard])

            def get_sample(self, j):
                assert shard in fake.open_now, "read after close"
                return fake.shards[shard][j]

            def get_sample_bytes(self, j):
                return repr(self.get_sample(j)).encode()

            def close(self):
                fake.open_now.discard(shard)

        self.opened.append(shard)
        self.open_now.add(shard)
        self.peak_open = max(self.peak_open, len(self.open_now))
        return Reader()

    def after_fetch(self, where):
        keep, position = where()
        assert isinstance(keep, set) and position >= 0
        self.evict_calls += 1


def _plan(order, per_shard, **kw):
    ids = np.asarray(order)
    return EpochPlan(ids // per_shard, ids % per_shard, window=kw.pop("window", 8), **kw)


@pytest.mark.parametrize("prefetch", [False, True])
def test_yields_the_plan_in_order_and_opens_each_shard_once(prefetch):
    per = 5
    source = FakeShards({k: [f"s{k * per + j}" for j in range(per)] for k in range(6)})
    rng = np.random.default_rng(0)
    order = np.concatenate([rng.permutation(np.arange(b, b + 10)) for b in range(0, 30, 10)])
    got = list(iterate(_plan(order, per, prefetch=prefetch, threads=2), source, ReadPolicy()))
    assert got == [f"s{i}" for i in order]
    assert sorted(source.opened) == list(range(6))  # once each, in first-use order
    assert source.opened == list(dict.fromkeys((order // per).tolist()))
    assert not source.open_now  # every reader closed
    assert source.peak_open <= 3  # closed after its last use, not at the end
    assert len(source.ensured) == len(set(source.ensured)) and set(source.ensured) <= set(range(6))
    if not prefetch:
        assert source.ensured == []
    assert source.evict_calls >= 6


def test_closing_the_iterator_early_closes_its_readers():
    source = FakeShards({k: list(range(4)) for k in range(4)})
    it = iterate(_plan(np.arange(16), 4, prefetch=True), source, ReadPolicy())
    assert [next(it) for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    it.close()
    assert not source.open_now


def test_empty_plan_yields_nothing():
    assert list(iterate(_plan(np.zeros(0, dtype=np.int64), 4, prefetch=True), FakeShards({}), ReadPolicy())) == []


def test_a_plan_on_this_machine_prefetches_only_once_the_first_sample_is_out():
    source = FakeShards({k: list(range(4)) for k in range(4)})
    fetched = threading.Event()
    real_ensure = source.ensure

    def ensure(shard):
        real_ensure(shard)
        fetched.set()

    source.ensure = ensure
    it = iterate(_plan(np.arange(16), 4, prefetch=True), source, ReadPolicy(prefetch_after_first=True))
    assert next(it) == 0
    assert not fetched.wait(0.2) and source.ensured == []  # not while the first sample was made
    assert next(it) == 1
    assert fetched.wait(10)  # and from then on
    assert list(it) == [2, 3] + [0, 1, 2, 3] * 3


def test_a_prefetcher_never_started_closes(tmp_path):
    from foundry.streaming.cache import Prefetcher

    calls: list[int] = []
    prefetcher = Prefetcher(calls.append, [0, 1], [0, 5], window=8, start=False)
    prefetcher.advance(3)
    prefetcher.close(wait=True)
    prefetcher.start()  # after close: nothing
    assert calls == []


def test_a_prefetcher_closes_after_the_interpreter_tore_down_its_module_globals(monkeypatch):
    """An iterator left unfinished at exit can be finalized after its modules' globals are None."""
    import foundry.streaming.cache.prefetch as prefetch_module

    prefetcher = prefetch_module.Prefetcher(lambda shard: None, [0], [0], window=8)
    monkeypatch.setattr(prefetch_module, "sys", None)
    prefetcher.close(wait=True)
