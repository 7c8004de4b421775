"""Sample order against the real mosaicml-streaming 0.13: the same ids on every rank, in the same
order, for every shuffle algorithm, 1 and 2 ranks (separate processes), 0 and 2 DataLoader workers,
epochs 0 and 1; state dicts interchanged both ways mid-epoch; exact epochs and plain-loop resume.

The planning functions are compared case by case in one peer process (many random layouts, stream
weights, world shapes, resumptions); the datasets are compared end to end by running
order_ranks.py under each library."""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from foundry.streaming.plan import interleave_ranks
from foundry.streaming.writer import MDSWriter

from order_cases import foundry_answer, work_case  # noqa: E402 - beside this file (conftest)

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
RANKS_SCRIPT = HERE / "order_ranks.py"
BATCH = 8
CONFIGS = {
    "py1e": {"shuffle": True},
    "py1e-c4": {"shuffle": True, "shuffle_block_size": 100, "num_canonical_nodes": 4},
    "py1br": {"shuffle": True, "shuffle_algo": "py1br", "shuffle_block_size": 100, "num_canonical_nodes": 2},
    "py1s": {"shuffle": True, "shuffle_algo": "py1s", "shuffle_seed": 3},
    "py2s": {"shuffle": True, "shuffle_algo": "py2s", "num_canonical_nodes": 3},
    "naive": {"shuffle": True, "shuffle_algo": "naive", "shuffle_seed": 11},
    "sequential-c4": {"shuffle": False, "num_canonical_nodes": 4},
}


def _write(out: Path, n: int, size_limit: int) -> str:
    with MDSWriter(out=str(out), columns={"id": "int"}, size_limit=size_limit) as w:
        for i in range(n):
            w.write({"id": i})
    return str(out)


def _run(python: str | Path, lib: str, world: int, tmp: Path, jobs: list, tag: str) -> list[list]:
    """Answers per rank."""
    (tmp / f"{tag}.jobs.json").write_text(json.dumps(jobs))
    out = tmp / tag
    cmd = [str(python), *(["-I"] if lib == "mosaic" else []), str(RANKS_SCRIPT), lib, str(world), str(out),
           str(tmp / f"{tag}.jobs.json")]
    env = {k: v for k, v in os.environ.items() if not (lib == "mosaic" and k.startswith("PYTHON"))}
    env["TMPDIR"] = str(tmp)  # mosaic's file locks stay in this test's folder
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(var, None)
    # its own process group, killed whole when it ends or the test does (pytest-timeout, an error): its
    # ranks and their DataLoader workers would otherwise outlive the test, holding mosaic's /dev/shm names
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp, env=env,
                             start_new_session=True)
    try:
        stdout, stderr = popen.communicate(timeout=900)
    finally:
        _kill_group(popen)
    proc = subprocess.CompletedProcess(cmd, popen.returncode, stdout, stderr)
    assert proc.returncode == 0, f"{lib} x{world}: {proc.stdout[-2000:]}\n{proc.stderr[-5000:]}"
    return [json.loads(Path(f"{out}.{r}.json").read_text()) for r in range(world)]


def _kill_group(popen: subprocess.Popen) -> None:
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except ProcessLookupError:   # the group is gone already
        pass
    popen.wait()


def _both(python, world, tmp, jobs, tag):
    """(mosaic's answers, Foundry's answers), per rank."""
    return (_run(python, "mosaic", world, tmp, jobs, f"{tag}-mosaic"),
            _run(sys.executable, "foundry", world, tmp, jobs, f"{tag}-foundry"))


