"""Watchdog kill probes (issue 31 part 2): `foundry watch --once` SIGKILLed at every moment of the
relaunch of a lost run, on the local provider. The next passes settle it: the run runs again, and at
no time is more than one copy of its job alive (counted from the jobs' own markers and the process
table, not from the registry)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from chaos.test_cli_kills import HERE, JOB, job_pids, live_jobs, wait_for

WATCHDOG_POINTS = ["after-lost", "after-add", "before-launch", "in-launch", "after-launch", "after-record"]


@pytest.mark.slow
@pytest.mark.parametrize("point", WATCHDOG_POINTS)
def test_kill_the_watchdog_during_a_relaunch(cp, tmp_path, point):
    name = f"wd-{point}"
    marks = tmp_path / "marks"
    marks.mkdir()
    job = tmp_path / "job.py"
    job.write_text(JOB)
    cp.create_run({"name": name, "command": [sys.executable, str(job)], "env_variables": {"MARKS": str(marks)},
                   "scheduling": {"max_retries": 3}})
    wait_for(lambda: job_pids(marks, 0), 90, what="the first job started")
    os.kill(job_pids(marks, 0)[0], signal.SIGKILL)   # a system failure: the job is gone, not failed
    wait_for(lambda: (cp.paths.resumption_dir(name, 0) / "exit.json").exists(), 60, what="the job's end recorded")
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import kill_points; kill_points.main()"
    proc = subprocess.run([sys.executable, "-c", code, point, "watch", "--once"], capture_output=True,
                          timeout=120, env=dict(os.environ), cwd=tmp_path)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()

    def settled():   # the next passes (any command reconciles; here the control plane's own step)
        cp.reconcile()
        assert len(live_jobs(marks)) <= 1, f"two copies alive: {live_jobs(marks)}"
        run = cp.registry.get_run(name)
        latest = run.latest
        handle = cp.registry.handle(run.id, latest.index)
        return run if handle is not None and job_pids(marks, latest.index) else None

    run = wait_for(settled, 120, poll=0.5, what="the run relaunched")
    assert run.status in ("pending", "running"), run.status
    assert [r.state for r in run.resumptions[:-1]] == ["lost"] * (len(run.resumptions) - 1)
    assert len(live_jobs(marks)) == 1 and live_jobs(marks) == job_pids(marks, run.latest.index)
    cp.stop_run(name, graceful=False)
    cp.wait(name, timeout=90)
    wait_for(lambda: live_jobs(marks) == [], 30, what="every job process ended")
