"""No false recoveries: a status call that fails is no evidence that a job is gone. The run shows
`unknown` (with the reason and since when) and nothing is relaunched or killed; only the job's own
heartbeat, silent past its deadline while the provider cannot be reached, makes it lost."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from support.control import wait_for


def started(cp, name: str) -> list[str]:
    return sorted(p.name for p in cp.paths.run_dir(name).glob("started-*"))


@pytest.mark.slow
def test_unreachable_provider_is_unknown_until_the_heartbeat_is_silent(cp, pausable, monkeypatch):
    from foundry.backends.compute.local import LocalProvider
    from foundry.plugins.errors import ProviderError
    from foundry.plugins.heartbeat import beat_path

    cp.create_run({"name": "unseen", "command": pausable, "env_variables": {"STEPS": "3000"},
                   "scheduling": {"max_retries": 2}})
    wait_for(lambda: started(cp, "unseen"), 60, what="the job started")
    beat = beat_path(cp.paths.run_dir("unseen"), 0, 0)
    wait_for(beat.exists, 30, what="the first heartbeat")
    wait_for(lambda: cp.get_run("unseen").status == "running", 60, what="running")
    real_status = LocalProvider.status

    def timing_out(self, handle):   # what a status call that times out raises (slurm: squeue did not answer)
        raise ProviderError("local: status did not answer in 60 s")

    monkeypatch.setattr(LocalProvider, "status", timing_out)
    assert cp.reconcile("unseen") == ["unseen: unknown (local: status did not answer in 60 s)"]
    run = cp.registry.get_run("unseen")
    assert run.status == "unknown" and run.latest.state == "running"
    assert run.latest.unknown_reason == "local: status did not answer in 60 s" and run.latest.unknown_since
    assert [e.event for e in run.events].count("unknown") == 1

    # unreachable for far longer than the deadline, but the job beats: still unknown, nothing relaunched
    cp.registry.update_resumption(run.id, 0, unknown_since=time.time() - 10_000)
    assert cp.reconcile("unseen") == [] and cp.reconcile("unseen") == []
    run = cp.registry.get_run("unseen")
    assert run.status == "unknown" and len(run.resumptions) == 1
    with pytest.raises(Exception, match="only paused, stopped, failed, lost runs can be resumed"):
        cp.resume_run("unseen")   # a person cannot start a second copy either

    # the provider answers again: the run shows its state, and says how long it was unknown
    monkeypatch.setattr(LocalProvider, "status", real_status)
    assert cp.reconcile("unseen")[0].startswith("unseen: observed again after ")
    run = cp.registry.get_run("unseen")
    assert run.status == "running" and run.latest.unknown_since is None and run.events[-1].event == "observed"

    # the job dies while the provider is unreachable: once its heartbeat is silent past the deadline
    # (and the provider unreachable as long), that is evidence: lost, and relaunched
    monkeypatch.setattr(LocalProvider, "status", timing_out)
    cp.reconcile("unseen")
    pid = int((cp.paths.resumption_dir("unseen", 0) / "ranks" / "rank-0.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (cp.paths.resumption_dir("unseen", 0) / "exit.json").exists(), 60, what="the job ended")
    old = time.time() - 10_000
    os.utime(beat, (old, old))
    cp.registry.update_resumption(run.id, 0, unknown_since=old)
    actions = cp.reconcile("unseen")
    assert actions[0].startswith("unseen: resumption 0 lost (no heartbeat for ") and actions[1:] == [
        "unseen: retried as resumption 1"], actions
    run = cp.registry.get_run("unseen")
    assert run.resumptions[0].state == "lost" and "provider unreachable" in run.resumptions[0].exit_reason
    monkeypatch.setattr(LocalProvider, "status", real_status)
    wait_for(lambda: "started-1-0" in started(cp, "unseen"), 60, what="the relaunched job")
    cp.stop_run("unseen", graceful=False)
    cp.wait("unseen", timeout=60)


def test_heartbeat_deadline_setting_is_checked():
    from foundry.plugins.errors import ConfigError
    from foundry.plugins.heartbeat import DEADLINE_S, deadline_s

    assert deadline_s({}) == DEADLINE_S and deadline_s({"FOUNDRY_HEARTBEAT_DEADLINE_S": "45"}) == 45.0
    for bad in ("soon", "5", "-1"):
        with pytest.raises(ConfigError, match="must be a number of seconds above 10"):
            deadline_s({"FOUNDRY_HEARTBEAT_DEADLINE_S": bad})


FREEZE_S = 30          # longer than the watchdog's heartbeat deadline below and than squeue's timeout
DEADLINE_S = 15.0


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.chaos
def test_frozen_slurm_controller_is_no_recovery(cp, pausable, slurm_cluster, tmp_path):
    """SIGSTOP slurmctld (by its recorded pid) for longer than the watchdog's timeouts during a run:
    the run shows unknown meanwhile, no second job starts, and it completes once. (The freeze reaches
    every user of this machine's Slurm: other sessions' Slurm tests see it too; the fixture never
    takes a frozen controller for a stopped one.)"""
    config = slurm_cluster.provider_config(tmp_path / "slurm-jobs")
    config.pop("name"), config.pop("provider")
    cp.create_cluster("hpc", "slurm", config)
    cp.create_run({"name": "frozen", "command": pausable, "compute": {"cluster": "hpc", "gpus": 1},
                   "env_variables": {"STEPS": "1400"}, "scheduling": {"max_retries": 3}})
    wait_for(lambda: started(cp, "frozen"), 120, what="the Slurm job started")
    wait_for(lambda: cp.get_run("frozen").status == "running", 60, what="running")
    cp.runs.watchdog.heartbeat_deadline = DEADLINE_S
    ctld = int(Path("/run/slurm/slurmctld.pid").read_text().split()[0])
    seen = set()
    os.kill(ctld, signal.SIGSTOP)
    try:
        frozen_until = time.monotonic() + FREEZE_S
        while time.monotonic() < frozen_until:
            cp.reconcile("frozen")
            run = cp.registry.get_run("frozen")
            seen.add(run.status)
            assert len(run.resumptions) == 1 and run.latest.state == "running", run
            time.sleep(1)
    finally:
        os.kill(ctld, signal.SIGCONT)
    assert "unknown" in seen, seen
    run = cp.registry.get_run("frozen")
    assert run.latest.unknown_reason and "slurm" in run.latest.unknown_reason
    final = cp.wait("frozen", timeout=300)
    assert final.status == "completed" and len(final.resumptions) == 1, final
    assert started(cp, "frozen") == ["started-0-0"]
    assert [e.event for e in final.events].count("unknown") >= 1 and "observed" in [e.event for e in final.events]
