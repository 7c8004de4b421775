"""The local provider's hard stop kills each rank's process group only while the pid file still names
the process local_rank started (pid + start time): a pid reused since belongs to someone else."""

from __future__ import annotations

import subprocess
import sys

import pytest

from foundry.backends.compute.local import _live_rank_commands
from foundry.plugins.process_identity import create_time

pytestmark = pytest.mark.subprocess  # kills real processes


def test_only_pids_with_their_recorded_start_time_are_killed(tmp_path):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours, reused = subprocess.Popen(sleep), subprocess.Popen(sleep)
    try:
        (ranks / "rank-0.pid").write_text(f"{ours.pid} {create_time(ours.pid)}")
        (ranks / "rank-1.pid").write_text(f"{reused.pid} {create_time(reused.pid) - 3600}")  # started an hour later
        (ranks / "rank-2.pid").write_text("garbage")
        (ranks / "rank-3.pid").write_text(f"{ours.pid} None")   # no start time: not ours to kill
        assert _live_rank_commands(tmp_path) == [ours.pid]
    finally:
        for p in (ours, reused):
            p.kill()
            p.wait()
