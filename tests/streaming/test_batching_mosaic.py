"""batching_method 'per_stream', 'stratified' and 'device_per_stream' against the real
mosaicml-streaming 0.13: the planning functions case by case (random layouts, stream weights, world
shapes, resumptions, refusals), then a two-stream mixture end to end on 1 and 2 ranks (separate
processes): the same ids in the same order through a DataLoader with 0 and 2 workers (2 only on 2
ranks) for two epochs, and a StreamingDataLoader stopped mid-epoch that continues the same from
mosaic's state and from Foundry's."""

from __future__ import annotations

import copy
import json
import random
import warnings

import pytest

from foundry.streaming.writer import MDSWriter

from order_cases import foundry_answer, work_case  # noqa: E402 - beside this file (conftest)
from test_order_mosaic import _both, _peer_json  # noqa: E402

pytestmark = pytest.mark.subprocess  # the peer (mark from its fixture) and ranks are processes

METHODS = ["per_stream", "stratified", "device_per_stream"]


def test_batching_plans_match_mosaic_case_by_case(mosaic_peer):
    rnd = random.Random(2902)
    cases = []
    for method in METHODS:
        for i in range(60):
            case = work_case(rnd, batching=method)
            if i % 3 == 0:
                case["drop"] = rnd.randint(0, 80)  # resumed mid-epoch (not always on a global batch)
            cases.append(case)
    answers = json.loads(_peer_json(mosaic_peer, cases))
    refused = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny shuffle blocks warn
        for case, want in zip(cases, answers):
            got = foundry_answer(copy.deepcopy(case))
            if "error" in want:
                refused += 1
                assert "error" in got and "ConfigError" in got["error"], (case, want, got)
            else:
                assert got == want, json.dumps(case)
    assert refused < len(cases) // 4


def _write(out, n, first_id, size_limit=400):
    with MDSWriter(out=str(out), columns={"id": "int"}, size_limit=size_limit) as w:
        for i in range(n):
            w.write({"id": first_id + i})
    return str(out)


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching-data")
    a, b = _write(root / "a", 300, 0), _write(root / "b", 160, 1000)
    return [{"remote": a, "repeat": 1.5}, {"remote": b, "choose": 100}]


def _kw(method, streams):
    return {"streams": streams, "shuffle": True, "batching_method": method, "shuffle_block_size": 100,
            "num_canonical_nodes": 2}


@pytest.mark.timeout(600)  # ~55 s on 2 ranks on an idle 2-core machine, ~200 s on a busy one
@pytest.mark.parametrize("world", [1, 2])
def test_mixture_batches_and_resumption_match_mosaic(mosaic_peer, mixture, tmp_path, world):
    batch = 8 // world
    workers = (0, 2) if world == 1 else (2,)  # each process group costs more than its jobs: fewer on 2 ranks
    epochs = [{"kind": "epochs", "data": None, "kw": _kw(m, mixture), "batch": batch, "workers": w}
              for m in METHODS for w in workers]
    stops = [{"kind": "stop", "data": None, "kw": _kw(m, mixture), "batch": batch, "workers": 2, "stop": 9}
             for m in METHODS]
    mosaic, foundry = _both(mosaic_peer.python, world, tmp_path, epochs + stops, "first")
    keys = ("epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes")
    for rank in range(world):
        for job, m, f in zip(epochs, mosaic[rank], foundry[rank]):
            assert f == m, f"rank {rank}: {job}"
        for job, m, f in zip(stops, mosaic[rank][len(epochs):], foundry[rank][len(epochs):]):
            assert f["ids"] == m["ids"], f"rank {rank}: {job}"
            assert {k: f["state"][k] for k in keys} == {k: m["state"][k] for k in keys}, job
    for i, job in enumerate(epochs):
        firsts = [foundry[rank][i][0] for rank in range(world)]
        assert all(e0 != foundry[rank][i][1] and len(e0) % batch == 0 for rank, e0 in enumerate(firsts)), job
        assert {x >= 1000 for e0 in firsts for x in e0} == {False, True}  # both streams in the epoch
    resumes = [dict({k: v for k, v in job.items() if k != "stop"}, kind="resume", state=side[0][len(epochs) + i]["state"])
               for side in (mosaic, foundry) for i, job in enumerate(stops)]
    m2, f2 = _both(mosaic_peer.python, world, tmp_path, resumes, "second")
    for rank in range(world):
        for i, job in enumerate(stops):
            reference = m2[rank][i]  # mosaic from its own state
            assert m2[rank][len(stops) + i] == reference  # mosaic from Foundry's state
            assert f2[rank][i] == reference and f2[rank][len(stops) + i] == reference, f"rank {rank}: {job}"
            at = len(workers) * METHODS.index(job["kw"]["batching_method"]) + len(workers) - 1
            straight = foundry[rank][at][0]  # that method's epoch 0 with 2 workers
            assert foundry[rank][len(epochs) + i]["ids"] + reference == straight
