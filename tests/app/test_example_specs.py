"""The example run specs (examples/runs/) parse, and the local ones plan on the local provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry.app.runspec import load_spec

SPECS = sorted((Path(__file__).resolve().parents[2] / "examples" / "runs").glob("*.yaml"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_spec_is_valid(path):
    spec = load_spec(path)
    assert (spec.command or spec.parameters) and spec.compute.gpus  # parameters: the embedded trainer


def test_local_examples_plan(cp):
    cp.create_secret("r2", "s3", {"access_key_id": "AKIAEXAMPLE0", "secret_access_key": "examplesecret1"})
    for name in ("local.yaml", "mcli-legacy.yaml"):
        plan = cp.dry_run(next(p for p in SPECS if p.name == name))
        assert plan.provider == "local" and "--nproc_per_node=2" in plan.artifacts["command"]