def _peer_json(mosaic_peer, cases) -> str:
    proc = subprocess.run([str(mosaic_peer.python), "-I", str(HERE / "mosaic_orders.py")], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_planning_functions_match_mosaic_case_by_case(mosaic_peer):
    rnd = random.Random(20260)
    cases = [work_case(rnd) for _ in range(120)]
    for case in cases[:40]:
        case["drop"] = rnd.randint(0, 60)  # resumed mid-epoch
    for case in cases[40:60]:  # resumed on a node count that does not divide the canonical nodes
        case.update(partition_algo="relaxed", c=2, p=3, initial=2, b=2, r=1)
    answers = json.loads(_peer_json(mosaic_peer, cases))
    refused = 0
    for case, want in zip(cases, answers):
        got = foundry_answer(copy.deepcopy(case))
        if "error" in want:
            refused += 1
            assert "error" in got, (case, want)
        else:
            assert got == want, json.dumps(case)
    assert refused < len(cases) // 4


def _jobs(world: int, small: str, big: str) -> dict[str, list]:
    """Round one's jobs by group; every group runs in the same processes."""
    jobs = {"big": [{"kind": "plain", "data": big, "kw": {"shuffle": True}, "batch": 256},
                    {"kind": "plain", "data": big, "kw": {"shuffle": True}, "batch": 256, "limit": 22_500 // world}]}
    if world < 3:
        jobs["epochs"] = [{"kind": "epochs", "data": small, "kw": kw, "batch": BATCH, "workers": w}
                          for kw in CONFIGS.values() for w in (0, 2)]
        jobs["stops"] = [{"kind": "stop", "data": small, "kw": CONFIGS[k], "batch": BATCH, "workers": w, "stop": 7}
                         for k in ("py1e", "py1br") for w in (0, 2)]
        jobs["stops"].append({"kind": "plain", "data": small, "kw": CONFIGS["py1e"], "batch": BATCH, "limit": 77})
    return jobs


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("order-data")
    return _write(root / "small", 600, 700), _write(root / "big", 30_001, 1 << 16)


@pytest.fixture(scope="module")
def runs(mosaic_peer, datasets, tmp_path_factory):
    """world -> (jobs, round one answers, round two jobs, round two answers), computed once."""
    done = {}

    def get(world):
        if world not in done:
            tmp = tmp_path_factory.mktemp(f"order-x{world}")
            groups = _jobs(world, *datasets)
            flat = [j for g in groups.values() for j in g]
            first = _both(mosaic_peer.python, world, tmp, flat, "first")
            answers = {}
            for side, per_rank in zip(("mosaic", "foundry"), first):
                at = 0
                for name, g in groups.items():
                    answers[side, name] = [r[at:at + len(g)] for r in per_rank]
                    at += len(g)
            # round two: each stopped job continues from mosaic's state and from Foundry's state
            second = []
            for name in ("stops", "big"):
                for i, job in enumerate(groups.get(name, [])):
                    if job["kind"] == "epochs" or (job["kind"] == "plain" and job.get("limit") is None):
                        continue
                    for side in ("mosaic", "foundry"):
                        state = answers[side, name][0][i]["state"]
                        second.append(dict({k: v for k, v in job.items() if k not in ("stop", "limit")},
                                           kind="plain" if job["kind"] == "plain" else "resume", state=state,
                                           source=side, of=(name, i)))
            m2, f2 = _both(mosaic_peer.python, world, tmp, second, "second")
            done[world] = (groups, answers, second, {"mosaic": m2, "foundry": f2})
        return done[world]

    return get


def _ids(answer):
    return answer["ids"] if isinstance(answer, dict) else answer


@pytest.mark.parametrize("world", [1, 2])
def test_same_order_every_algorithm_workers_and_epochs(runs, world):
    groups, answers, _, _ = runs(world)
    for i, job in enumerate(groups["epochs"]):
        for rank in range(world):
            m, f = answers["mosaic", "epochs"][rank][i], answers["foundry", "epochs"][rank][i]
            assert f == m, f"rank {rank}: {job}"
            assert (m[0] != m[1]) == job["kw"]["shuffle"]  # epoch 1 is another order
        for epoch in (0, 1):
            assert {s for rank in range(world) for s in answers["foundry", "epochs"][rank][i][epoch]} == set(range(600))


@pytest.mark.parametrize("world", [1, 2])
def test_state_interchange_both_ways(runs, world):
    groups, answers, second, after = runs(world)
    keys = ("epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes")
    for rank in range(world):
        for job, m, f in zip(groups["stops"], answers["mosaic", "stops"][rank], answers["foundry", "stops"][rank]):
            assert f["ids"] == m["ids"], f"rank {rank}: {job}"
            assert {k: f["state"][k] for k in keys} == {k: m["state"][k] for k in keys}, job
    for rank in range(world):
        by_source = {}
        for job, m, f in zip(second, after["mosaic"][rank], after["foundry"][rank]):
            by_source[tuple(job["of"]), job["source"]] = (_ids(m), _ids(f))
        for (of, source), (m, f) in by_source.items():
            reference = by_source[of, "mosaic"][0]  # mosaic resumed from its own state
            assert f == reference, f"Foundry from {source}'s state, rank {rank}: {of}"
            assert m == reference, f"mosaic from {source}'s state, rank {rank}: {of}"
            if of[0] == "stops" and groups["stops"][of[1]]["kind"] == "stop":  # the rest of the straight epoch
                job = groups["stops"][of[1]]
                straight = next(a for j, a in zip(groups["epochs"], answers["foundry", "epochs"][rank])
                                if j["kw"] == job["kw"] and j["workers"] == job["workers"])[0]
                assert answers["foundry", "stops"][rank][of[1]]["ids"] + f == straight


@pytest.mark.parametrize("world", [1, 2, 3])
def test_exact_epochs_and_plain_loop_resume(runs, world):
    """30,001 samples at batch 256: one process reads each sample once; 2 and 3 ranks repeat as few
    as mosaic (1 and 2). A plain loop stopped at 22,500 samples (mid-batch) continues with exactly
    the samples left: 7,501 in one process, 7,502 on two ranks, as mosaic."""
    groups, answers, second, after = runs(world)
    full = [a[0]["ids"] for a in answers["foundry", "big"]]
    assert full == [a[0]["ids"] for a in answers["mosaic", "big"]]
    assert all(a[0]["len"] == len(a[0]["ids"]) for a in answers["foundry", "big"])  # __len__ = what is yielded
    assert sum(len(x) for x in full) - 30_001 == {1: 0, 2: 1, 3: 2}[world]
    assert set(np.concatenate(full).tolist()) == set(range(30_001))
    seq = interleave_ranks(full, 1, world)
    for rank in range(world):
        assert answers["foundry", "big"][rank][1]["ids"] == full[rank][:22_500 // world]
    rest = [[_ids(f) for job, f in zip(second, after["foundry"][rank]) if job["of"] == ("big", 1)]
            for rank in range(world)]
    mosaic_rest = [[_ids(m) for job, m in zip(second, after["mosaic"][rank]) if job["of"] == ("big", 1)]
                   for rank in range(world)]
    assert rest == mosaic_rest
    for source in range(2):  # from mosaic's state and from Foundry's
        tail = [r[source] for r in rest]
        assert sum(len(x) for x in tail) == len(seq) - 22_500
        assert np.array_equal(interleave_ranks(tail, 1, world), seq[22_500:])
