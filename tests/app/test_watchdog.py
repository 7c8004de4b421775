"""The watchdog: a run killed by the system (SIGKILL) is relaunched as a new resumption up to
max_retries; a run that fails on its own error is not; two reconcilers act once."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from support.control import wait_for

pytestmark = pytest.mark.subprocess  # every test launches runs on the local cluster


def kill_rank(cp, name, idx, rank=0):
    pidfile = cp.paths.resumption_dir(name, idx) / "ranks" / f"rank-{rank}.pid"
    wait_for(pidfile.exists)
    wait_for(lambda: (cp.paths.run_dir(name) / f"started-{idx}-{rank}").exists())
    os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)


def test_sigkilled_run_is_retried_then_given_up(cp, pausable):
    cp.create_run({"name": "flaky", "command": pausable, "compute": {"gpus": 2}, "scheduling": {"max_retries": 1}})
    kill_rank(cp, "flaky", 0)
    run = wait_for(lambda: (r := cp.get_run("flaky")).latest.index == 1 and r)
    assert run.resumptions[0].state == "lost" and run.resumptions[1].cause == "retry"
    assert run.retries_used == 1 and run.resumptions[1].devices == 2
    events = [e.event for e in run.events]
    assert "lost" in events and "retried" in events
    # the retry gets RESUMPTION_INDEX=1; killing it again exhausts max_retries
    kill_rank(cp, "flaky", 1, rank=1)
    run = wait_for(lambda: (r := cp.get_run("flaky")).status == "lost" and r)
    assert len(run.resumptions) == 2 and run.retries_used == 1


def test_wait_holds_while_another_reconciler_relaunches(cp, monkeypatch):
    """wait() does not return a run "lost" that another reconciler is relaunching (it has retries left)."""
    from foundry.app.control import ControlPlane
    from foundry.app.control.reconcile import Watchdog

    code = "import os, time; os.environ['RESUMPTION_INDEX'] == '0' and time.sleep(60)"
    cp.create_run({"name": "relaunched", "command": [sys.executable, "-c", code], "scheduling": {"max_retries": 1}})
    pidfile = cp.paths.resumption_dir("relaunched", 0) / "ranks" / "rank-0.pid"
    wait_for(pidfile.exists)
    os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    wait_for(lambda: (cp.paths.resumption_dir("relaunched", 0) / "exit.json").exists())
    real_retry = Watchdog._retry

    def slow_retry(self, run, res):
        time.sleep(1.5)  # the moment between filing the loss and recording the relaunch, made long
        return real_retry(self, run, res)

    monkeypatch.setattr(Watchdog, "_retry", slow_retry)
    other = threading.Thread(target=ControlPlane().reconcile)
    other.start()
    wait_for(lambda: cp.registry.get_run("relaunched").status == "lost")  # filed by the other one
    run = cp.wait("relaunched", timeout=60)
    other.join()
    assert run.status == "completed" and len(run.resumptions) == 2 and run.resumptions[0].state == "lost"


def test_own_error_is_not_retried(cp):
    cp.create_run({"name": "buggy", "command": [sys.executable, "-c", "raise SystemExit(2)"],
                   "scheduling": {"max_retries": 3}})
    run = cp.wait("buggy", timeout=60)
    assert run.status == "failed" and len(run.resumptions) == 1 and run.latest.exit_code == 2
    assert cp.reconcile() == []


def test_concurrent_reconcilers_retry_once(cp, pausable):
    from foundry.app.control import ControlPlane

    cp.create_run({"name": "once", "command": pausable, "scheduling": {"max_retries": 5}})
    kill_rank(cp, "once", 0)
    wait_for(lambda: (cp.paths.resumption_dir("once", 0) / "exit.json").exists())
    other = ControlPlane()
    actions = cp.reconcile() + other.reconcile()
    assert actions.count("once: retried as resumption 1") == 1
    assert len(cp.get_run("once").resumptions) == 2


def test_user_stop_is_not_retried(cp):
    cp.create_run({"name": "sleepy", "command": [sys.executable, "-c", "import time; time.sleep(60)"],
                   "scheduling": {"max_retries": 2}})
    wait_for(lambda: cp.get_run("sleepy").status == "running")
    wait_for(lambda: (cp.paths.resumption_dir("sleepy", 0) / "ranks" / "rank-0.pid").exists())
    cp.stop_run("sleepy")
    run = cp.wait("sleepy", timeout=60)
    assert run.status == "stopped" and len(run.resumptions) == 1


def test_watch_once_reports_the_retry(cp, pausable, cli):
    cp.create_run({"name": "watched", "command": pausable, "scheduling": {"max_retries": 1}})
    kill_rank(cp, "watched", 0)
    wait_for(lambda: (cp.paths.resumption_dir("watched", 0) / "exit.json").exists())
    code, _, err = cli("watch", "--once")
    assert code == 0 and "watched: resumption 0 lost" in err and "watched: retried as resumption 1" in err


def test_interrupted_launch_is_failed_not_stuck(cp):
    """A CLI killed between recording a resumption and launching it leaves no forever-pending run."""
    run_id = cp.registry.create_run("half-launched", {"name": "half-launched", "command": "true"}, 0)
    idx = cp.registry.add_resumption(run_id, cluster="local", provider="local", nodes=1, devices=1, cause="create")
    assert cp.reconcile() == []  # maybe still launching
    cp.registry.update_resumption(run_id, idx, started_at=1.0)
    assert cp.reconcile() == ["half-launched: resumption 0 failed: launch interrupted"]
    assert cp.get_run("half-launched").status == "failed"
