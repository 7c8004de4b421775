"""The move across all of them (issue 30 part 4), through the CLI and a run YAML: a run started on
the local cluster (1 process), paused (`foundry stop`), resumed on an ssh fleet of two
network-namespace nodes with 4 processes (2 per host), paused, resumed on `ec2` (moto's instances,
their addresses put on the same nodes: tests/support/ec2_nodes.py) with 2 processes (1 per
instance). Data and checkpoints are in the S3 server; the losses equal an uninterrupted run's
within 1e-5; each resumption's cost line (`describe run --json`) is printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.ec2_nodes import (  # noqa: F401  (fixtures)
    InstanceAddresses, add_ec2_cluster, add_s3_secret, ec2_dataset_fixture, ec2_nodes_fixture, ec2_spec)
from support.moto_ec2 import ec2_api_fixture, moto_server_fixture  # noqa: F401  (fixtures)
from support.multinode import check_same_as_reference, ended, ended_how, foundry, steps, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.multinode, pytest.mark.slow]


def reference(data: dict, root: Path, s3_server, base: Path) -> dict:
    """The same job uninterrupted on the local cluster, one process, in a FOUNDRY_HOME of its own."""
    old = os.environ["FOUNDRY_HOME"]   # this test's own (tests/conftest.py)
    os.environ["FOUNDRY_HOME"] = str(base / "ref-home")
    try:
        add_s3_secret(s3_server)
        foundry("run", "-f", str(ec2_spec(base / "ref.yaml", "ref", "local", 1, 1, data, root)))
        run = wait_status("ref", ended, timeout=300)
        assert run["status"] == "completed", ended_how("ref", run)
        return steps(base / "ref-home" / "runs" / "ref")
    finally:
        os.environ["FOUNDRY_HOME"] = old


def pause(name: str, run_dir: Path, until_step: int) -> dict:
    wait_status(name, lambda d: max(steps(run_dir), default=0) >= until_step or ended(d), timeout=300, poll=0.5)
    foundry("stop", name, "--wait", timeout=300)
    run = wait_status(name, ended, timeout=300)
    assert run["status"] == "paused", ended_how(name, run)
    assert max(steps(run_dir)) < 12, "the stop landed after the last step: nothing left to move"
    return run


@pytest.mark.timeout(900)   # ~110 s on an idle machine; 280 s and more beside the other xdist workers
def test_local_to_ssh_fleet_to_ec2_with_other_process_counts_same_losses(ec2_nodes, ec2_dataset, ec2_api, s3_server,
                                                                         tmp_path):
    ref = reference(ec2_dataset, ec2_nodes.root, s3_server, tmp_path)
    addresses = InstanceAddresses(ec2_api, ec2_nodes).start()
    try:
        add_s3_secret(s3_server)
        exe = Path(sys.executable).parent / "foundry"
        subprocess.run([str(exe), "create", "secret", "ssh", "ec2-key", "--private-key", "-"],
                       input=ec2_nodes.key.read_bytes(), check=True, capture_output=True, timeout=60)
        foundry("create", "cluster", "fleet", "--provider", "ssh", "-o", f"hosts={ec2_nodes.hosts(1, 2)}",
                "-o", "gpus_per_host=2", "-o", "secret=ec2-key", "-o", f"python={sys.executable}",
                "-o", "connect_timeout=5", "-o", f"remote_dir={tmp_path / 'remote' / '{host}'}")
        add_ec2_cluster("aws", ec2_nodes, addresses, ec2_api, tmp_path)
        run_dir = tmp_path / "foundry-home" / "runs" / "mover"
        # a step every ~4 s and a stop asked at the first new step of each resumption: a stop takes ~15 s
        # here (each `foundry` command a second or more on a busy 2-core box), and 12 steps must cover 3 legs
        spec = ec2_spec(tmp_path / "run.yaml", "mover", "local", 1, 1, ec2_dataset, ec2_nodes.root, STEP_DELAY="4.0",
                        SAVE_INTERVAL="1ba")
        foundry("run", "-f", str(spec))
        pause("mover", run_dir, 1)
        foundry("resume", "mover", "--cluster", "fleet", "--nodes", "2", "--gpus", "4")
        pause("mover", run_dir, max(steps(run_dir)) + 1)
        foundry("resume", "mover", "--cluster", "aws", "--nodes", "2", "--gpus", "2")
        run = wait_status("mover", ended, timeout=400)
        assert run["status"] == "completed", ended_how("mover", run)
        assert [(r["cluster"], r["nodes"], r["devices"], r["state"]) for r in run["resumptions"]] == [
            ("local", 1, 1, "paused"), ("fleet", 2, 4, "paused"), ("aws", 2, 2, "completed")]
        check_same_as_reference(steps(run_dir), ref)
        ckpts = s3_server.client().list_objects_v2(Bucket=ec2_dataset["bucket"], Prefix="ckpt/mover/")
        assert ckpts.get("KeyCount", 0) > 0                   # the checkpoints are in the S3 server
        assert ec2_api.live_instances() == []                 # the ec2 resumption's instances are gone
        assert sorted(node for _, _, node in addresses.history) == [1, 2]
        print("\nmoved run's cost (describe run --json):")
        for res in run["resumptions"]:
            print(f"  #{res['index']} {res['cluster']:6} {res['devices']} device(s) {res['state']:9} "
                  f"{json.dumps(res.get('cost'))}")
        print(f"  total {json.dumps(run.get('cost'))}")
    finally:
        addresses.stop()
