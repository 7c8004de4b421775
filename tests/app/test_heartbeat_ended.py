"""A job that completed (every rank exited 0) while its provider could not be reached is silent too: its wrappers
record the end beside the beats, so the watchdog keeps it `unknown` (the provider will say how it
ended) instead of filing it lost and launching it again (found by tests/multinode/test_failover_e2e.py:
a run that completed under a frozen slurmctld was relaunched on the next placement)."""

from __future__ import annotations

import os
import subprocess

import pytest

from foundry.backends.compute.slurm.script import render_rank_wrapper
from foundry.plugins.heartbeat import Beater, all_ended, beat_path, last_beat


def test_only_a_job_whose_every_beating_rank_ended_counts_as_ended(tmp_path):
    assert not all_ended(tmp_path, 0)                    # never beat: nothing to say
    for rank in (0, 1):
        beat_path(tmp_path, 0, rank).parent.mkdir(parents=True, exist_ok=True)
        beat_path(tmp_path, 0, rank).touch()
    Beater(beat_path(tmp_path, 0, 0)).stop(ended=True)
    assert not all_ended(tmp_path, 0)                    # rank 1 went silent without ending: evidence
    Beater(beat_path(tmp_path, 0, 1)).stop(ended=True)
    assert all_ended(tmp_path, 0) and not all_ended(tmp_path, 1)
    assert last_beat(tmp_path, 0) is not None            # the end markers are not beats


@pytest.mark.slow
def test_slurm_rank_wrapper_records_the_end_of_its_worker(tmp_path):
    job_dir, run_dir = tmp_path / "job", tmp_path / "run"
    (job_dir / "ranks").mkdir(parents=True)
    (job_dir / "logs").mkdir()
    wrapper = tmp_path / "rank.sh"
    wrapper.write_text(render_rank_wrapper(str(job_dir)))
    env = {**os.environ, "RANK": "1", "FOUNDRY_RUN_DIR": str(run_dir), "RESUMPTION_INDEX": "2"}
    subprocess.run(["bash", str(wrapper), "sleep", "1"], env=env, check=True, timeout=60)
    assert beat_path(run_dir, 2, 1).exists() and all_ended(run_dir, 2)
    env["RESUMPTION_INDEX"] = "3"   # a worker that fails (or is killed) records no end: its silence counts
    subprocess.run(["bash", str(wrapper), "bash", "-c", "sleep 1; exit 3"], env=env, timeout=60)
    assert beat_path(run_dir, 3, 1).exists() and not all_ended(run_dir, 3)
