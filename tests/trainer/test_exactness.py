"""Exactness: pause (SIGTERM) + resume in a fresh process equals an uninterrupted run, bitwise;
world size 2 -> 1 and 1 -> 2 see the same global batches and the same loss curve; a kill -9 at
any moment of checkpoint uploads never leaves `latest` unloadable. Local folder and SeaweedFS."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from foundry.plugins.atomic_files import is_temp_name
from foundry.plugins.compute import PAUSED_EXIT_CODE
from foundry.plugins.manager import open_store
from foundry.trainer.checkpoint import store_ops

from . import toy_job

JOB = str(Path(toy_job.__file__))
PY = sys.executable
STEPS, PAUSE_AT = 12, 5


def _losses(run_dir: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def _job(args: list[str], nproc: int = 1, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [PY, JOB, *args] if nproc == 1 else \
        [str(Path(PY).parent / "torchrun"), f"--nproc_per_node={nproc}", "--standalone", JOB, *args]
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("RANK", None), full_env.pop("WORLD_SIZE", None)
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=240)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run, in-process (with dropout, so RNG restore matters)."""
    root = tmp_path_factory.mktemp("ref")
    toy_job.run(STEPS, None, str(root / "run"), out=str(root / "out"), dropout=0.1, autoresume=False)
    return {"params": torch.load(root / "out" / "params.pt"), "losses": _losses(root / "run"),
            "seen": json.loads((root / "out" / "seen-rank0.json").read_text())}


@pytest.fixture(scope="module")
def reference_nodrop(tmp_path_factory):
    root = tmp_path_factory.mktemp("ref-nodrop")
    toy_job.run(STEPS, None, str(root / "run"), out=str(root / "out"), dropout=0.0, autoresume=False)
    return {"params": torch.load(root / "out" / "params.pt"), "losses": _losses(root / "run"),
            "seen": json.loads((root / "out" / "seen-rank0.json").read_text())}


def _pause_resume(save_folder: str, tmp: Path, layout: str = "full"):
    run_dir = tmp / "run"
    common = ["--steps", str(STEPS), "--save-folder", save_folder, "--run-dir", str(run_dir), "--layout", layout]
    first = _job(common + ["--pause-at", str(PAUSE_AT), "--out", str(tmp / "out1")])
    assert first.returncode == PAUSED_EXIT_CODE, first.stderr[-3000:]
    store = open_store(save_folder)
    # the signal arrives in batch_end of PAUSE_AT, so the step after it is the last one
    assert store_ops.read_latest(store)["checkpoint"] == f"ep0-ba{PAUSE_AT + 1}"
    second = _job(common + ["--out", str(tmp / "out2")])
    assert second.returncode == 0, second.stderr[-3000:]
    return torch.load(tmp / "out2" / "params.pt"), _losses(run_dir)


def _assert_bitwise(params, reference):
    for key, value in reference["params"].items():
        assert torch.equal(params[key], value), f"{key} differs after pause/resume"


@pytest.mark.subprocess
def test_pause_resume_bitwise_local_folder(tmp_path, reference):
    params, losses = _pause_resume(str(tmp_path / "ckpt"), tmp_path)
    _assert_bitwise(params, reference)
    assert losses == reference["losses"]  # both processes appended to the same metrics.jsonl


@pytest.mark.integration
def test_pause_resume_bitwise_s3_sharded(tmp_path, reference, s3_bucket):
    params, losses = _pause_resume(f"{s3_bucket.url}/toy/checkpoints", tmp_path, layout="sharded")
    _assert_bitwise(params, reference)
    assert losses == reference["losses"]


def _assert_paused(proc, nproc: int) -> None:
    if nproc == 1:
        assert proc.returncode == PAUSED_EXIT_CODE, proc.stderr[-3000:]
    else:  # torchrun reports any non-zero worker exit as its own failure; the workers said 75
        assert f"exitcode  : {PAUSED_EXIT_CODE}" in proc.stderr, proc.stderr[-3000:]


