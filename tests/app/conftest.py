"""Fixtures for the control-plane tests: a ControlPlane in the isolated FOUNDRY_HOME, small job scripts,
and a teardown that kills whatever a test left running."""

from __future__ import annotations

import sys
import textwrap

import pytest

# A trainer stand-in: counts steps; on SIGTERM "checkpoints" (writes the step) and exits 75.
PAUSABLE = textwrap.dedent("""
    import os, signal, sys, time
    stop = False
    def on_term(*_):
        global stop
        stop = True
    signal.signal(signal.SIGTERM, on_term)
    rank = os.environ["RANK"]
    print(f"start rank={rank} resumption={os.environ['RESUMPTION_INDEX']}", flush=True)
    open(os.path.join(os.environ["FOUNDRY_RUN_DIR"], f"started-{os.environ['RESUMPTION_INDEX']}-{rank}"), "w").close()
    for step in range(int(os.environ.get("STEPS", "600"))):
        if stop:
            print(f"paused at step {step}", flush=True)
            sys.exit(75)
        time.sleep(0.05)
    print("done", flush=True)
""")


@pytest.fixture
def pausable(tmp_path):
    path = tmp_path / "pausable.py"
    path.write_text(PAUSABLE)
    return [sys.executable, str(path)]
