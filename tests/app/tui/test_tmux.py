"""As a person would use it: `foundry-tui` in a real terminal (tmux, 80x24), keys sent, the pane
captured and read. Uses the venv's foundry-tui against this test's FOUNDRY_HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
SECRET = "tmux-secret-value-987"


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def _type(session: str, text: str) -> None:
    """Type text, then Enter, as separate bursts (a person types, a script must pause)."""
    _tmux("send-keys", "-t", session, "-l", text)
    time.sleep(0.5)
    _tmux("send-keys", "-t", session, "Enter")
    time.sleep(0.5)


def _screen_until(session: str, *texts: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    pane = ""
    while time.monotonic() < deadline:
        pane = _tmux("capture-pane", "-p", "-t", session)
        if all(t in pane for t in texts):
            return pane
        time.sleep(0.2)
    raise AssertionError(f"never saw {texts!r} on screen; last screen:\n{pane}")


def test_foundry_tui_in_tmux(plane, run_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))   # a tmux server of its own, not /tmp/tmux-UID
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(f'{{"text": "row {i}"}}\n' for i in range(50)))
    plane.create_secret("r2-creds", "s3", {"access_key_id": "AKID", "secret_access_key": SECRET})
    plane.create_run(run_yaml)
    exe = Path(sys.executable).with_name("foundry-tui")
    assert exe.exists(), "install the package (pip install -e .) so foundry-tui is on the venv's PATH"
    session = f"foundry-tui-{uuid.uuid4().hex[:8]}"
    home = os.environ["FOUNDRY_HOME"]
    _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24",
          f"env FOUNDRY_HOME={home} TERM=xterm-256color {exe} --refresh 0.5; sleep 30")
    try:
        pane = _screen_until(session, "Foundry", "tiny", "running")
        assert "step/max" in pane and "Pause" in pane

        _tmux("send-keys", "-t", session, "4")
        pane = _screen_until(session, "r2-creds", "••••")
        assert SECRET not in pane

        _tmux("send-keys", "-t", session, ":")
        _screen_until(session, "Jump to view")
        _tmux("send-keys", "-t", session, "clusters", "Enter")
        _screen_until(session, "Clusters", "local", "ready")

        # convert a JSONL file into MDS from the Datasets view (Enter moves on, then converts)
        _tmux("send-keys", "-t", session, "3")
        _screen_until(session, "Datasets", "Convert")
        _tmux("send-keys", "-t", session, "c")
        _screen_until(session, "Convert JSONL")
        _type(session, str(src))
        _type(session, str(tmp_path / "mds"))
        _screen_until(session, "done: 50 samples")
        time.sleep(0.5)
        _tmux("send-keys", "-t", session, "Escape")  # alone: escape + a key is read as alt+key
        time.sleep(0.5)
        pane = _screen_until(session, "file://", "50")
        assert "Convert JSONL" not in pane

        _tmux("send-keys", "-t", session, "1")
        _screen_until(session, "tiny", "running")
        deadline = time.monotonic() + 120  # the job is stepping (its SIGTERM handler is installed)
        while not plane.metrics("tiny") and time.monotonic() < deadline:
            time.sleep(0.2)
        _tmux("send-keys", "-t", session, "p")
        _screen_until(session, "Pause run tiny?")
        _tmux("send-keys", "-t", session, "Enter")
        _screen_until(session, "paused")
        assert plane.get_run("tiny").status == "paused"

        _tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "step/max" in _tmux("capture-pane", "-p", "-t", session):
            time.sleep(0.2)
        assert "step/max" not in _tmux("capture-pane", "-p", "-t", session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
