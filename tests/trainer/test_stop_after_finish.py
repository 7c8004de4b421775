"""A stop that lands after the last training step (the scheduler signalling a process that is shutting
down) leaves the run completed: exit 0, not 143."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

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
