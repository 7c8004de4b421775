"""FSDP2 on CPU (gloo), the GPT example with a tied embedding/head, under torchrun: 2 ranks train
with the same losses as DDP and stay tied; a sharded checkpoint goes to SeaweedFS (S3) mid-run; a
SIGTERM pause exits 75 with a published checkpoint; it resumes on 1, 2 and 3 ranks with the
uninterrupted losses; FSDP and DDP checkpoints (sharded and full) load into each other.

Four process launches in all, each serving several phases (tests/trainer/gpt_job.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from foundry.plugins.compute import PAUSED_EXIT_CODE
from foundry.plugins.manager import open_store
from foundry.trainer.checkpoint import store_ops

from . import gpt_job

pytestmark = [pytest.mark.slow, pytest.mark.integration]
JOB = str(Path(gpt_job.__file__))
PY = sys.executable
TOL = 1e-5


def launch(nproc: int, data: str, out: Path, phases: list[dict], env: dict) -> subprocess.CompletedProcess:
    cmd = [PY, JOB] if nproc == 1 else \
        [str(Path(PY).parent / "torchrun"), f"--nproc_per_node={nproc}", "--standalone", JOB]
    full_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    full_env.update(env)
    return subprocess.run(cmd + [data, str(out), json.dumps(phases)], capture_output=True, text=True,
                          env=full_env, timeout=300)


def result(out: Path, name: str) -> dict:
    raw = json.loads((out / f"{name}.json").read_text())
    raw["losses"] = {int(k): v for k, v in raw["losses"].items()}
    return raw


def assert_losses(got: dict[int, float], want: dict[int, float], steps) -> None:
    assert sorted(got) == list(steps), got
    for step in steps:
        assert got[step] == pytest.approx(want[step], abs=TOL), f"step {step}: {got[step]} vs {want[step]}"


@pytest.fixture(scope="module")
def world(tmp_path_factory, s3_server):
    """Run every launch once; the tests below read what each phase reported."""
    root = tmp_path_factory.mktemp("fsdp")
    sys.path.insert(0, str(gpt_job.ROOT))
    try:
        from examples.gpt.prep import prepare
    finally:
        sys.path.remove(str(gpt_job.ROOT))
    data = f"file://{root}/data"
    prepare(data, max_mb=0.05, block_size=16)
    env = s3_server.env()
    s3 = f"s3://{s3_server.create_bucket()}/gpt-fsdp/checkpoints"
    ddp_full, fsdp_full = f"file://{root}/ddp-full", f"file://{root}/fsdp-full"
    out = root / "out"
    runs = {}
    # the DDP and FSDP references and the pause share one 2-rank launch (one torchrun start less); the
    # pause is its last phase: SIGTERM after batch 3, batch 4 is the last; checkpoints at batch 2
    # (interval) and 4 (the pause), and the launch exits 75
    runs["reference"] = runs["pause"] = launch(2, data, out, [
        {"name": "ddp", "parallelism": "ddp", "layout": "full", "save_folder": ddp_full, "save_interval": "4ba"},
        {"name": "fsdp", "parallelism": "fsdp", "layout": "full", "save_folder": fsdp_full, "save_interval": "4ba"},
        {"name": "pause", "parallelism": "fsdp", "layout": "sharded", "save_folder": s3, "save_interval": "2ba",
         "pause_at": 3}], env)
    paused = f"{s3}/ep0-ba4"
    runs["one"] = launch(1, data, out, [
        {"name": "fsdp1", "parallelism": "fsdp", "load_path": paused, "save_folder": f"file://{root}/one-sharded",
         "layout": "sharded"},
        {"name": "plain_from_fsdp_full", "parallelism": "none", "load_path": f"{fsdp_full}/ep0-ba4"},
        {"name": "fsdp1_from_ddp", "parallelism": "fsdp", "load_path": f"{ddp_full}/ep0-ba4",
         "save_folder": f"file://{root}/one-full", "layout": "full"}], env)
    runs["two"] = launch(2, data, out, [
        {"name": "fsdp2", "parallelism": "fsdp", "load_path": paused},
        {"name": "ddp_from_fsdp", "parallelism": "ddp", "load_path": paused},
        {"name": "fsdp_from_ddp", "parallelism": "fsdp", "load_path": f"{ddp_full}/ep0-ba4"}], env)
    runs["three"] = launch(3, data, out, [{"name": "fsdp3", "parallelism": "fsdp", "load_path": paused}], env)
    return {"out": out, "runs": runs, "s3": s3, "s3_options": s3_server.options(), "root": root}


def _ok(world, run: str) -> None:
    proc = world["runs"][run]
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_fsdp_trains_like_ddp_with_tied_weights(world):
    proc = world["runs"]["reference"]   # ends with the pause phase: the launch got past both references
    assert "foundry: paused at batch 4" in proc.stderr, proc.stderr[-4000:]
    ddp, fsdp = result(world["out"], "ddp"), result(world["out"], "fsdp")
    assert (ddp["parallelism"], fsdp["parallelism"]) == ("ddp", "fsdp")
    assert_losses(fsdp["losses"], ddp["losses"], range(1, gpt_job.STEPS + 1))
    assert fsdp["tied_at_start"] and fsdp["tied"]  # sharding kept the embedding and the head one parameter


def test_sigterm_pause_publishes_a_sharded_checkpoint_in_s3(world):
    proc = world["runs"]["pause"]
    assert f"exitcode  : {PAUSED_EXIT_CODE}" in proc.stderr, proc.stderr[-4000:]  # torchrun: the workers said 75
    assert "foundry: paused at batch 4" in proc.stderr, proc.stderr[-4000:]
    store = open_store(world["s3"], world["s3_options"])
    assert store_ops.read_latest(store)["checkpoint"] == "ep0-ba4"
    names = [e.name for e in store_ops.list_checkpoints(store) if e.complete]
    assert names == ["ep0-ba2", "ep0-ba4"]  # the mid-run one and the pause's
    manifest = store_ops.read_manifest(store, "ep0-ba4")
    assert manifest.layout == "sharded" and manifest.world_size == 2
    assert sum(f.key.endswith(".distcp") for f in manifest.files) == 2  # one shard file per rank
    paused = result(world["out"], "pause")
    ddp = result(world["out"], "ddp")
    assert_losses(paused["losses"], ddp["losses"], range(1, 5))
    assert paused["tied"]


@pytest.mark.parametrize("run,name,world_size", [("one", "fsdp1", 1), ("two", "fsdp2", 2), ("three", "fsdp3", 3)])
def test_resume_on_1_2_3_ranks_continues_the_losses(world, run, name, world_size):
    _ok(world, run)
    got, ddp = result(world["out"], name), result(world["out"], "ddp")
    assert got["resumed_from"] == "ep0-ba4" and got["world_size"] == world_size
    assert got["parallelism"] == "fsdp"
    assert_losses(got["losses"], ddp["losses"], range(5, gpt_job.STEPS + 1))
    assert got["tied_at_start"] and got["tied"]


def test_fsdp_alone_saves_both_layouts(world):
    """FSDP in one process (world size 1, no torchrun) writes its final checkpoint in either layout."""
    _ok(world, "one")
    for folder in ("one-sharded", "one-full"):
        store = open_store(f"file://{world['root']}/{folder}")
        assert store_ops.read_latest(store)["checkpoint"] == f"ep0-ba{gpt_job.STEPS}"
        assert store_ops.read_manifest(store, f"ep0-ba{gpt_job.STEPS}").world_size == 1


@pytest.mark.parametrize("name", ["ddp_from_fsdp", "fsdp_from_ddp", "plain_from_fsdp_full", "fsdp1_from_ddp"])
def test_fsdp_and_ddp_checkpoints_load_into_each_other(world, name):
    _ok(world, "two" if name in ("ddp_from_fsdp", "fsdp_from_ddp") else "one")
    got, ddp = result(world["out"], name), result(world["out"], "ddp")
    assert got["resumed_from"] == "ep0-ba4"
    assert_losses(got["losses"], ddp["losses"], range(5, gpt_job.STEPS + 1))
    assert got["tied"]
