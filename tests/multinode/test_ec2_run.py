"""The ec2 provider with the job really running: moto's EC2 server (tests/support/moto_ec2.py) makes
the instances, and each one's address is put on a network-namespace node running sshd the moment
moto says it runs (tests/support/ec2_nodes.py: the test plays the cloud's part, the provider is not
told). Through the CLI and a run YAML: `foundry run` -> 2 instances launched and tagged -> SSH
answers on the addresses moto gave -> the ssh provider runs the job on both nodes (data and
checkpoints in the S3 server) -> it completes -> the instances are terminated (moto says so) and the
ledger holds nothing live. Prints the time from `foundry run` to the first training step."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.ec2_nodes import (  # noqa: F401  (fixtures)
    InstanceAddresses, add_ec2_cluster, add_s3_secret, ec2_dataset_fixture, ec2_nodes_fixture, ec2_spec)
from support.moto_ec2 import ec2_api_fixture, moto_server_fixture  # noqa: F401  (fixtures)
from support.multinode import ended, ended_how, foundry, steps, wait_for, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.multinode, pytest.mark.slow]


def ledger(home: Path, cluster: str) -> list[dict]:
    folder = home / "cluster-state" / cluster / "instances"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_a_run_on_two_moto_instances_trains_on_the_nodes_and_terminates_them(ec2_nodes, ec2_dataset, ec2_api,
                                                                             s3_server, tmp_path):
    addresses = InstanceAddresses(ec2_api, ec2_nodes).start()
    try:
        add_s3_secret(s3_server)
        add_ec2_cluster("aws", ec2_nodes, addresses, ec2_api, tmp_path)
        home = tmp_path / "foundry-home"
        run_dir = home / "runs" / "on-ec2"
        spec = ec2_spec(tmp_path / "run.yaml", "on-ec2", "aws", 2, 2, ec2_dataset, ec2_nodes.root)
        t0 = time.monotonic()
        try:
            foundry("run", "-f", str(spec), timeout=300)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nplaced: {addresses.history}; errors: {addresses.errors}") from None
        launched_s = time.monotonic() - t0
        # The logs are read over SSH from the instances, so only while they are there: read them before
        # anything reconciles the run. `foundry logs` does not (no watchdog runs here), but each
        # `foundry describe` does, and the one that finds the job done terminates the instances. The
        # job's 12 steps take well under a second: on a loaded machine one `describe` of a wait for the
        # first step (30 s long there) began before it and ended the run, and the logs were gone.
        early_log = ""
        tries: list[str] = []   # each `foundry logs`: when, how long, its exit, what it says of a host it could not read

        def both_hosts_logged():
            nonlocal early_log
            t = time.monotonic()
            proc = subprocess.run([str(Path(sys.executable).parent / "foundry"), "logs", "on-ec2"],
                                  capture_output=True, text=True, timeout=120)
            early_log = proc.stdout
            said = [line for line in early_log.splitlines() if "[foundry]" in line]   # why a host gave nothing
            tries.append(f"+{t - t0:.1f}s took {time.monotonic() - t:.1f}s exit {proc.returncode}, "
                         f"{len(early_log.splitlines())} lines {' '.join(said)[-600:]} {proc.stderr.strip()[-600:]}")
            found = {line.split("host=")[1].split()[0] for line in early_log.splitlines() if "rank-env host=" in line}
            if len(found) == 2:
                return found
            if len(re.findall(r"\[launcher\] [\d:]+ \S+: job \w+", early_log)) == 2:   # both hosts' jobs ended
                raise AssertionError(f"the job ended without both hosts' rank-env lines:\n{early_log[-3000:]}")
            return None

        try:
            hosts = wait_for(both_hosts_logged, timeout=300, poll=1, what="both hosts' rank-env lines in the logs")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n`foundry logs` tries:\n" + "\n".join(tries[-8:]) +
                                 f"\nlast log:\n{early_log[-3000:]}") from None
        wait_for(lambda: steps(run_dir) or ended(json.loads(foundry("describe", "run", "on-ec2", "--json"))),
                 timeout=300, poll=0.2, what="the first training step")
        first_step_s = time.monotonic() - t0

        made = [i for r in ec2_api.client().describe_instances()["Reservations"] for i in r["Instances"]]
        assert len(made) == 2 and {i["InstanceType"] for i in made} == {"g5.xlarge"}
        for inst in made:
            tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
            assert tags["foundry-run"] == "on-ec2" and tags["foundry-resumption"] == "0"
            assert tags["foundry-cluster"] == "aws" and tags["foundry-token"]
        assert sorted(node for _, _, node in addresses.history) == [1, 2], addresses.errors   # one node each

        run = wait_status("on-ec2", ended, timeout=400)
        assert run["status"] == "completed", ended_how("on-ec2", run)
        assert sorted(steps(run_dir)) == list(range(1, 13))
        assert hosts == {"mne1", "mne2"}, early_log[-3000:]   # trained on both nodes
        assert all((ec2_nodes.root / h / "local" / "cache-on-ec2").is_dir() for h in hosts)   # their shard caches
        ids = [i["InstanceId"] for i in made]
        states = {i["InstanceId"]: i["State"]["Name"] for r in ec2_api.client().describe_instances(
            InstanceIds=ids)["Reservations"] for i in r["Instances"]}
        assert set(states.values()) == {"terminated"}, states  # moto says so
        assert [r["state"] for r in ledger(home, "aws")] == ["terminated"]
        assert json.loads(foundry("get", "instances", "--json")) == []
        assert ec2_api.live_instances() == []
        print(f"\nec2 (moto + namespace nodes): foundry run returned (instances up, SSH answered, job started) "
              f"{launched_s:.1f} s; first training step {first_step_s:.1f} s after `foundry run`; both hosts' lines "
              f"in `foundry logs` at try {len(tries)}")
    finally:
        addresses.stop()