def _world_change(tmp: Path, first_nproc: int, second_nproc: int, layout: str, reference) -> None:
    ckpt, run_dir = str(tmp / "ckpt"), tmp / "run"
    common = ["--steps", str(STEPS), "--save-folder", ckpt, "--run-dir", str(run_dir), "--layout", layout,
              "--dropout", "0"]
    first = _job(common + ["--pause-at", str(PAUSE_AT), "--out", str(tmp / "o1")], nproc=first_nproc)
    _assert_paused(first, first_nproc)
    paused = store_ops.read_manifest(open_store(ckpt), store_ops.read_latest(open_store(ckpt))["checkpoint"])
    second = _job(common + ["--out", str(tmp / "o2"), "--count-downloads", str(tmp / "gets")], nproc=second_nproc)
    assert second.returncode == 0, second.stderr[-3000:]
    # one download per node: rank 0 fetched every file of the checkpoint once, the other ranks read its folder
    fetched = {p.name: sorted(p.read_text().split()) for p in (tmp / "gets").iterdir()}
    assert fetched == {"gets-rank0.txt": sorted(f"{paused.name}/{f.key}" for f in paused.files)}
    # The global batches, reassembled from every rank, are the uninterrupted run's batches.
    seen = []
    for part, nproc in (("o1", first_nproc), ("o2", second_nproc)):
        ranks = [json.loads((tmp / part / f"seen-rank{r}.json").read_text()) for r in range(nproc)]
        seen += [sum((ranks[r][i] for r in range(nproc)), []) for i in range(len(ranks[0]))]
    assert seen == reference["seen"]
    losses = _losses(run_dir)
    assert sorted(losses) == sorted(reference["losses"])
    for step, loss in reference["losses"].items():
        assert losses[step] == pytest.approx(loss, rel=1e-5, abs=1e-6)
    params = torch.load(tmp / "o2" / "params.pt")
    for key, value in reference["params"].items():
        torch.testing.assert_close(params[key], value, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_world_size_2_to_1_sharded(tmp_path, reference_nodrop):
    _world_change(tmp_path, 2, 1, "sharded", reference_nodrop)


@pytest.mark.slow
def test_world_size_1_to_2_full(tmp_path, reference_nodrop):
    _world_change(tmp_path, 1, 2, "full", reference_nodrop)


def _in_flight(store, pending_uploads, earlier: set) -> bool:
    """Whether an upload is in flight (or was left so by a kill): a checkpoint newer than `latest`
    (files, no pointer yet) or an unfinished write (a local temp file, an S3 multipart upload) that
    was not there before this round's writer started."""
    checkpoints = store_ops.list_checkpoints(store)
    published = max((c.batch for c in checkpoints if c.latest), default=-1)
    return any(c.batch > published for c in checkpoints) or bool(pending_uploads() - earlier)


def _kill_during_uploads(save_folder: str, tmp: Path, rounds: int, seed: int, pending_uploads) -> None:
    """Checkpoint every batch with a ~50 MB state; SIGKILL at random moments; `latest` must load.

    Each round's writer (resuming from `latest`) must have published a checkpoint of its own and be
    running when killed; at least one kill must catch an upload in flight (the last round waits for
    one if no random kill did), so the load below really follows an interrupted upload."""
    rng = random.Random(seed)
    store = open_store(save_folder)
    args = [PY, JOB, "--steps", "100000", "--save-folder", save_folder, "--run-dir", str(tmp / "run"),
            "--save-interval", "1ba", "--width", "512", "--hidden", "4096", "--dropout", "0"]
    mid_upload_kills = 0
    for i in range(rounds):
        before, earlier = store_ops.read_latest(store), pending_uploads()
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while store_ops.read_latest(store) == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert store_ops.read_latest(store) != before, f"round {i}: the writer published no checkpoint in 120 s"
        time.sleep(rng.uniform(0.0, 1.5))
        if i == rounds - 1 and mid_upload_kills == 0:  # none of the random moments hit an upload: wait for one
            while not _in_flight(store, pending_uploads, earlier) and time.monotonic() < deadline:
                time.sleep(0.005)
        proc.kill()
        assert proc.wait() == -signal.SIGKILL, f"round {i}: the writer ended by itself: {proc.stderr.read()[-3000:]}"
        proc.stderr.close()
        pointer = store_ops.read_latest(store)
        mid_upload_kills += _in_flight(store, pending_uploads, earlier)
        dest = tmp / f"load{i}"
        with_warnings = []
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = store_ops.download_loadable(store, dest)
            with_warnings = [str(w.message) for w in caught]
        assert found is not None
        manifest, folder = found
        assert manifest.name == pointer["checkpoint"], with_warnings  # latest itself loaded, no fallback
        state = torch.load(folder / "state.pt", weights_only=True)
        assert state["model"]
        shutil.rmtree(dest)
    assert mid_upload_kills >= 1, "no kill caught a checkpoint upload in flight"


@pytest.mark.slow
def test_kill9_during_uploads_local_folder(tmp_path):
    ckpt = tmp_path / "ckpt"

    def temp_files() -> set:
        return {os.path.join(d, f) for d, _, files in os.walk(ckpt) for f in files if is_temp_name(f)}

    _kill_during_uploads(str(ckpt), tmp_path, rounds=4, seed=1, pending_uploads=temp_files)


@pytest.mark.slow
@pytest.mark.integration
def test_kill9_during_uploads_s3(tmp_path, s3_bucket):
    client = s3_bucket.client()

    def multipart_uploads() -> set:
        return {u["UploadId"] for u in client.list_multipart_uploads(Bucket=s3_bucket.name).get("Uploads", [])}

    _kill_during_uploads(f"{s3_bucket.url}/kill/checkpoints", tmp_path, rounds=3, seed=2, pending_uploads=multipart_uploads)
