"""Mixtures across world sizes with real ranks: separate processes in a gloo process group (as
torchrun starts them, order_ranks.py). A proportion mixture read straight on one process for two
epochs; the same stopped in epoch 1 on 2 ranks with 2 DataLoader workers each, resumed on 3 ranks
with 1 worker: the resumed run's global sequence is the straight epoch 1."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from foundry.streaming.plan import interleave_ranks

from test_mixture_resume import write_ids  # noqa: E402 - beside this file (conftest)
from test_order_mosaic import _run  # noqa: E402

pytestmark = pytest.mark.subprocess  # real ranks

GLOBAL = 12


def test_mixture_stopped_on_two_ranks_resumes_on_three(tmp_path):
    a, b = write_ids(tmp_path / "a", 90, 0, 8), write_ids(tmp_path / "b", 47, 1000, 6)
    kw = {"streams": [{"remote": a, "proportion": 2}, {"remote": b, "proportion": 1}], "epoch_size": 150,
          "shuffle": True, "shuffle_block_size": 40}
    straight = _run(sys.executable, "foundry", 1, tmp_path, [{"kind": "epochs", "data": None, "kw": kw,
                                                              "batch": GLOBAL, "workers": 0}], "straight")[0][0][1]
    assert len(straight) == 150 and {i >= 1000 for i in straight} == {False, True}
    stopped = _run(sys.executable, "foundry", 2, tmp_path, [{"kind": "stop", "data": None, "kw": kw, "batch": GLOBAL // 2,
                                                             "workers": 2, "skip": 1, "stop": 4}], "stopped")
    state = stopped[0][0]["state"]
    assert (state["epoch"], state["sample_in_epoch"]) == (1, 4 * GLOBAL)
    assert all(r[0]["state"] == state for r in stopped)
    resumed = _run(sys.executable, "foundry", 3, tmp_path, [{"kind": "resume", "data": None, "kw": kw,
                                                             "batch": GLOBAL // 3, "workers": 1, "state": state}], "resumed")
    head = interleave_ranks([r[0]["ids"] for r in stopped], 1, 2)
    tail = interleave_ranks([r[0] for r in resumed], 1, 3)
    assert np.array_equal(np.concatenate([head, tail])[:150], straight)
