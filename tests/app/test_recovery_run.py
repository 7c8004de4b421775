"""The recovery ledger of a real run on the local cluster: a trainer killed by the system (SIGKILL) after
its checkpoint at batch 6, relaunched by the watchdog from it, completing; the ledger says the loss,
its detection and restart times, the steps redone, and a goodput below 1."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from foundry.app.control import ACTIVE_STATUSES
from support.control import wait_for

pytestmark = pytest.mark.subprocess

TRAINER_TESTS = Path(__file__).resolve().parents[1] / "trainer"

JOB = textwrap.dedent("""
    import os, sys, time, torch
    sys.path.insert(0, sys.argv[1])
    from toy_job import ToyLoader, ToyModel
    from foundry.trainer import Trainer

    class Hold:   # resumption 0 stops after batch 7 (checkpoint at 6) until the test kills it
        def batch_end(self, t):
            time.sleep(0.05)
            if t.timestamp.batch == 7 and os.environ["RESUMPTION_INDEX"] == "0":
                open(os.path.join(os.environ["FOUNDRY_RUN_DIR"], "at-7"), "w").close()
                time.sleep(120)

    torch.manual_seed(0)
    model = ToyModel(0.0, 8, 16)
    Trainer(run_name="ledger", model=model, train_dataloader=ToyLoader(0, 1), max_duration="12ba",
            optimizers=torch.optim.SGD(model.parameters(), lr=0.01), save_folder=sys.argv[2],
            save_interval="3ba", autoresume=True, progress_bar=False, device="cpu", callbacks=[Hold()]).fit()
""")


def test_a_lost_and_relaunched_run_has_its_ledger(cp, tmp_path):
    run = cp.create_run({"name": "ledger", "scheduling": {"max_retries": 1},
                         "command": [sys.executable, "-c", JOB, str(TRAINER_TESTS), str(tmp_path / "ckpt")]})
    wait_for(lambda: (cp.paths.run_dir("ledger") / "at-7").exists(), 120, what="batch 7")
    pidfile = cp.paths.resumption_dir("ledger", 0) / "ranks" / "rank-0.pid"
    os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    done = wait_for(lambda: (r := cp.get_run("ledger")).latest.index == 1 and r.status not in ACTIVE_STATUSES
                    and r, 180, what="the retry ended")
    assert done.status == "completed", "\n".join(list(cp.logs("ledger", resumption=1))[-40:])
    lost, retry = cp.run_ledger(done).entries
    assert (lost.ended, retry.ended, retry.cause) == ("lost", "completed", "retry")
    assert lost.detect_s is not None and lost.detect_s >= 0
    assert lost.restart_s is not None and lost.restart_s > 0
    assert retry.steps == (7, 12)                                # resumed from the checkpoint of batch 6
    # it got at least to the checkpoint; what it did past it shows as far as its flushed rows go
    assert lost.steps[1] >= 6 and lost.steps_redone == lost.steps[1] - 6 and lost.lost_s is not None
    ledger = cp.run_ledger(done)
    assert 0 < ledger.useful_s < ledger.wall_s and 0 < ledger.goodput < 1
    assert run.name == "ledger"
