"""The exact-resume matrix: a straight run of N batches vs the same run stopped at a batch k
(mid-epoch unless said) and resumed, with checkpoints in SeaweedFS (S3). Final parameters
torch.equal, logged losses identical, the same sample ids in every batch.

Factors (every value covered; pairs where they interact, not the full product):
  optimizer  sgd (stateless) | sgd+momentum (nesterov) | adamw | rmsprop (any torch.optim)
  scheduler  none | WarmupCosine | WarmupConstant | torch StepLR | torch OneCycleLR
  clipping, microbatches (2 = accumulation over 4, 'auto'), a GradScaler, dropout 0 / 0.1
  loader     StreamingDataset (shuffle) via StreamingDataLoader with 0 and 2 workers | a plain list
             (no state: fast-forwarded) | a stateful loader of its own
  stop       max_duration=k then a new Trainer in the same process | max_duration=k then autoresume
             in a fresh process | SIGTERM to the whole process group of a subprocess (pause)
A schedule computed from max_duration (WarmupCosine) is a different schedule when the run is cut
short by max_duration, so it is paired with the SIGTERM stop only (see docs/resume.md).

World size (torchrun, gloo): 2 -> 2 bitwise, 2 -> 1 (same global batch) batches identical and
losses within floating-point tolerance.

Processes are reused: the straight and same-process runs run in the test process, every fresh
process runs all its cases one after the other. The other ways of feeding data (torch's DataLoader
over a StreamingDataset, a DistributedSampler, an eval loader, kill -9 stops) are in
test_loader_kinds.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from . import matrix_job
from .matrix_job import Case

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASES = [
    Case("sgd-plain-toy-sigterm", optimizer="sgd", loader="toy", mode="sigterm"),
    Case("sgd-list-maxdur", optimizer="sgd", loader="list", scheduler="torch_step", mode="max_duration"),
    Case("momentum-cosine-clip-mb2-w0-sigterm", optimizer="sgd_momentum", scheduler="warmup_cosine", clip=1.0,
         microbatch=2, workers=0, mode="sigterm"),
    Case("momentum-constant-w2-fresh", optimizer="sgd_momentum", scheduler="warmup_constant", workers=2,
         mode="fresh"),
    Case("adamw-cosine-auto-w2-sigterm", optimizer="adamw", scheduler="warmup_cosine", microbatch="auto",
         workers=2, mode="sigterm"),
    Case("adamw-onecycle-scaler-clip-w0-maxdur", optimizer="adamw", scheduler="torch_onecycle", scaler=True,
         clip=0.5, workers=0, mode="max_duration"),
    Case("adamw-nodrop-mb2-list-fresh", optimizer="adamw", dropout=0.0, microbatch=2, loader="list", mode="fresh"),
    Case("rmsprop-step-scaler-w2-sigterm", optimizer="rmsprop", scheduler="torch_step", scaler=True, workers=2,
         mode="sigterm"),
    Case("rmsprop-auto-clip-toy-fresh", optimizer="rmsprop", microbatch="auto", clip=1.0, loader="toy", mode="fresh"),
    # at an epoch's end (6 batches per epoch): checkpointed after the epoch ended (max_duration 1ep),
    # the next epoch's iter() comes after the restore; or paused at the epoch's last batch
    Case("adamw-epoch-end-w0-fresh", optimizer="adamw", scheduler="warmup_constant", stop_at=6,
         first_duration="1ep", mode="fresh"),
    Case("momentum-epoch-end-w2-maxdur", optimizer="sgd_momentum", workers=2, stop_at=6, first_duration="1ep",
         mode="max_duration"),
    Case("momentum-last-batch-list-sigterm", optimizer="sgd_momentum", loader="list", stop_at=6, mode="sigterm"),
]
JOB = str(Path(matrix_job.__file__))


def _losses(run_dir: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def _run_jobs(jobs: list[dict], tmp: Path, tag: str, nproc: int = 1) -> subprocess.CompletedProcess:
    spec = tmp / f"{tag}.json"
    spec.write_text(json.dumps(jobs))
    cmd = [sys.executable, JOB, str(spec)] if nproc == 1 else \
        [str(Path(sys.executable).parent / "torchrun"), f"--nproc_per_node={nproc}", "--standalone", JOB, str(spec)]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    # its own process group: the SIGTERM cases signal the whole group, as a scheduler does
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, start_new_session=True)


@pytest.fixture(scope="module")
def bucket_url(s3_server):
    mp = pytest.MonkeyPatch()
    for key, value in s3_server.env().items():
        mp.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "R2_ENDPOINT_URL"):
        mp.delenv(key, raising=False)
    yield f"s3://{s3_server.create_bucket()}"
    mp.undo()


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, bucket_url):
    """Runs every case: straight, stopped and resumed. Returns {case name: (straight dir, resumed dir)}."""
    tmp = tmp_path_factory.mktemp("matrix")
    threads = torch.get_num_threads()
    data = str(tmp / "data")
    matrix_job.write_dataset(data)
    dirs, first, second = {}, [], []
    for case in CASES:
        base = {"case": asdict(case), "data": data}
        straight = dict(base, phase="straight", run_dir=str(tmp / case.name / "straight"),
                        out=str(tmp / case.name / "straight-out"))
        resumed = dict(base, run_dir=str(tmp / case.name / "resumed"), save_url=f"{bucket_url}/{case.name}")
        dirs[case.name] = (tmp / case.name / "straight", tmp / case.name / "resumed")
        matrix_job.run_job(straight)
        stop = dict(resumed, phase="first", out=str(tmp / case.name / "first-out"))
        cont = dict(resumed, phase="second", out=str(tmp / case.name / "resumed-out"))
        if case.mode == "max_duration":
            matrix_job.run_job(stop)
            matrix_job.run_job(cont)
        else:
            first.append(stop)
            second.append(cont)
    torch.set_num_threads(threads)
    for tag, jobs in (("first", first), ("second", second)):
        proc = _run_jobs(jobs, tmp, tag)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert "killed by signal" not in proc.stderr, proc.stderr[-4000:]
    return dirs


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_resume_is_bitwise_exact(case, matrix):
    straight, resumed = matrix[case.name]
    stopped = json.loads((resumed.parent / "first-out" / "result.json").read_text())
    assert stopped == {**stopped, "paused": case.mode == "sigterm", "batch": case.stop_at}
    seen = json.loads((straight.parent / "straight-out" / "seen-rank0.json").read_text())
    seen_resumed = (json.loads((resumed.parent / "first-out" / "seen-rank0.json").read_text())
                    + json.loads((resumed.parent / "resumed-out" / "seen-rank0.json").read_text()))
    assert seen_resumed == seen and len(seen) == case.steps
    assert _losses(resumed) == _losses(straight)
    ref = torch.load(straight.parent / "straight-out" / "params.pt")
    got = torch.load(resumed.parent / "resumed-out" / "params.pt")
    for key, value in ref.items():
        assert torch.equal(got[key], value), f"{key} differs after resume"
    final = json.loads((resumed.parent / "resumed-out" / "result.json").read_text())
    assert final["scale"] == json.loads((straight.parent / "straight-out" / "result.json").read_text())["scale"]


WORLD_CASE = Case("world", optimizer="adamw", scheduler="warmup_cosine", clip=1.0, workers=2, dropout=0.0,
                  mode="sigterm")


def test_world_size_2_to_2_bitwise_and_2_to_1_same_batches(tmp_path, bucket_url):
    data = str(tmp_path / "data")
    matrix_job.write_dataset(data)
    base = {"case": asdict(WORLD_CASE), "data": data}
    save = f"{bucket_url}/world"
    straight = dict(base, phase="straight", run_dir=str(tmp_path / "straight"), out=str(tmp_path / "s-out"))
    first = dict(base, phase="first", run_dir=str(tmp_path / "r2"), out=str(tmp_path / "first-out"), save_url=save)
    proc = _run_jobs([straight, first], tmp_path, "ws2-first", nproc=2)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((tmp_path / "first-out" / "result.json").read_text())["paused"]
    # 2 -> 1 (in this process) from the paused checkpoint, then 2 -> 2 in a fresh torchrun
    one = dict(base, phase="second", run_dir=str(tmp_path / "r1"), out=str(tmp_path / "one-out"),
               save_url=f"{bucket_url}/world-1", load_path=f"{save}/ep0-ba{WORLD_CASE.stop_at}")
    threads = torch.get_num_threads()
    matrix_job.run_job(one)
    torch.set_num_threads(threads)
    second = dict(base, phase="second", run_dir=str(tmp_path / "r2"), out=str(tmp_path / "two-out"), save_url=save)
    proc = _run_jobs([second], tmp_path, "ws2-second", nproc=2)
    assert proc.returncode == 0, proc.stderr[-4000:]

    def global_batches(out: str, nproc: int) -> list[list[int]]:
        ranks = [json.loads((tmp_path / out / f"seen-rank{r}.json").read_text()) for r in range(nproc)]
        return [sorted(sum((ranks[r][i] for r in range(nproc)), [])) for i in range(len(ranks[0]))]

    ref = global_batches("s-out", 2)
    assert global_batches("first-out", 2) + global_batches("two-out", 2) == ref
    assert global_batches("first-out", 2) + global_batches("one-out", 1) == ref
    ref_params = torch.load(tmp_path / "s-out" / "params.pt")
    two = torch.load(tmp_path / "two-out" / "params.pt")
    for key, value in ref_params.items():
        assert torch.equal(two[key], value), f"{key} differs after 2 -> 2"
    assert _losses(tmp_path / "r2") == _losses(tmp_path / "straight")
    one_losses, ref_losses = _losses(tmp_path / "r1"), _losses(tmp_path / "straight")
    assert sorted(one_losses) == list(range(WORLD_CASE.stop_at + 1, WORLD_CASE.steps + 1))
    for step, loss in one_losses.items():
        assert loss == pytest.approx(ref_losses[step], rel=1e-5, abs=1e-6)
    one_params = torch.load(tmp_path / "one-out" / "params.pt")
    for key, value in ref_params.items():
        torch.testing.assert_close(one_params[key], value, rtol=1e-4, atol=1e-5)
