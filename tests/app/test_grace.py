"""`grace:` in the run YAML reaches the job as FOUNDRY_GRACE_S (the trainer's notice window check)."""

from __future__ import annotations

import pytest


@pytest.mark.subprocess
def test_the_job_gets_the_runs_grace(cp, tmp_path):
    out = tmp_path / "grace.txt"
    run = cp.create_run({"name": "graceful", "grace": "2m", "command": f'echo "$FOUNDRY_GRACE_S" > {out}'})
    assert cp.wait(run.name, timeout=60).status == "completed"
    assert out.read_text().strip() == "120"


@pytest.mark.subprocess
def test_without_grace_the_job_gets_none(cp, tmp_path):
    out = tmp_path / "grace.txt"
    run = cp.create_run({"name": "plain", "command": f'echo "[${{FOUNDRY_GRACE_S-unset}}]" > {out}'})
    assert cp.wait(run.name, timeout=60).status == "completed"
    assert out.read_text().strip() == "[unset]"


def test_providers_know_their_window_from_the_cluster_config():
    from foundry.backends.compute.kubernetes.provider import KubernetesProvider
    from foundry.backends.compute.slurm.provider import SlurmProvider

    assert SlurmProvider({"signal": "B:TERM@120"}).capabilities.notice_window_s == 120.0
    assert SlurmProvider({}).capabilities.notice_window_s is None
    assert KubernetesProvider({}).capabilities.notice_window_s == 300.0       # termination_grace_seconds' default
    assert KubernetesProvider({"termination_grace_seconds": 45}).capabilities.notice_window_s == 45.0
    assert KubernetesProvider.capabilities.notice_window_s is None           # the class's own is left alone
