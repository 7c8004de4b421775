"""gce and oci-vm through the CLI, against the recorded-response servers (gce_recorded.py,
oci_recorded.py) and the real SDK clients: a `foundry run` refused for lack of capacity ends `lost`
(retry-eligible: the watchdog retries or fails it over) with one line; a `foundry run` SIGKILLed at
each provisioning step (ledger written, nothing asked; instances asked for, ids not yet recorded;
waiting for SSH) leaves instances that the next `foundry get runs` finds by their label/tag and
deletes; `get instances` / `clean instances` see only Foundry's. (No job runs on these instances:
they are records in a test server; docs/providers.md#gce.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from support.control import wait_for

from support.gce_recorded import RecordedGCE
from support.oci_recorded import COMPARTMENT, IMAGE, OCI_CONFIG, SUBNET, RecordedOCI
from support.vm_keys import rsa_key, service_account, ssh_key

CLI = [sys.executable, "-c", "from foundry.app.cli.main import main; main()"]


@pytest.fixture(params=["gce", "oci-vm"])
def cloud(request, cli, tmp_path):
    """(the provider name, its recorded-response server), with a cluster `c` made through the CLI."""
    key = tmp_path / "id_ed25519"
    key.write_bytes(ssh_key()[0])
    assert cli("create", "secret", "ssh", "vm-key", "--private-key", str(key))[0] == 0
    if request.param == "gce":
        server = RecordedGCE(public_key_pem=rsa_key()[1]).start()
        sa = tmp_path / "sa.json"
        sa.write_text(service_account(f"{server.url}/token"))
        assert cli("create", "secret", "gcp", "cloud-creds", "--credentials", str(sa))[0] == 0
        options = ["project=my-project", "zone=us-central1-a", "machine_type=n2-standard-8"]
    else:
        server = RecordedOCI(public_key_pem=rsa_key()[1]).start()
        (tmp_path / "oci-config").write_text(OCI_CONFIG)
        (tmp_path / "oci-key.pem").write_text(rsa_key()[0])
        code, out, err = cli("create", "secret", "oci", "cloud-creds", "--config", str(tmp_path / "oci-config"),
                             "--key", str(tmp_path / "oci-key.pem"))
        assert code == 0, out + err
        options = [f"compartment={COMPARTMENT}", "availability_domain=Uocm:US-ASHBURN-AD-1", "shape=VM.GPU.A10.1",
                   f"image={IMAGE}", f"subnet={SUBNET}"]
    args = [a for o in [*options, f"endpoint={server.url}", "credentials=cloud-creds", "secret=vm-key"]
            for a in ("-o", o)]
    code, out, err = cli("create", "cluster", "c", "--provider", request.param, *args)
    assert code == 0, out + err
    spec = tmp_path / "run.yaml"
    spec.write_text("name: vm-job\ncommand: python -c 'print(1)'\ncompute:\n  cluster: c\n")
    try:
        yield request.param, server, str(spec)
    finally:
        server.stop()


def _capacity_error(name: str, server) -> str:
    if name == "gce":
        server.operation_error = "operation_zone_exhausted.json"
        return "ZONE_RESOURCE_POOL_EXHAUSTED"
    server.launch_error = "error_out_of_capacity.json"
    return "Out of host capacity"


def test_no_capacity_fails_the_command_in_one_line_and_the_run_is_lost_not_failed(cli, cloud):
    name, server, spec = cloud
    says = _capacity_error(name, server)
    code, out, err = cli("run", "-f", spec)
    first = (out + err).strip().splitlines()[0]
    assert code == 1 and says in first and "no capacity for foundry-vm-job-r0-" in first
    code, out, _ = cli("get", "runs", "--json")
    [run] = json.loads(out)
    assert run["name"] == "vm-job" and run["status"] == "lost", run   # retry-eligible: failover can take it
    assert server.live() == []


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("step", ["before_request", "after_request", "waiting_ssh"])
def test_foundry_killed_while_provisioning_leaks_nothing(cli, cloud, step):
    name, server, spec = cloud
    home = os.environ["FOUNDRY_HOME"]
    held = os.path.join(home, "cluster-state", "c", f"held-{step}")
    proc = subprocess.Popen([*CLI, "run", "-f", spec], env={**os.environ, "FOUNDRY_VM_HOLD_AT": step},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(held) or proc.poll() is not None, timeout=120, what=f"launch held at {step}")
        assert proc.poll() is None, "foundry run exited before the step"
        folder = os.path.join(home, "cluster-state", "c", "instances")
        [record] = [json.load(open(os.path.join(folder, f))) for f in os.listdir(folder) if f.endswith(".json")]
        assert record["state"] == ("requested" if step == "waiting_ssh" else "intent")   # on disk before any request
        assert len(server.live()) == (0 if step == "before_request" else 1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    code, out, err = cli("get", "runs")          # the next command touching the run
    assert code == 0, out + err
    assert server.live() == []
    assert "vm-job" in out and "failed" in out   # a person's launch that died: resumable, theirs to repeat
    code, out, _ = cli("get", "instances", "--json")
    assert code == 0 and json.loads(out) == []


def test_get_and_clean_instances_through_the_cli(cli, cloud):
    name, server, _ = cloud
    tags = {"foundry-cluster": "c", "foundry-token": "orphan-r0-0000", "foundry-run": "gone",
            "foundry-resumption": "0"}
    server.add("foundry-orphan-r0-0000-0", tags)
    server.add("not-foundrys", {"team": "web"})
    code, out, _ = cli("get", "instances", "--json")
    [row] = json.loads(out)
    assert row["run"] == "gone" and row["provider"] == name and row["cost"] >= 0
    code, out, _ = cli("clean", "instances", "--json")
    assert code == 0 and json.loads(out) == {"terminated": [row["instance"]]}
    assert server.live() == ["not-foundrys"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_foundry_killed_after_the_request_then_clean_instances_terminates_it(cli, cloud):
    """The ledger entry of a launch whose `foundry` died is what `clean instances` sweeps, before any
    command touches the run."""
    name, server, spec = cloud
    home = os.environ["FOUNDRY_HOME"]
    held = os.path.join(home, "cluster-state", "c", "held-after_request")
    proc = subprocess.Popen([*CLI, "run", "-f", spec], env={**os.environ, "FOUNDRY_VM_HOLD_AT": "after_request"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(held) or proc.poll() is not None, timeout=120, what="launch held")
        assert proc.poll() is None and len(server.live()) == 1
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    code, out, err = cli("clean", "instances", "--json")
    assert code == 0, out + err
    [gone] = json.loads(out)["terminated"]
    assert server.live() == [] and gone.startswith(("foundry-vm-job-r0-", "ocid1.instance."))
