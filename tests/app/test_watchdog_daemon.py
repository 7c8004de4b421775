"""`foundry watch --daemon`: one per host, says which watchdogs run, stops on --stop; a watchdog killed
without its cleanup does not count as running."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundry.app.control.watchdogs import running
from support.control import wait_for


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.subprocess
def test_daemon_starts_once_reports_and_stops(cli, cp):
    assert "no watchdog runs" in cli("watch", "--status")[2]
    code, _, err = cli("watch", "--daemon", "--interval", "1")
    assert code == 0, err
    pid = int(re.search(r"pid (\d+)", err).group(1))
    try:
        wait_for(lambda: any(w.pid == pid and w.last_pass for w in cp.watchdogs()), 60, what="the daemon's first pass")
        code, _, err = cli("watch", "--daemon")
        assert code == 2 and "a watchdog daemon already runs" in err and "foundry watch --stop" in err
        assert f"watchdog pid {pid} on {socket.gethostname()} (daemon), every 1s" in cli("watch", "--status")[2]
    finally:
        code, _, err = cli("watch", "--stop")
    assert code == 0 and f"stopped watchdog daemon pid {pid}" in err
    assert not alive(pid) and cp.watchdogs() == []
    assert "no watchdog daemon runs here" in cli("watch", "--stop")[2]


@pytest.mark.subprocess
def test_a_killed_watchdog_does_not_count(cp):
    exe = Path(sys.executable).parent / "foundry"
    proc = subprocess.Popen([str(exe), "watch", "--interval", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "FOUNDRY_HOME": str(cp.paths.home)})
    try:
        wait_for(lambda: [w.pid for w in cp.watchdogs()] == [proc.pid], 60, what="the watchdog registered")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert cp.watchdogs() == []
    assert not list((cp.paths.home / "watchdogs").glob("*.json"))   # its record is cleaned up by the reader


def test_another_hosts_watchdog_counts_while_its_passes_are_recent(tmp_path):
    folder = tmp_path / "watchdogs"
    folder.mkdir()
    now = time.time()
    for name, last in (("fresh", now - 20), ("stale", now - 1000)):
        (folder / f"{name}-1.json").write_text(json.dumps(
            {"pid": 1, "host": f"{name}-elsewhere", "started_at": now - 2000, "last_pass": last, "interval": 15.0,
             "daemon": True}))
    assert [w.host for w in running(tmp_path, now)] == ["fresh-elsewhere"]


def test_the_tui_line_says_whether_a_watchdog_runs():
    from foundry.app.control import WatchdogInfo
    from foundry.app.tui.widgets.watchdog import watchdog_text

    assert watchdog_text([], 100.0).plain.startswith("no watchdog: lost runs wait for a command")
    ours = WatchdogInfo(pid=12, host="ctl", started_at=0.0, last_pass=95.0, interval=15.0, daemon=True)
    other = WatchdogInfo(pid=7, host="b", started_at=1.0, last_pass=None, interval=10.0, daemon=False)
    assert watchdog_text([ours, other], 100.0).plain == \
        "watchdog runs: pid 12 on ctl (daemon), every 15s, last pass 5s ago (+1 more)"
