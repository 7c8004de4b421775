"""A stop that lands after the last training step (the scheduler signalling a process that is shutting
down) leaves the run completed: exit 0, not 143."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # every test runs a trainer process

HERE = Path(__file__).resolve().parent

JOB = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from toy_job import run
    run(steps=2, save_folder=sys.argv[2], run_dir=sys.argv[3])
    print("fit returned", flush=True)
    time.sleep(30)          # shutting down slowly (uploads, process-group teardown, ...)
""")


def test_sigterm_after_the_last_step_exits_completed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", JOB, str(HERE), str(tmp_path / "ckpt"), str(tmp_path / "run")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "fit returned"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
        assert "after training completed: exiting 0" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# The final checkpoint's bytes, counted within a second of the previous record write (so not written
# yet), then the stop: the process exits at once, its egress record must still hold them.
ACCOUNTED = textwrap.dedent("""
    import os, signal
    from foundry.plugins.transfers import METER
    from foundry.trainer.signals import PauseRequest
    PauseRequest().install().settle()
    METER.add("s3://bucket", "checkpoint", "written", 1000)
    METER.add("s3://bucket", "checkpoint", "written", 234)
    os.kill(os.getpid(), signal.SIGTERM)
""")


def test_a_stop_after_the_last_step_keeps_the_run_egress_record_whole(tmp_path):
    env = {**os.environ, "FOUNDRY_RUN_DIR": str(tmp_path), "RESUMPTION_INDEX": "0"}
    proc = subprocess.run([sys.executable, "-c", ACCOUNTED], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [record] = (tmp_path / "egress" / "r0").glob("*.json")
    assert json.loads(record.read_text())["stores"]["s3://bucket"]["checkpoint"]["written"] == 1234
