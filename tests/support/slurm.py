"""Fixture: a real single-node Slurm (munge, slurmctld, slurmd from Debian packages) on localhost.

`slurm_cluster` (session) runs scripts/infra/slurm.sh, which installs the packages when missing
and starts the daemons, and waits until `sinfo` shows the node idle. It stops at the end only what
it started: a Slurm that was already running is left alone. Needs root (CI and dev machines are).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "infra" / "slurm.sh"


@dataclass
class SlurmCluster:
    node: str = "localhost"
    partition: str = "debug"
    python: str = sys.executable     # jobs run as root on this machine: the test venv's python works

    def provider_config(self, jobs_dir: str | os.PathLike, **overrides) -> dict:
        """A `slurm` cluster entry for this cluster, job folders under `jobs_dir`."""
        config = {"provider": "slurm", "name": "test-slurm", "partition": self.partition,
                  "python": self.python, "jobs_dir": str(jobs_dir)}
        config.update(overrides)
        return config


def _script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def _controller_alive() -> bool:
    """Whether the slurmctld its pid file names runs, answering or not: one that a test froze for a
    while (SIGSTOP, tests/app/test_no_false_recovery.py) is up and someone else's; a session that took
    it for down would start a second one and stop the shared one at its end."""
    try:
        pid = int(Path("/run/slurm/slurmctld.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    return Path(f"/proc/{pid}").exists()


@pytest.fixture(scope="session")
def slurm_cluster():
    if os.geteuid() != 0:
        pytest.skip("a local Slurm needs root (slurmd runs jobs as their user)")
    already_up = _script("status").returncode == 0 or _controller_alive()
    if not already_up:
        if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
            pytest.skip("Slurm is not installed and apt-get is not available")
        proc = _script("start")
        if proc.returncode != 0:
            pytest.fail(f"could not start Slurm:\n{proc.stdout}\n{proc.stderr}")
    try:
        yield SlurmCluster()
    finally:
        if not already_up:
            _script("stop", timeout=60)
