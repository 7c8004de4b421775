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
