"""Runs across nodes of a real multi-node Slurm, moved between node counts, through the CLI and a run YAML:
2 nodes x 2 ranks -> stop -> `foundry resume --nodes 3` (3 x 2), and local (1 node) -> Slurm 2 nodes
behind WAN links. Losses equal an uninterrupted 1-process run; every rank's launch variables and every
node's log checked; egress bytes per node checked against the dataset's and checkpoints' sizes."""

from __future__ import annotations

import json
import re

import pytest

from support.multinode import (
    check_same_as_reference, describe, ended, ended_how, foundry, run_yaml, steps, steps_of_resumption, wait_for,
    wait_status)

pytestmark = [pytest.mark.integration, pytest.mark.multinode]
RANK_ENV = re.compile(r"rank-env host=(\S+) RANK=(\d+) LOCAL_RANK=(\d+) WORLD_SIZE=(\d+) NODE_RANK=(\d+)")


def rank_envs(name: str, resumption: int, world: int) -> list[tuple]:
    rows = []
    for rank in range(world):
        log = foundry("logs", name, "--resumption", str(resumption), "--rank", str(rank))
        match = RANK_ENV.search(log)
        assert match, f"rank {rank} of resumption {resumption}: no rank-env line in\n{log[-2000:]}"
        rows.append((match.group(1), *map(int, match.groups()[1:])))
    return rows


def check_layout(rows: list[tuple], nodes: int, per_node: int, node_names: list[str]) -> None:
    world = nodes * per_node
    assert [r[1] for r in rows] == list(range(world))
    assert {r[3] for r in rows} == {world}
    for host, rank, local_rank, _, node_rank in rows:
        assert rank == node_rank * per_node + local_rank and 0 <= local_rank < per_node
    hosts = {}
    for host, _, _, _, node_rank in rows:
        hosts.setdefault(node_rank, set()).add(host)
    assert all(len(h) == 1 for h in hosts.values()), hosts          # one node rank = one host
    assert sorted(h.pop() for h in hosts.values()) == sorted(node_names[:nodes])


@pytest.mark.slow
def test_stop_on_two_nodes_resume_on_three(mn3, mn_home, mn_dataset, mn_reference, s3_server):
    spec = run_yaml(mn_home["tmp"] / "run.yaml", "grow", "mn3", 2, 4, mn_dataset, mn_dataset["bucket"], mn3,
                    STEP_DELAY="1.0")
    foundry("run", "-f", str(spec))
    run_dir = mn_home["tmp"] / "foundry-home" / "runs" / "grow"
    wait_for(lambda: len(steps(run_dir)) >= 3, timeout=240)
    foundry("stop", "grow", "--wait", timeout=240)
    paused = describe("grow")
    assert paused["status"] == "paused", paused
    assert max(steps_of_resumption(run_dir, 0)) < 12, "the stop landed after the last step: nothing to move"
    check_layout(rank_envs("grow", 0, 4), 2, 2, mn3.node_names)

    foundry("resume", "grow", "--nodes", "3")          # keeps 2 processes per node: 6 in all
    done = wait_status("grow", ended, timeout=300)
    assert done["status"] == "completed", ended_how("grow", done)
    res = done["resumptions"]
    assert [(r["cluster"], r["nodes"], r["devices"], r["state"]) for r in res] == [
        ("mn3", 2, 4, "paused"), ("mn3", 3, 6, "completed")]
    check_layout(rank_envs("grow", 1, 6), 3, 2, mn3.node_names)
    check_same_as_reference(steps(run_dir), mn_reference)
    check_egress(done, mn_dataset, s3_server, "grow", steps_of_resumption(run_dir, 0), per_node=2)
    text = foundry("describe", "run", "grow")
    assert "Transfers per node" in text and "mna3" in text and "estimated transfer cost $" in text


