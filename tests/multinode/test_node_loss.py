"""Node loss: a 2-node run loses one node mid-run (every process of it SIGKILLed, its link down). Slurm
marks the node DOWN and the job NODE_FAIL; the watchdog (`foundry watch`, nobody else acting) files it
as lost, not as a user's stop, relaunches it on the nodes left, and the run completes from its last
checkpoint with the losses of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.multinode import check_same_as_reference, ended, foundry, run_yaml, steps, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.multinode, pytest.mark.slow]
SAVE_EVERY = 2


def allocation(cluster, job_id: str) -> list[str]:
    nodelist = cluster.slurm("squeue", "-h", "-j", job_id, "-o", "%N").strip()
    return cluster.slurm("scontrol", "show", "hostnames", nodelist).split()


def wait_node_usable(cluster, node: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = cluster.slurm("sinfo", "-h", "-n", node, "-o", "%T").strip()
        if state in ("idle", "mixed", "allocated"):
            return
        time.sleep(1)
    raise AssertionError(f"{node} did not come back: {state}")


@pytest.fixture
def watchdog(tmp_path):
    """`foundry watch` in its own process group (its output in watch.log); stopped by that group's id."""
    exe = Path(sys.executable).parent / "foundry"
    log = tmp_path / "watch.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(exe), "watch", "--interval", "2"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    proc.log = log
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def test_node_loss_is_retried_not_stopped_and_completes(mn3, mn_home, mn_dataset, mn_reference, watchdog):
    spec = run_yaml(mn_home["tmp"] / "run.yaml", "survivor", "mn3", 2, 2, mn_dataset, mn_dataset["bucket"], mn3,
                    max_retries=1, STEP_DELAY="1.0", SAVE_INTERVAL=f"{SAVE_EVERY}ba")
    foundry("run", "-f", str(spec))
    run_dir = mn_home["tmp"] / "foundry-home" / "runs" / "survivor"
    run = wait_status("survivor", lambda d: len(steps(run_dir)) >= 5, timeout=240, poll=0.5)
    job_id = run["resumptions"][0]["job_id"]
    nodes = allocation(mn3, job_id)
    victim = nodes[-1]                      # not the batch host (the allocation's first node)
    killed_after = max(steps(run_dir))
    mn3.kill_node(mn3.node_names.index(victim) + 1, power=True)
    try:
        # "lost" with a retry left is the moment between the watchdog filing the loss and its relaunch
        # being recorded: not the end (the run went on to complete, with this assert seeing "lost")
        done = wait_status("survivor", lambda d: ended(d)
                           and not (d["status"] == "lost" and d["retries_used"] < d["max_retries"]),
                           timeout=360, poll=2)
    finally:
        mn3.revive_node(mn3.node_names.index(victim) + 1)
    assert done["status"] == "completed", json.dumps(done, indent=1) + "\nwatchdog:\n" + watchdog.log.read_text()[-3000:]
    lost, retry = done["resumptions"]
    assert lost["state"] == "lost" and "node_fail" in (lost["exit_reason"] or ""), lost
    assert retry["cause"] == "retry" and retry["state"] == "completed", retry
    assert any(e["event"] == "retried" for e in done["events"])
    assert not any(e["event"] == "stopped" for e in done["events"])
    text = foundry("describe", "run", "survivor")
    assert "node_fail" in text and "retry" in text

    # progress lost <= one checkpoint interval: the retry starts right after the last saved batch
    first_retried = min(json.loads(line)["step"] for line in
                        (run_dir / "samples-r1-rank0.jsonl").read_text().splitlines())
    assert killed_after - (first_retried - 1) <= SAVE_EVERY, (killed_after, first_retried)
    check_same_as_reference(steps(run_dir), mn_reference)
    wait_node_usable(mn3, victim)
