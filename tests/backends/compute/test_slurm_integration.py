"""The slurm provider against a REAL single-node Slurm (slurmctld + slurmd + munge, started by the
`slurm_cluster` fixture): sbatch, squeue, scancel, srun + torchrun with gloo, two ranks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from foundry.backends.compute.slurm import SlurmProvider
from foundry.plugins.compute import JobHandle, JobRequest, JobState, SecretMount

pytestmark = pytest.mark.integration
WORKER = str(Path(__file__).with_name("slurm_worker.py"))


@pytest.fixture
def provider(slurm_cluster, tmp_path):
    return SlurmProvider(slurm_cluster.provider_config(tmp_path / "jobs"))


def _request(mode: str, *args: str, name: str = "slurm-test", **kw) -> JobRequest:
    return JobRequest(run_name=name, run_id="rid-1", resumption=kw.pop("resumption", 0),
                      command=[WORKER, mode, *args], procs_per_node=2, **kw)


def _wait(provider, handle, until, timeout=60.0):
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = provider.status(handle)
        if not seen or seen[-1] != status.state:
            seen.append(status.state)
        if until(status):
            return status, seen
        time.sleep(0.3)
    raise AssertionError(f"job {handle.job_id} never reached the expected state; saw {seen}")


def _wait_for_log(provider, handle, text, count, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = "\n".join(provider.logs(handle))
        if logs.count(text) >= count:
            return logs
        assert not provider.status(handle).state.terminal, logs
        time.sleep(0.3)
    raise AssertionError(f"{text!r} x{count} never appeared in the job's output")


def test_two_rank_job_runs_to_completion_with_env_secrets_and_logs(provider):
    request = _request(
        "allreduce", resumption=2,
        env={"PLAIN": "hello world", "TEST_SECRET_FILE": "/etc/foundry/test-secret"},
        secret_files=[SecretMount(path="/etc/foundry/test-secret", content=b"top-secret")],
    )
    plan = provider.dryrun(request)
    assert "--rdzv_backend=c10d" in plan.artifacts["sbatch"]
    assert "top-secret" not in "".join(plan.artifacts.values())
    handle = provider.launch(plan)
    assert handle.job_id.isdigit()
    assert any(h.job_id == handle.job_id and h.data["run_name"] == "slurm-test" for h in provider.list())

    status, seen = _wait(provider, handle, lambda s: s.state.terminal)
    assert status.state == JobState.COMPLETED and status.exit_code == 0, "\n".join(provider.logs(handle))
    assert set(seen) <= {JobState.PENDING, JobState.RUNNING, JobState.COMPLETED}

    for rank in (0, 1):
        out = "\n".join(provider.logs(handle, rank=rank))
        assert f"ready rank={rank} world=2" in out
        assert ("allreduce=3 run=slurm-test id=rid-1 resumption=2 plain=hello world "
                "secret_mode=0o600 secret_ok=True") in out
    main = "\n".join(provider.logs(handle, follow=True))
    assert "foundry: job exited with 0" in main
    secret_dir = Path(handle.data["job_dir"]) / "secrets"
    assert oct(os.stat(secret_dir).st_mode & 0o777) == "0o700"
    assert oct(os.stat(Path(handle.data["job_dir"]) / "env.sh").st_mode & 0o777) == "0o600"


def test_graceful_stop_sends_one_sigterm_per_rank_and_the_job_is_paused(provider):
    handle = provider.launch(provider.dryrun(_request("pause")))
    _wait_for_log(provider, handle, "ready rank=", 2)
    provider.stop(handle, graceful=True)
    status, seen = _wait(provider, handle, lambda s: s.state.terminal)
    logs = "\n".join(provider.logs(handle))
    assert status.state == JobState.PAUSED and status.exit_code == 75, logs
    assert JobState.STOPPING in seen
    assert "paused rank=0 sigterms=1" in logs and "paused rank=1 sigterms=1" in logs


def test_hard_stop_cancels_and_is_lost(provider):
    handle = provider.launch(provider.dryrun(_request("sleep")))
    _wait_for_log(provider, handle, "ready rank=", 2)
    provider.stop(handle, graceful=False)
    status, _ = _wait(provider, handle, lambda s: s.state.terminal)
    assert status.state == JobState.LOST
    assert "cancelled" in (status.reason or "")
    provider.stop(handle, graceful=False)   # stopping a finished job is a no-op


def test_nonzero_exit_is_failed_with_its_code(provider):
    handle = provider.launch(provider.dryrun(_request("fail", "3")))
    status, _ = _wait(provider, handle, lambda s: s.state.terminal)
    assert status.state == JobState.FAILED and status.exit_code == 3, "\n".join(provider.logs(handle))


def test_unknown_job_is_lost_and_describe_shows_the_node(provider, slurm_cluster, tmp_path):
    ghost = JobHandle(provider="slurm", cluster="test-slurm", job_id="999999", data={"job_dir": str(tmp_path)})
    assert provider.status(ghost).state == JobState.LOST
    info = provider.describe()
    assert info["state"] == "ready" and info["nodes"] == 1 and info["cpus"] >= 1
    assert info["node_list"][0]["name"] == slurm_cluster.node


def test_graceful_stop_of_a_pending_job_cancels_it_as_paused(provider, slurm_cluster):
    # a job that cannot start: more nodes than the cluster has, so it stays pending
    handle = provider.launch(provider.dryrun(_request("sleep", nodes=2)))
    assert provider.status(handle).state == JobState.PENDING
    provider.stop(handle, graceful=True)
    status, _ = _wait(provider, handle, lambda s: s.state.terminal, timeout=20)
    assert status.state == JobState.PAUSED and status.reason == "stopped before it started"
