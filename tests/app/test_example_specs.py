"""The example run specs (examples/runs/) parse, and the local ones plan on the local provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry.app.runspec import load_spec

SPECS = sorted((Path(__file__).resolve().parents[2] / "examples" / "runs").glob("*.yaml"))


@pytest.fixture(autouse=True)
def bucket(monkeypatch):
    """The examples name no bucket: `${BUCKET}` is the reader's (issue 34.7)."""
    monkeypatch.setenv("BUCKET", "s3://readers-bucket")


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_spec_is_valid(path):
    assert "my-bucket" not in path.read_text()
    spec = load_spec(path)
    assert (spec.command or spec.parameters) and spec.compute.gpus  # parameters: the embedded trainer


def test_local_examples_plan(cp):
    cp.create_secret("r2", "s3", {"access_key_id": "AKIAEXAMPLE0", "secret_access_key": "examplesecret1"})
    for name in ("local.yaml", "mcli-legacy.yaml"):
        plan = cp.dry_run(next(p for p in SPECS if p.name == name))
        assert plan.provider == "local" and "--nproc_per_node=2" in plan.artifacts["command"]


def test_without_a_bucket_the_examples_say_what_to_export(cli, monkeypatch):
    monkeypatch.delenv("BUCKET")
    code, _, err = cli("run", "-f", str(next(p for p in SPECS if p.name == "local.yaml")), "--dry-run")
    assert code == 2
    assert err.splitlines()[0] == ("error: local.yaml: env_variables.DATA_URL uses ${BUCKET}, "
                                   "which is not set in this environment")
    assert "export BUCKET=" in err


def test_the_bucket_fills_env_and_parameters_never_the_command(cp):
    cp.create_secret("r2", "s3", {"access_key_id": "AKIAEXAMPLE0", "secret_access_key": "examplesecret1"})
    plan = cp.dry_run(next(p for p in SPECS if p.name == "local.yaml"))
    assert plan.env["DATA_URL"] == "s3://readers-bucket/tiny-gpt/data"
    assert plan.spec["env_variables"]["SAVE_URL"] == "s3://readers-bucket/tiny-gpt/{run_name}/checkpoints"
    spec = load_spec(next(p for p in SPECS if p.name == "gpt-parameters.yaml"))
    assert spec.parameters["save_folder"] == "s3://readers-bucket/{run_name}/checkpoints"
