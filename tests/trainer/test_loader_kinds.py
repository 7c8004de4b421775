"""Exact resume for every ordinary way of feeding data (issue 29.1): a straight run of 14 batches
(past two epochs) against the same run stopped and resumed in a fresh process - identical sample
ids in every batch, identical losses (eval losses too) and bitwise final parameters.

Loader kinds (matrix_job.LOADERS): torch's DataLoader over a StreamingDataset (0 and 2 workers,
drop_last both ways; the dataset not told the batch size, as Composer's seeds write it), over a
StreamingDataset subclass that overrides __getitem__, over a map-style dataset with a
DistributedSampler (the trainer drives set_epoch); Foundry's StreamingDataLoader; a plain list; a
loader with its own state_dict; an eval loader beside the train loader.
Stops: max_duration (then autoresume), SIGTERM to the process group (pause), kill -9 one batch
after a checkpoint. Mid-epoch in the second epoch unless said; a few at an epoch's end.
World size (torchrun, gloo): 2 -> 2 bitwise and 2 -> 1 (same global batches) where the kind allows
it: a DistributedSampler splits the data by the world size, so it resumes on the same one only.

Processes are reused (tests/trainer/test_resume_matrix.py does the same): the straight runs run in
the test process, every first part in one fresh process (each kill -9 in a forked child of it),
every second part in another. Each kind's straight run is shared by its stops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from . import matrix_job
from .matrix_job import Case

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]  # torchrun and fresh processes; no server

SAMPLES = 46  # 5 global batches of 8 and one of 6: drop_last drops one
STEPS, STOP = 14, 9


def _kind(name: str, loader: str, workers: int = 0, drop_last: bool = False, evaluate: bool = False) -> Case:
    return Case(name, optimizer="adamw", scheduler="warmup_constant", loader=loader, workers=workers,
                drop_last=drop_last, eval=evaluate, dropout=0.1, steps=STEPS, stop_at=STOP)


KINDS = {
    "torch-w0": _kind("torch-w0", "torch_streaming"),
    "torch-w2-droplast": _kind("torch-w2-droplast", "torch_streaming", 2, drop_last=True),
    "torch-w2-eval": _kind("torch-w2-eval", "torch_streaming", 2, evaluate=True),
    "torch-w0-droplast": _kind("torch-w0-droplast", "torch_streaming", 0, drop_last=True),
    "subclass-w2": _kind("subclass-w2", "torch_subclass", 2),
    "sampler-w2": _kind("sampler-w2", "map_sampler", 2),
    "sampler-w0-droplast": _kind("sampler-w0-droplast", "map_sampler", 0, drop_last=True),
    "sdl-w2-droplast": _kind("sdl-w2-droplast", "streaming", 2, drop_last=True),
    "sdl-w0": _kind("sdl-w0", "streaming", 0),
    "list": _kind("list", "list"),
    "own-state": _kind("own-state", "toy"),
}
# (kind, stop mode, last batch before the stop, first part's max_duration)
STOPS = [
    ("torch-w0", "fresh", STOP, None), ("torch-w0", "sigterm", STOP, None), ("torch-w0", "kill", STOP, None),
    ("torch-w0", "sigterm", 6, None),  # paused after the epoch's last batch, before its end
    ("torch-w2-droplast", "fresh", STOP, None), ("torch-w2-droplast", "sigterm", STOP, None),
    ("torch-w2-droplast", "kill", STOP, None),
    ("torch-w2-droplast", "fresh", 5, "1ep"),  # at the end of an epoch whose last samples were dropped
    ("torch-w2-eval", "fresh", STOP, None), ("torch-w2-eval", "sigterm", STOP, None),
    ("torch-w2-eval", "kill", STOP, None), ("torch-w2-eval", "fresh", 6, "1ep"),
    ("torch-w0-droplast", "kill", STOP, None),
    ("subclass-w2", "fresh", STOP, None), ("subclass-w2", "kill", STOP, None),
    ("sampler-w2", "fresh", STOP, None), ("sampler-w2", "sigterm", STOP, None), ("sampler-w2", "kill", STOP, None),
    ("sampler-w0-droplast", "sigterm", 10, None),  # paused at an epoch's last batch, before the epoch ended
    ("sdl-w2-droplast", "fresh", STOP, None), ("sdl-w2-droplast", "kill", STOP, None),
    ("sdl-w2-droplast", "fresh", 5, "1ep"),
    ("sdl-w0", "kill", STOP, None), ("sdl-w0", "kill", 12, None), ("list", "kill", STOP, None), ("own-state", "kill", STOP, None),
]
CASES = [replace(KINDS[kind], name=f"{kind}-{mode}-{stop}", mode=mode, stop_at=stop, first_duration=first)
         for kind, mode, stop, first in STOPS]
JOB = str(Path(matrix_job.__file__))


def _run_jobs(jobs: list[dict], tmp: Path, tag: str, nproc: int = 1) -> subprocess.CompletedProcess:
    spec = tmp / f"{tag}.json"
    spec.write_text(json.dumps(jobs))
    cmd = [sys.executable, JOB, str(spec)] if nproc == 1 else \
        [str(Path(sys.executable).parent / "torchrun"), f"--nproc_per_node={nproc}", "--standalone", JOB, str(spec)]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    # its own process group: the SIGTERM cases signal the whole group, as a scheduler does; the
    # workers of a job killed with -9 are reaped with the group
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _job(case: Case, tmp: Path, data: str, phase: str, run: str, out: str, **extra) -> dict:
    return {"case": asdict(case), "data": data, "samples": SAMPLES, "phase": phase, "run_dir": str(tmp / run),
            "out": str(tmp / out), **extra}


def _read(out: Path, rank: int = 0) -> tuple[list, list, list]:
    seen = json.loads((out / f"seen-rank{rank}.json").read_text())
    record = json.loads((out / f"losses-rank{rank}.json").read_text())
    return seen, record["losses"], record["evals"]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Every kind's straight run, every case's stopped and resumed parts. Returns the folder."""
    tmp = tmp_path_factory.mktemp("kinds")
    data = str(tmp / "data")
    matrix_job.write_dataset(data, SAMPLES)
    threads = torch.get_num_threads()
    for name, kind in KINDS.items():
        matrix_job.run_job(_job(kind, tmp, data, "straight", f"{name}/straight", f"{name}/straight-out"))
    torch.set_num_threads(threads)
    first, second = [], []
    for case in CASES:
        save = str(tmp / case.name / "checkpoints")
        first.append(_job(case, tmp, data, "first", f"{case.name}/run", f"{case.name}/first-out", save_url=save))
        second.append(_job(case, tmp, data, "second", f"{case.name}/run", f"{case.name}/second-out", save_url=save))
    first.sort(key=lambda job: job["case"]["mode"] != "kill")  # forks first: before this process trains
    for tag, jobs in (("first", first), ("second", second)):
        proc = _run_jobs(jobs, tmp, tag)
        assert proc.returncode == 0, proc.stderr[-6000:]
    return tmp


