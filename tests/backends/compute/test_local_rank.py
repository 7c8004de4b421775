"""The local provider's per-rank wrapper (local_rank.py) under a stop that lands while it starts
the rank's command: torchrun signals the wrapper as soon as it exists, so the stop must reach the
command and its exit must be recorded, never kill the wrapper and the command with it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.subprocess  # drives local_rank in a process of its own

# Runs local_rank.main with the SIGTERM arriving just before the command is started.
DRIVER = textwrap.dedent("""
    import os, signal, subprocess, sys
    from foundry.backends.compute import local_rank
    start = subprocess.Popen
    def stopped_while_starting(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return start(*args, **kwargs)
    subprocess.Popen = stopped_while_starting
    sys.exit(local_rank.main(sys.argv[1:]))
""")


def test_a_stop_while_the_command_starts_reaches_it_and_is_recorded(tmp_path):
    command = [sys.executable, "-c", "import time; time.sleep(120)"]
    done = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path), "--", *command],
                          env={**os.environ, "RANK": "0"}, capture_output=True, timeout=100)
    assert (tmp_path / "ranks" / "rank-0.exit").read_text() == "-15", done.stderr  # the command got the SIGTERM
    assert done.returncode == 128 + 15
    assert (tmp_path / "ranks" / "rank-0.pid").exists()
