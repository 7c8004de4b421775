"""While forked DataLoader workers run, the objects they share with the main process are frozen out
of garbage collection (streaming/read/fork_gc.py), and so are a plain loop's objects from before its
epoch; afterwards they are not, and nothing leaks."""

import gc
import weakref

import numpy as np
import pytest

from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset
from foundry.streaming.read import fork_gc


class _Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture
def data(tmp_path):
    with MDSWriter(out=str(tmp_path / "data"), columns={"x": "ndarray:int32:4"}) as writer:
        for i in range(40):
            writer.write({"x": np.full(4, i, np.int32)})
    return str(tmp_path / "data")


@pytest.fixture
def thawed():
    gc.collect()  # an epoch an earlier test left for the collector
    assert fork_gc._holders == 0 and gc.get_freeze_count() == 0
    yield
    gc.unfreeze()  # the test's own freeze


def _loader(data, **kw):
    return StreamingDataLoader(StreamingDataset(local=data, batch_size=4), batch_size=4, num_workers=2, **kw)


def test_frozen_while_forked_workers_run_and_garbage_from_before_is_collected_after(data, thawed):
    garbage = _Node()
    gone = weakref.ref(garbage)
    del garbage
    during = []
    for _ in _loader(data, multiprocessing_context="fork"):
        during.append(gc.get_freeze_count())
    assert min(during) > 0
    assert gc.get_freeze_count() == 0  # the workers are gone: thawed
    gc.collect()
    assert gone() is None


def test_two_loaders_thaw_when_the_last_one_stops(data, thawed):
    first = iter(_loader(data, multiprocessing_context="fork"))
    next(first)
    second = list(_loader(data, multiprocessing_context="fork"))
    assert second and gc.get_freeze_count() > 0  # the first one's workers still run
    del first
    assert gc.get_freeze_count() == 0


def test_persistent_workers_hold_it_for_each_epoch(data, thawed):
    loader = _loader(data, multiprocessing_context="fork", persistent_workers=True)
    for _ in range(2):
        during = [gc.get_freeze_count() for _ in loader]
        assert len(during) == 10 and min(during) > 0
        assert gc.get_freeze_count() == 0  # between epochs, workers alive or not


def test_an_epoch_never_started_still_thaws(data, thawed):
    batches = iter(_loader(data, multiprocessing_context="fork"))
    assert gc.get_freeze_count() > 0
    del batches
    assert gc.get_freeze_count() == 0


@pytest.mark.subprocess
def test_a_freeze_of_the_program_own_and_spawned_workers_are_left_alone(data, thawed):
    assert len(list(_loader(data, multiprocessing_context="spawn"))) == 10
    assert gc.get_freeze_count() == 0
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    during = [(gc.get_freeze_count(), fork_gc._ours) for _ in _loader(data, multiprocessing_context="fork")]
    assert len(during) == 10 and not any(ours for _, ours in during)
    # Not thawed, and not frozen again (that would add every object made since). Frozen objects
    # freed by their reference counts leave the count, so it may drop: the spawn loader's threads
    # wind down while this runs (an exact count failed once in a hundred suites).
    assert 0 < gc.get_freeze_count() <= frozen
    assert max(count for count, _ in during) <= frozen


def test_a_plain_loop_leaves_what_was_alive_before_its_epoch_out_of_collections(data, thawed):
    """A full collection inside the epoch walks only what the epoch made (one over torch and a
    model costs tens of ms); the epoch's end, or its iterator dropped, thaws."""
    before = _Node()
    garbage = _Node()
    gone = weakref.ref(garbage)
    del garbage
    dataset = StreamingDataset(local=data, batch_size=4)
    seen = 0
    for _ in dataset:
        if seen == 3:
            assert gc.get_freeze_count() > 0
            assert not any(o is before for o in gc.get_objects(generation=2))
            gc.collect()
            assert gone() is not None  # cyclic garbage from before waits for the epoch's end
        seen += 1
    assert seen == 40 and gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None and any(o is before for o in gc.get_objects(generation=2))

    samples = iter(dataset)
    next(samples)
    assert gc.get_freeze_count() > 0
    del samples  # a loop left early
    assert gc.get_freeze_count() == 0
