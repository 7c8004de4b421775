"""Signals at the edges of a run. A stop that lands after fit() returned, while the script still exports
or uploads its model, must not exit 0 with that work skipped: the default behaviour is back (143, not
completed). A stop that lands while the interpreter shuts down after a completed run leaves exit 0."""

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

EXPORTING = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from toy_job import run
    run(steps=2, save_folder=sys.argv[2], run_dir=sys.argv[3])
    print("fit returned", flush=True)
    time.sleep(30)          # exporting and uploading the model
    open(sys.argv[3] + "/exported", "w").write("model")
""")

# An atexit hook registered before fit() runs after the trainer's own (last registered, first run):
# it stands for the slow end of a shutdown (process-group teardown, the workers' join, ...).
SHUTTING_DOWN = textwrap.dedent("""
    import atexit, sys, time
    sys.path.insert(0, sys.argv[1])
    atexit.register(lambda: (print("shutting down", flush=True), time.sleep(5)))
    from toy_job import run
    run(steps=2, save_folder=sys.argv[2], run_dir=sys.argv[3])
""")


def start(tmp_path, script):
    return subprocess.Popen([sys.executable, "-c", script, str(HERE), str(tmp_path / "ckpt"), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop_at(proc, line: str) -> tuple[int, str]:
    try:
        assert proc.stdout.readline().strip() == line
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=20), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_after_fit_returned_is_not_a_completed_exit(tmp_path):
    code, err = stop_at(start(tmp_path, EXPORTING), "fit returned")
    assert code == -signal.SIGTERM, err             # died of it: the job reads 143, not completed
    assert "after fit() returned: exiting 143" in err
    assert not (tmp_path / "exported").exists()


def test_sigterm_while_the_interpreter_shuts_down_keeps_exit_0(tmp_path):
    code, err = stop_at(start(tmp_path, SHUTTING_DOWN), "shutting down")
    assert code == 0, err


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
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    [record] = (tmp_path / "egress" / "r0").glob("*.json")
    assert json.loads(record.read_text())["stores"]["s3://bucket"]["checkpoint"]["written"] == 1234
