"""The batch script's pause helper signals only the job's own workers: recorded pid AND its start time,
on this node; a pid that now belongs to another process (reused) is left alone. No name patterns."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundry.backends.compute.slurm.script import render_pause


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


@pytest.mark.subprocess
def test_pause_signals_recorded_workers_only(tmp_path):
    (tmp_path / "ranks").mkdir()
    script = tmp_path / "pause.sh"
    script.write_text(render_pause(str(tmp_path)))
    ours, other = (subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2))
    try:
        (tmp_path / "ranks" / "0.pid").write_text(f"nodeA {ours.pid} {start_time(ours.pid)}\n")
        (tmp_path / "ranks" / "1.pid").write_text(f"nodeA {other.pid} 1\n")          # pid reused since
        (tmp_path / "ranks" / "2.pid").write_text(f"nodeB {other.pid} {start_time(other.pid)}\n")  # other node
        out = subprocess.run(["bash", str(script)], env={"SLURMD_NODENAME": "nodeA", "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=10).stdout
        assert ours.wait(timeout=10) == -15 and f"SIGTERM to pid {ours.pid}" in out
        time.sleep(0.3)
        assert other.poll() is None and str(other.pid) not in out
    finally:
        for proc in (ours, other):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