def _kind_of(case: Case) -> str:
    return case.name.rsplit("-", 2)[0]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_loader_kind_resumes_exactly(case, matrix):
    kind = _kind_of(case)
    seen, losses, evals = _read(matrix / kind / "straight-out")
    assert len(seen) == STEPS
    first_seen, first_losses, first_evals = _read(matrix / case.name / "first-out")
    if case.mode == "kill":  # it trained one batch past the checkpoint, then died
        assert len(first_seen) == case.stop_at + 1
        first_seen, first_losses = first_seen[:case.stop_at], first_losses[:case.stop_at]
        first_evals = [e for e in first_evals if e[0] <= case.stop_at]
    else:
        result = json.loads((matrix / case.name / "first-out" / "result.json").read_text())
        assert result == {**result, "paused": case.mode == "sigterm", "batch": case.stop_at}
    second_seen, second_losses, second_evals = _read(matrix / case.name / "second-out")
    assert first_seen + second_seen == seen
    assert first_losses + second_losses == losses
    assert first_evals + second_evals == evals
    ref = torch.load(matrix / kind / "straight-out" / "params.pt")
    got = torch.load(matrix / case.name / "second-out" / "params.pt")
    for key, value in ref.items():
        assert torch.equal(got[key], value), f"{key} differs after resume"


def test_straight_runs_see_each_epoch_in_a_new_order(matrix):
    """Exactness would be cheap if every epoch were the same: the samplers and datasets reshuffle
    (the DistributedSampler because the trainer calls set_epoch)."""
    for name, kind in KINDS.items():
        if kind.loader == "list":
            continue
        seen, _, evals = _read(matrix / name / "straight-out")
        per_epoch = 8 if kind.loader == "toy" else 5 if kind.drop_last else 6  # ToyLoader: 64 samples
        first, second = seen[:per_epoch], seen[per_epoch:2 * per_epoch]
        assert first != second, name
        if kind.loader in ("torch_streaming", "map_sampler", "torch_subclass", "streaming"):
            ids = sorted(i for batch in first for i in batch)
            assert ids == (sorted(ids) if kind.drop_last else list(range(SAMPLES))), name
        assert [e[0] for e in evals] == ([4, 8, 12] if kind.eval else []), name


