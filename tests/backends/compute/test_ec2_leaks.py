"""The ec2 provider against moto's EC2 server on loopback: no instance outlives its resumption.

A `foundry run` killed with SIGKILL at each step of provisioning (ledger written but nothing asked;
instances asked for but not yet in the ledger; waiting for SSH) leaves instances that the next
`foundry get runs` finds by their tag and terminates. SSH that never answers fails the launch with
one clear line and terminates the instances. `get instances` lists live ones with their cost;
`clean instances` terminates leftovers. (moto's instances run nothing: the job itself is not started
here; see docs/providers.md#ec2.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support.control import wait_for
from support.moto_ec2 import REGION, ec2_api_fixture, moto_server_fixture  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLI = [sys.executable, "-c", "from foundry.app.cli.main import main; main()"]


def _setup(cli, tmp_path, api, ssh_wait_s: int = 600) -> tuple[str, str]:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    assert cli("create", "secret", "ssh", "aws-key", "--private-key", str(key))[0] == 0
    code, out, err = cli("create", "cluster", "aws", "--provider", "ec2", "-o", f"region={REGION}",
                         "-o", "instance_type=t3.micro", "-o", f"image={api.image()}", "-o", "secret=aws-key",
                         "-o", f"ssh_wait_s={ssh_wait_s}")
    assert code == 0, out + err
    spec = tmp_path / "run.yaml"
    spec.write_text("name: vm-job\ncommand: python -c 'print(1)'\ncompute:\n  cluster: aws\n  gpus: 1\n")
    return str(spec), os.environ["FOUNDRY_HOME"]


def _ledger(home: str) -> list[dict]:
    folder = os.path.join(home, "cluster-state", "aws", "instances")
    return [json.load(open(os.path.join(folder, f))) for f in sorted(os.listdir(folder)) if f.endswith(".json")]


def test_ssh_that_never_answers_fails_the_launch_and_terminates_the_instance(cli, tmp_path, ec2_api):
    spec, home = _setup(cli, tmp_path, ec2_api, ssh_wait_s=1)
    code, out, err = cli("run", "-f", spec)
    assert code != 0
    assert "SSH did not answer" in out + err and "security group" in out + err
    assert ec2_api.live_instances() == []
    [record] = _ledger(home)
    assert record["state"] == "terminated" and record["instance_ids"]
    tags = {t["Key"]: t["Value"] for t in ec2_api.client().describe_instances(
        InstanceIds=record["instance_ids"])["Reservations"][0]["Instances"][0]["Tags"]}
    assert tags["foundry-run"] == "vm-job" and tags["foundry-resumption"] == "0" and tags["foundry-token"]


@pytest.mark.parametrize("step", ["before_request", "after_request", "waiting_ssh"])
def test_foundry_killed_while_provisioning_leaks_nothing(cli, tmp_path, ec2_api, step):
    spec, home = _setup(cli, tmp_path, ec2_api)
    held = os.path.join(home, "cluster-state", "aws", f"held-{step}")
    proc = subprocess.Popen([*CLI, "run", "-f", spec], env={**os.environ, "FOUNDRY_EC2_HOLD_AT": step},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(held) or proc.poll() is not None, timeout=120, what=f"launch held at {step}")
        assert proc.poll() is None, "foundry run exited before the step"
        # the intent is on disk before any request; from after_request on an instance really runs
        assert [r["state"] for r in _ledger(home)] == ["intent" if step != "waiting_ssh" else "requested"]
        assert len(ec2_api.live_instances()) == (0 if step == "before_request" else 1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    code, out, err = cli("get", "runs")          # the next command touching the run
    assert code == 0, out + err
    assert ec2_api.live_instances() == []
    assert "vm-job" in out and "failed" in out   # a person's launch that died: resumable, theirs to repeat
    code, out, _ = cli("get", "instances", "--json")
    assert code == 0 and json.loads(out) == []


def test_get_instances_shows_cost_and_clean_terminates_leftovers(cli, tmp_path, ec2_api):
    _setup(cli, tmp_path, ec2_api)
    tags = [{"Key": "foundry-cluster", "Value": "aws"}, {"Key": "foundry-token", "Value": "orphan-r0-0000"},
            {"Key": "foundry-run", "Value": "gone"}, {"Key": "foundry-resumption", "Value": "0"}]
    made = ec2_api.client().run_instances(ImageId=ec2_api.image(), InstanceType="g5.xlarge", MinCount=1, MaxCount=1,
                                          TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    other = ec2_api.client().run_instances(ImageId=ec2_api.image(), InstanceType="t3.micro", MinCount=1, MaxCount=1)
    time.sleep(0.1)
    code, out, _ = cli("get", "instances", "--json")
    [row] = json.loads(out)                      # only what Foundry made
    assert row["instance"] == made["Instances"][0]["InstanceId"] and row["run"] == "gone"
    assert row["type"] == "g5.xlarge" and row["price_per_hour"] == 1.006 and row["cost"] >= 0
    code, out, _ = cli("clean", "instances", "--json")
    assert code == 0 and json.loads(out) == {"terminated": [row["instance"]]}
    assert [i["InstanceId"] for i in ec2_api.live_instances()] == [other["Instances"][0]["InstanceId"]]
