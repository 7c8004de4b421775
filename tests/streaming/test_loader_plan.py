"""StreamingDataLoader plans each epoch once, in its own process, for all the workers it starts;
the workers yield exactly what they yield when each plans for itself."""

from __future__ import annotations

import os

import numpy as np
import pytest

import foundry.streaming.dataset as dataset_module
from foundry.streaming import StreamingDataLoader, StreamingDataset


def _log_plans(monkeypatch, log):
    """Append the pid of every process that builds a whole epoch's plan to `log` (forked workers too)."""
    real = dataset_module.epoch_work

    def logged(*args, **kwargs):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(dataset_module, "epoch_work", logged)


def _loader(data, resume_at, **kw):
    ds = StreamingDataset(local=str(data), batch_size=4, shuffle=True, shuffle_block_size=40)
    if resume_at:
        ds.load_state_dict({"epoch": 0, "sample_in_epoch": resume_at, "shuffle_seed": 9176})
    return StreamingDataLoader(ds, batch_size=4, num_workers=2, **kw)


def _epochs(loader, n=2):
    return [np.concatenate([b["id"].numpy() for b in loader]) for _ in range(n)]


@pytest.mark.parametrize("resume_at", [0, 24])
def test_the_loader_plans_once_and_its_workers_yield_the_same(make_dataset, monkeypatch, tmp_path, resume_at):
    data = make_dataset(101, 9)
    log = tmp_path / "plans.log"
    _log_plans(monkeypatch, log)
    planned = _epochs(_loader(data, resume_at))
    assert log.read_text().split() == [str(os.getpid())] * 2  # one plan per epoch, none in a worker
    log.unlink()
    monkeypatch.delattr(StreamingDataset, "planned_for_workers")  # every worker plans for itself
    unplanned = _epochs(_loader(data, resume_at))
    assert len(log.read_text().split()) == 4 and str(os.getpid()) not in log.read_text().split()
    assert all(np.array_equal(a, b) for a, b in zip(planned, unplanned))
    assert len(planned[0]) == 101 - resume_at and sorted(planned[1]) == list(range(101))


def test_the_plan_does_not_stay_in_the_loaders_process(make_dataset):
    loader = _loader(make_dataset(40, 9), 0)
    assert len(np.concatenate([b["id"].numpy() for b in loader])) == 40
    assert loader.dataset._work_cache is None
