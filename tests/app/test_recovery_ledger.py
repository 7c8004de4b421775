"""The recovery ledger and goodput (app/control/recovery.py), from registry rows and metrics rows."""

from __future__ import annotations

from foundry.app.control.models import Resumption, RunInfo
from foundry.app.control.recovery import ledger


def run_of(*resumptions: Resumption, status: str) -> RunInfo:
    return RunInfo(name="r", id="id", status=status, cluster="a", nodes=1, devices=1, created_at=99.0,
                   updated_at=0.0, max_retries=1, retries_used=0, spec={}, resumptions=list(resumptions))


def steps(resumption: int, first: int, last: int, t0: float) -> list[dict]:
    """A step row per step, one second apart, the first at t0."""
    return [{"step": s, "loss": 1.0, "throughput": 1.0, "time": t0 + s - first, "resumption": resumption}
            for s in range(first, last + 1)]


def test_a_loss_then_a_retry_that_completes():
    lost = Resumption(0, "spot", "slurm", 1, 1, "lost", started_at=100.0, ended_at=120.0,
                      exit_reason="slurm job node_fail")
    retry = Resumption(1, "fleet", "local", 1, 2, "completed", started_at=121.0, ended_at=136.0, cause="failover")
    records = (steps(0, 1, 10, 101.0)                  # steps 1..10 at 101..110, checkpoint after 6
               + [{"step": 6, "event": "resumed", "checkpoint_batch": 6, "resumption": 1, "time": 128.0}]
               + steps(1, 7, 12, 130.0))               # steps 7..12 at 130..135
    got = ledger(run_of(lost, retry, status="completed"), records, beats={0: 112.0, 1: 135.0}, now=500.0)
    first, second = got.entries
    assert (first.ended, first.why, first.steps) == ("lost", "slurm job node_fail", (1, 10))
    assert first.detect_s == 8.0            # last heartbeat 112 -> recorded lost 120
    assert first.restart_s == 10.0          # recorded lost 120 -> the retry's first step 130
    assert (first.steps_redone, first.lost_s) == (4, 4.0)     # steps 7..10 trained twice
    assert (second.ended, second.cause, second.steps, second.steps_redone) == ("completed", "failover", (7, 12), None)
    assert got.useful_s == 12.0             # 12 steps that counted, a second each
    assert got.wall_s == 36.0               # first launch 100 -> end 136
    assert got.goodput == round(12 / 36, 4)


def test_a_failed_one_says_its_last_error_line_and_a_pause_costs_no_steps():
    paused = Resumption(0, "a", "local", 1, 1, "paused", started_at=100.0, ended_at=106.0, exit_code=75)
    failed = Resumption(1, "a", "local", 1, 1, "failed", started_at=200.0, ended_at=203.0, exit_code=1,
                        exit_reason="ValueError: bad batch", cause="resume")
    records = (steps(0, 1, 4, 101.0)
               + [{"step": 4, "event": "resumed", "checkpoint_batch": 4, "resumption": 1, "time": 201.0}]
               + steps(1, 5, 6, 201.5))
    got = ledger(run_of(paused, failed, status="failed"), records, beats={}, now=500.0)
    first, second = got.entries
    assert (first.ended, first.why, first.steps_redone, first.lost_s, first.restart_s) == ("paused", None, 0, 0.0, None)
    assert (second.ended, second.why) == ("failed", "ValueError: bad batch")
    assert got.wall_s == 103.0 and got.useful_s == 6.0     # the time paused counts as wall time


def test_a_running_run_counts_until_now_and_has_no_end():
    running = Resumption(0, "a", "local", 1, 1, "running", started_at=100.0)
    got = ledger(run_of(running, status="running"), steps(0, 1, 3, 101.0), beats={}, now=110.0)
    [entry] = got.entries
    assert entry.ended is None and entry.steps_redone is None
    assert got.wall_s == 10.0 and got.useful_s == 3.0 and got.goodput == 0.3


def test_a_retry_that_found_no_checkpoint_redoes_every_step():
    lost = Resumption(0, "a", "local", 1, 1, "lost", started_at=100.0, ended_at=110.0, exit_reason="killed")
    retry = Resumption(1, "a", "local", 1, 1, "running", started_at=111.0, cause="retry")
    records = steps(0, 1, 3, 101.0) + steps(1, 1, 2, 115.0)
    got = ledger(run_of(lost, retry, status="running"), records, beats={}, now=120.0)
    assert (got.entries[0].steps_redone, got.entries[0].lost_s) == (3, 3.0)
    assert got.entries[0].detect_s == 7.0   # last row 103 -> recorded lost 110 (no heartbeat)
    assert got.useful_s == 2.0


def test_no_rows_no_figures():
    pending = Resumption(0, "a", "local", 1, 1, "pending")
    got = ledger(run_of(pending, status="pending"), [], beats={}, now=130.0)
    assert got.entries[0].steps is None and got.useful_s == 0.0 and got.wall_s == 31.0   # since created
    assert got.goodput is None              # nothing timed: no figure rather than 0%