WORLD_KINDS = [
    replace(KINDS["torch-w2-eval"], name="w-torch", mode="sigterm", dropout=0.0),  # 2 -> 1: no per-rank RNG draws
    replace(KINDS["torch-w0-droplast"], name="w-subclass", loader="torch_subclass", mode="sigterm", dropout=0.0),
    replace(KINDS["sampler-w2"], name="w-sampler", mode="sigterm"),  # same world size only
]


def _global_batches(out: Path, nproc: int) -> list[list[int]]:
    ranks = [_read(out, r)[0] for r in range(nproc)]
    return [sorted(sum((ranks[r][i] for r in range(nproc)), [])) for i in range(len(ranks[0]))]


def test_world_size_2_to_2_bitwise_and_2_to_1_same_batches(tmp_path):
    data = str(tmp_path / "data")
    matrix_job.write_dataset(data, SAMPLES)
    jobs, second, one = [], [], []
    killed = replace(WORLD_KINDS[0], name="w-torch-kill", mode="kill")  # its straight run is w-torch's
    for case in WORLD_KINDS + [killed]:
        save = str(tmp_path / case.name / "checkpoints")
        if case is not killed:
            jobs.append(_job(case, tmp_path, data, "straight", f"{case.name}/straight", f"{case.name}/straight-out"))
            jobs.append(_job(case, tmp_path, data, "first", f"{case.name}/r2", f"{case.name}/first-out", save_url=save))
        second.append(_job(case, tmp_path, data, "second", f"{case.name}/r2", f"{case.name}/two-out", save_url=save))
        if case.loader != "map_sampler":
            one.append(_job(case, tmp_path, data, "second", f"{case.name}/r1", f"{case.name}/one-out",
                            save_url=str(tmp_path / case.name / "checkpoints-1"), load_path=f"{save}/ep1-ba{STOP}"))
    kill = [_job(killed, tmp_path, data, "first", f"{killed.name}/r2", f"{killed.name}/first-out",
                 save_url=str(tmp_path / killed.name / "checkpoints"))]
    for tag, batch, nproc in (("first", jobs, 2), ("kill", kill, 2), ("second", second, 2), ("one", one, 1)):
        proc = _run_jobs(batch, tmp_path, tag, nproc=nproc)
        assert tag == "kill" or proc.returncode == 0, proc.stderr[-6000:]  # "kill": both ranks kill -9 themselves
    for case in WORLD_KINDS + [killed]:
        out = tmp_path / case.name
        straight = tmp_path / (WORLD_KINDS[0].name if case is killed else case.name) / "straight-out"
        first_out = out / "first-out"
        if case is killed:  # one batch past the checkpoint: cut there
            for rank in range(2):
                for name in (f"seen-rank{rank}.json", f"losses-rank{rank}.json"):
                    cut = json.loads((first_out / name).read_text())
                    assert len(cut if isinstance(cut, list) else cut["losses"]) == STOP + 1  # killed, not finished
                    cut = cut[:STOP] if isinstance(cut, list) else \
                        {"losses": cut["losses"][:STOP], "evals": [e for e in cut["evals"] if e[0] <= STOP]}
                    (first_out / name).write_text(json.dumps(cut))
        else:
            assert json.loads((first_out / "result.json").read_text())["paused"]
        ref = _global_batches(straight, 2)
        assert len(ref) == STEPS
        assert _global_batches(first_out, 2) + _global_batches(out / "two-out", 2) == ref, case.name
        _, ref_losses, ref_evals = _read(straight)
        _, first_losses, first_evals = _read(first_out)
        _, two_losses, two_evals = _read(out / "two-out")
        assert first_losses + two_losses == ref_losses and first_evals + two_evals == ref_evals, case.name
        ref_params = torch.load(straight / "params.pt")
        two = torch.load(out / "two-out" / "params.pt")
        assert all(torch.equal(two[k], v) for k, v in ref_params.items()), f"{case.name}: 2 -> 2 differs"
        if case.loader == "map_sampler":
            continue
        assert _global_batches(first_out, 2) + _global_batches(out / "one-out", 1) == ref, case.name
        _, one_losses, _ = _read(out / "one-out")
        assert one_losses == pytest.approx(ref_losses[STOP:], rel=1e-5, abs=1e-6), case.name
        one_params = torch.load(out / "one-out" / "params.pt")
        for key, value in ref_params.items():
            torch.testing.assert_close(one_params[key], value, rtol=1e-4, atol=1e-5)
