"""A stop that lands after fit() returned, while the script still exports its model, leaves the run
resumable (stopped), never `completed` with the export skipped; a run whose script ends is completed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from support.control import wait_for

TRAINER_TESTS = Path(__file__).resolve().parents[1] / "trainer"

JOB = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    from toy_job import run
    out = sys.argv[2]
    run(steps=2, save_folder=os.path.join(out, "ckpt"), run_dir=os.path.join(out, "run"))
    open(os.path.join(out, "fit-returned"), "w").close()
    time.sleep(float(sys.argv[3]))          # exporting and uploading the model
    open(os.path.join(out, "exported"), "w").close()
""")


@pytest.mark.subprocess
def test_a_stop_while_the_script_exports_is_not_completed(cp, tmp_path):
    run = cp.create_run({"name": "exporting", "command": [sys.executable, "-c", JOB, str(TRAINER_TESTS),
                                                          str(tmp_path), "120"]})
    wait_for(lambda: (tmp_path / "fit-returned").exists(), 120, what="fit() returned")
    cp.stop_run(run.name)
    done = cp.wait(run.name, timeout=60)
    assert done.status == "stopped", (done.status, done.latest.exit_code)   # resumable, not completed
    assert not (tmp_path / "exported").exists()


@pytest.mark.subprocess
def test_a_script_that_ends_is_completed(cp, tmp_path):
    run = cp.create_run({"name": "exported", "command": [sys.executable, "-c", JOB, str(TRAINER_TESTS),
                                                         str(tmp_path), "0"]})
    assert cp.wait(run.name, timeout=120).status == "completed"
    assert (tmp_path / "exported").exists()
