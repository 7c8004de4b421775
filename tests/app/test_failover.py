"""Failover (issue 31 part 1): `compute:` as a list of placements; after a loss the watchdog relaunches
on the first one that can take it now, with that one's device count, and says why it went there."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from support.control import wait_for


def test_compute_list_is_placements_in_order():
    from foundry.app.control.launch import placements_for
    from foundry.app.runspec import parse_spec
    from foundry.plugins.errors import ConfigError

    spec = parse_spec({"name": "f", "command": "true", "scheduling": {"max_retries": 3},
                       "compute": [{"cluster": "aws-spot", "gpus": 8}, {"cluster": "fleet", "gpus": 4},
                                   {"cluster": "hpc", "nodes": 2, "gpus": 8}]})
    assert spec.compute.cluster == "aws-spot" and spec.compute.gpus == 8
    assert [(p.cluster, p.nodes, p.devices) for p in placements_for(spec)] == [
        ("aws-spot", 1, 8), ("fleet", 1, 4), ("hpc", 2, 8)]
    assert parse_spec(spec.to_dict()) == spec                     # stored and read back unchanged
    single = parse_spec({"name": "s", "command": "true", "compute": {"cluster": "hpc", "gpus": 2}})
    assert "failover" not in single.to_dict() and [p.cluster for p in placements_for(single)] == ["hpc"]
    with pytest.raises(ConfigError, match="compute: the list is empty"):
        parse_spec({"name": "e", "command": "true", "compute": []})
    with pytest.raises(ConfigError, match="must be a multiple of nodes"):
        parse_spec({"name": "e", "command": "true", "compute": [{"cluster": "a"}, {"cluster": "b", "gpus": 3, "nodes": 2}]})


def test_a_cluster_that_cannot_take_it_now_is_refused():
    from foundry.app.control.launch import Placement, check_available
    from foundry.plugins.errors import ProviderError

    two = Placement("hpc", 2, 8)
    check_available(two, {"state": "ready", "node_list": [{"state": "idle"}, {"state": "allocated"}]})
    check_available(Placement("local", 1, 2), {"state": "ready", "nodes": 1})
    with pytest.raises(ProviderError, match="cluster 'hpc' has 1 node\\(s\\) up now; the run needs 2"):
        check_available(two, {"state": "ready", "node_list": [{"state": "idle"}, {"state": "down*"}]})
    with pytest.raises(ProviderError, match="cannot be reached now"):
        check_available(two, None)
    with pytest.raises(ProviderError, match="is no nodes now"):
        check_available(two, {"state": "no nodes", "node_list": []})


# The job: marks `<resumption>-<rank>-<pid>`, ignores SIGTERM (so a cancelled Slurm job ends by
# SIGKILL, without an exit code: lost), and runs STEPS steps.
JOB = textwrap.dedent("""
    import os, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(os.path.join(os.environ["MARKS"], f"{os.environ['RESUMPTION_INDEX']}-{os.environ['RANK']}-{os.getpid()}"), "w").close()
    for _ in range(int(os.environ["STEPS"])):
        time.sleep(0.05)
""")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def live_resumptions(marks) -> set[int]:
    """Resumptions with a live process, from the jobs' own markers and the process table."""
    return {int(p.name.split("-")[0]) for p in marks.iterdir() if alive(int(p.name.split("-")[2]))}


@pytest.mark.slow
@pytest.mark.integration
def test_lost_on_a_cluster_that_cannot_take_it_again_fails_over(cp, slurm_cluster, tmp_path):
    """Placements [hpc (Slurm, 1 process), local (2 processes)]: the run starts on hpc; hpc loses its
    capacity (its cluster entry now names a partition without nodes) and the job is cancelled under
    it (lost); the watchdog relaunches on local with 2 processes, says why, and the run completes.
    At no moment do two resumptions have live processes."""
    config = slurm_cluster.provider_config(tmp_path / "slurm-jobs")
    config.pop("name"), config.pop("provider")
    cp.create_cluster("hpc", "slurm", config)
    marks = tmp_path / "marks"
    marks.mkdir()
    job = tmp_path / "job.py"
    job.write_text(JOB)
    cp.create_run({"name": "fo", "command": [sys.executable, str(job)],
                   "env_variables": {"MARKS": str(marks), "STEPS": "200"}, "scheduling": {"max_retries": 2},
                   "compute": [{"cluster": "hpc", "gpus": 1}, {"cluster": "local", "gpus": 2}]})
    wait_for(lambda: live_resumptions(marks) == {0}, 120, what="the job on hpc")
    run = wait_for(lambda: (r := cp.get_run("fo")).status == "running" and r, 60, what="running")
    cp.clusters.add("hpc", "slurm", {**config, "partition": "no-such-partition"}, overwrite=True)
    subprocess.run(["scancel", run.latest.job_id], check=True, timeout=30)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert len(live_resumptions(marks)) <= 1, f"two jobs alive: {sorted(marks.iterdir())}"
        run = cp.get_run("fo")   # the watchdog's pass
        if run.status in ("completed", "failed", "stopped") or run.status == "lost" and len(run.resumptions) > 2:
            break
        time.sleep(0.3)
    assert run.status == "completed", run
    first, second = run.resumptions
    assert first.state == "lost" and first.cluster == "hpc" and "slurm job cancelled" in first.exit_reason
    assert second.cause == "failover" and second.cluster == "local" and second.devices == 2
    assert second.placed_because.startswith("placement 2 of 2 (local, 1 node(s), 2 device(s)) after resumption 0 "
                                            "was lost on hpc; refused: hpc: "), second.placed_because
    assert run.retries_used == 1 and "failover" in [e.event for e in run.events]
    assert sorted(p.name.rsplit("-", 1)[0] for p in marks.iterdir()) == ["0-0", "1-0", "1-1"]
    assert live_resumptions(marks) == set()



@pytest.mark.slow
def test_a_lost_run_no_cluster_can_take_stays_lost_and_is_asked_again_later(cp, monkeypatch):
    """The only placement cannot be reached (a Slurm login node that refuses ssh): no launch, no retry
    spent, the run stays lost with the reason; the next passes ask again at most every backoff."""
    from foundry.app.control import reconcile

    cp.create_cluster("gone", "slurm", {"ssh_host": "127.0.0.9", "partition": "debug"})
    spec = {"name": "stranded", "command": "true", "compute": {"cluster": "gone"}, "scheduling": {"max_retries": 2}}
    run_id = cp.registry.create_run("stranded", spec, 2, first=dict(cluster="gone", provider="slurm", nodes=1,
                                                                      devices=1, cause="create"))
    cp.registry.update_resumption(run_id, 0, handle={"provider": "slurm", "cluster": "gone", "job_id": "1",
                                                     "data": {"job_dir": "/nonexistent"}}, job_id="1")
    assert cp.registry.transition(run_id, 0, "pending", "lost", "lost", ended_at=time.time())
    refused = "stranded: no placement can take it now (gone: cluster 'gone' cannot be reached now)"
    assert cp.reconcile("stranded") == [refused + "; it stays lost until one can"]
    assert cp.reconcile("stranded") == []                 # within the backoff: not asked again
    monkeypatch.setattr(reconcile, "RELAUNCH_BACKOFF_S", 0.0)
    assert cp.reconcile("stranded") == [refused + "; it stays lost until one can"]
    run = cp.get_run("stranded", reconcile=False)
    assert run.status == "lost" and len(run.resumptions) == 1 and run.retries_used == 0
    assert [e.event for e in run.events].count("relaunch_waiting") == 2