@pytest.mark.slow
def test_local_to_two_slurm_nodes_with_clusters_side_by_side(mn3, mn2, mn_home, mn_dataset, mn_reference, s3_server):
    # two Slurm clusters, each through its own slurm.conf, whatever SLURM_CONF the foundry process has
    clusters = {c["name"]: c for c in json.loads(foundry("get", "clusters", "--json"))}
    assert (clusters["mn3"]["nodes"], clusters["mn2"]["nodes"]) == (3, 2)
    assert clusters["mn3"]["state"] == clusters["mn2"]["state"] == "ready"

    submit = mn_home["tmp"] / "project"
    submit.mkdir()
    spec = run_yaml(mn_home["tmp"] / "run.yaml", "move", "local", 1, 1, mn_dataset, mn_dataset["bucket"], mn3,
                    STEP_DELAY="1.0")
    foundry("run", "-f", str(spec), cwd=submit)
    run_dir = mn_home["tmp"] / "foundry-home" / "runs" / "move"
    wait_for(lambda: len(steps(run_dir)) >= 3, timeout=240)
    foundry("stop", "move", "--wait", timeout=240)
    assert describe("move")["status"] == "paused"
    assert max(steps_of_resumption(run_dir, 0)) < 12, "the stop landed after the last step: nothing to move"

    # both nodes of mn2 behind a WAN link (40 ms RTT, 200 Mbit): data, checkpoint load and the final
    # checkpoint upload all cross it, whichever node rank 0 lands on
    for n in (1, 2):
        mn2.wan_on(n, 20, "200mbit")
    try:
        foundry("resume", "move", "--cluster", "mn2", "--nodes", "2", cwd=mn_home["tmp"])   # typed elsewhere
        done = wait_status("move", ended, timeout=300)
    finally:
        for n in (1, 2):
            mn2.wan_off(n)
    assert done["status"] == "completed", ended_how("move", done)
    assert [(r["cluster"], r["nodes"], r["devices"], r["state"]) for r in done["resumptions"]] == [
        ("local", 1, 1, "paused"), ("mn2", 2, 2, "completed")]
    check_layout(rank_envs("move", 1, 2), 2, 1, mn2.node_names)
    for rank in range(2):   # jobs start where the run was created, not where `resume` was typed
        assert f"cwd={submit} " in foundry("logs", "move", "--rank", str(rank)) + " "
    check_same_as_reference(steps(run_dir), mn_reference)
    check_egress(done, mn_dataset, s3_server, "move", steps_of_resumption(run_dir, 0), per_node=1)


def check_egress(run: dict, dataset: dict, s3_server, name: str, paused_steps: dict, per_node: int) -> None:
    """Exact bytes per node, tested against the dataset's and the checkpoints' sizes."""
    shards, index = dataset["bytes"], dataset["index_bytes"]
    objects = {o["Key"]: o["Size"] for o in s3_server.client().list_objects_v2(
        Bucket=dataset["bucket"], Prefix=f"ckpt/{name}/")["Contents"]}

    def ckpt_bytes(batch: int) -> int:
        return sum(size for key, size in objects.items() if f"/ep0-ba{batch}/" in key)

    total_data = 0
    for res in run["resumptions"]:
        assert len(res["egress"]) == res["nodes"], res["egress"]       # every node of it reported
        for node, usage in res["egress"].items():
            # at most one copy of the data per node (its ranks share one cache), plus each rank's index.json
            assert index <= usage["data"]["read"] <= shards + per_node * index, (node, usage["data"])
            total_data += usage["data"]["read"]
    assert total_data >= shards                                     # one epoch: the dataset at least once
    first, last = run["resumptions"][0], run["resumptions"][-1]
    written0 = sum(u["checkpoint"]["written"] for u in first["egress"].values())
    paused_at = max(paused_steps)
    assert ckpt_bytes(paused_at) <= written0 <= ckpt_bytes(paused_at) + 4096   # the pause checkpoint + pointer
    written1 = sum(u["checkpoint"]["written"] for u in last["egress"].values())
    assert written1 == ckpt_bytes(12) + objects[f"ckpt/{name}/latest"]         # final checkpoint + latest
    for node, usage in last["egress"].items():   # every node of the new world loaded the pause checkpoint once
        # (one download per node, its ranks read the node's copy); each rank reads the small `latest` pointer
        assert ckpt_bytes(paused_at) <= usage["checkpoint"]["read"] <= ckpt_bytes(paused_at) + per_node * 4096
    total = run["egress"]["total"]
    assert total["data"]["read"] == total_data
    assert run["egress"]["cost"]["usd"] > 0 and set(run["egress"]["nodes"]) >= set(last["egress"])
