"""ReadPolicy (plan/iteration.py): one iteration's read decisions, made once from the topology, the
process's role and the streams, and carried by that iteration only."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from foundry.streaming import MDSWriter, StreamingDataset
from foundry.streaming.cache import Evictor, decompress_slot
from foundry.streaming.plan.iteration import ReadPolicy
from foundry.streaming.read.pool import ReaderPool
from foundry.streaming.read.source import DatasetShards


def _decide(**kw):
    facts = dict(alone_on_node=True, in_worker=False, far_store=False, on_this_machine=True,
                 transforms_samples=False, worker_batches=False)
    return ReadPolicy.decide(**{**facts, **kw})


def test_the_node_only_reader_lends_its_core_reads_early_and_prefetches_after_its_first_sample():
    p = _decide(far_store=True, on_this_machine=False)
    assert p.lend_reader_core and p.framed_early and p.ranged_early and p.mapped and p.own_repeats
    assert not p.prefetch_after_first  # some stream has a remote: prefetch from the start
    assert _decide().prefetch_after_first and not _decide().ranged_early  # no far store: no ranged reads


def test_one_of_several_ranks_on_a_node_shares_the_node_download():
    p = _decide(alone_on_node=False, far_store=True)
    assert not p.ranged_early and not p.lend_reader_core and not p.prefetch_after_first
    assert p.framed_early  # frames of a local compressed file cost no download


def test_a_dataloader_worker_reads_with_pread_makes_batches_and_reads_nothing_early():
    p = _decide(in_worker=True, far_store=True, worker_batches=True)
    assert not p.mapped and not p.framed_early and not p.ranged_early and not p.own_repeats
    assert p.batches_in_worker and p.reads_rows
    assert not _decide(in_worker=True, worker_batches=True, transforms_samples=True).reads_rows
    assert not _decide(worker_batches=True).batches_in_worker  # the main process never makes worker batches


def test_early_reading_switches_off_alone():
    on, off = _decide(far_store=True), _decide(far_store=True, early=False)
    assert not off.framed_early and not off.ranged_early
    changed = {f.name for f in dataclasses.fields(ReadPolicy) if getattr(on, f.name) != getattr(off, f.name)}
    assert changed == {"framed_early", "ranged_early"}


def test_a_policy_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        _decide().mapped = False


class _Locator:
    """What DatasetShards asks of the streams' caches: records whether each make-local may lend."""

    far_remote = False

    def __init__(self, seen):
        self.seen = seen

    def ensure(self, shard):
        self.seen.append((shard, decompress_slot.SLOT.lends()))


def test_two_datasets_in_one_process_keep_their_own_lending_decision():
    seen: list = []
    locator = _Locator(seen)
    readers = ReaderPool([], locator.ensure, False)
    alone = DatasetShards(locator, readers, Evictor([], None), _decide(alone_on_node=True))
    shared = DatasetShards(locator, readers, Evictor([], None), _decide(alone_on_node=False))
    alone.ensure(0)
    shared.ensure(1)  # once a process global: this iteration's decision overwrote the other's
    alone.ensure(2)
    threads = [threading.Thread(target=src.ensure, args=(k,)) for k, src in ((3, alone), (4, shared))]
    for t in threads:  # prefetch threads carry their own iteration's decision too
        t.start()
        t.join(10)
    assert seen == [(0, True), (1, False), (2, True), (3, True), (4, False)]
    assert not decompress_slot.SLOT.lends()  # outside an iteration's call: nothing lent


def test_two_datasets_iterated_together_each_read_their_own_samples(tmp_path):
    for name, base in (("a", 0), ("b", 1000)):
        with MDSWriter(out=str(tmp_path / name), columns={"id": "int"}, compression="zstd", size_limit=1 << 10) as w:
            for i in range(200):
                w.write({"id": base + i})
    a = StreamingDataset(local=str(tmp_path / "a"), batch_size=4)
    b = StreamingDataset(local=str(tmp_path / "b"), batch_size=4)
    got_a, got_b = [], []
    for x, y in zip(a, b):  # two iterations alive in one process, interleaved
        got_a.append(int(x["id"]))
        got_b.append(int(y["id"]))
    assert got_a == list(range(200)) and got_b == list(range(1000, 1200))
    assert np.all(np.asarray(got_b) >= 1000)


def test_an_iteration_without_early_reads_opens_every_shard_whole():
    from foundry.streaming.read.early.opener import EarlyOpener

    asked: list = []

    class Locator:  # a compressed shard not yet whole, if anyone asks
        def unready_local_zip(self, shard):
            asked.append(shard)
            return "shard.mds.zstd"

    off = EarlyOpener(Locator(), [], False, _decide(early=False), lambda shard: None)
    off.open_soon([0, 1])
    assert off.open(0) is None and asked == []  # nothing early is even looked at
    worker = EarlyOpener(Locator(), [], False, _decide(in_worker=True), lambda shard: None)
    assert worker.open(0) is None and asked == []
