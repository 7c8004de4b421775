"""gce and oci-vm end to end: the recorded-response API servers (tests/support/gce_recorded.py,
oci_recorded.py) hand out instances whose addresses are two network-namespace nodes running sshd
(scripts/infra/multinode, MN_SSHD=1), and play the guest agent's part: the public key Foundry put in
the instance metadata (GCE ssh-keys, OCI ssh_authorized_keys) is the only key those sshd's accept.
Through the CLI and a run YAML: `foundry run` asks for 2 instances, waits until SSH answers on both,
hands them to the ssh provider (one torchrun per host), the job runs on both nodes, and when the
resumption completes the instances are deleted. The cloud is recorded; the SSH wait, the key, the
hand-off, the job and the teardown are real."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import yaml

from foundry.app.control import ACTIVE_STATUSES
from support.gce_recorded import RecordedGCE
from support.multinode import _skip, ended_how, foundry, missing_requirements, wait_status
from support.oci_recorded import COMPARTMENT, IMAGE, OCI_CONFIG, SUBNET, RecordedOCI
from support.ssh_fleet import Fleet
from support.vm_keys import rsa_key, service_account

pytestmark = [pytest.mark.integration, pytest.mark.multinode, pytest.mark.slow]

JOB = """import os, socket
print(f"vm job rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} on {socket.gethostname()}", flush=True)
"""


@pytest.fixture(scope="module")
def vm_nodes(tmp_path_factory):
    """2 namespace nodes `mnq1..2` on 10.221.0.0/24 with sshd, whose authorized_keys file starts empty."""
    reason = missing_requirements()
    if reason:
        _skip(reason)
    base = tmp_path_factory.mktemp("vm-nodes")
    key = base / "id_vm"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "foundry-vm-test", "-f", str(key)], check=True)
    (base / "authorized_keys").write_text("")
    settings = {"MN_NODES": "2", "MN_NS_PREFIX": "mnq", "MN_NET": "10.221.0", "MN_BRIDGE": "mnqbr",
                "MN_VETH_PREFIX": "mnqv", "MN_TAP_PREFIX": "mnqw", "MN_ROOT": str(base / "root"),
                "MN_RUN": "/run/foundry-mnq", "MN_SLURM": "0", "MN_S3": "none", "MN_SSHD": "1",
                "MN_SSH_AUTHORIZED_KEYS": str(base / "authorized_keys"), "MN_PY": sys.executable}
    nodes = Fleet(2, base / "root", key, settings)
    nodes.script("down.sh", check=False, timeout=60)   # a killed session's leftovers
    try:
        nodes.script("up.sh", timeout=300)
        yield nodes
    finally:
        nodes.script("down.sh", check=False, timeout=120)


@pytest.mark.parametrize("cloud", ["gce", "oci-vm"])
def test_a_run_on_two_recorded_instances_runs_on_both_nodes_and_deletes_them_at_the_end(vm_nodes, tmp_path, cloud):
    authorized = vm_nodes.settings["MN_SSH_AUTHORIZED_KEYS"]
    open(authorized, "w").close()   # nothing may log in until the cloud "installs" the metadata key
    addresses = [vm_nodes.addr(1), vm_nodes.addr(2)]
    foundry("create", "secret", "ssh", "vm-key", "--private-key", str(vm_nodes.key))
    if cloud == "gce":
        server = RecordedGCE(public_key_pem=rsa_key()[1], addresses=addresses, authorized_keys=authorized).start()
        (tmp_path / "sa.json").write_text(service_account(f"{server.url}/token"))
        foundry("create", "secret", "gcp", "creds", "--credentials", str(tmp_path / "sa.json"))
        options = ["project=my-project", "zone=us-central1-a", "machine_type=n2-standard-8"]
    else:
        server = RecordedOCI(public_key_pem=rsa_key()[1], addresses=addresses, authorized_keys=authorized).start()
        (tmp_path / "oci-config").write_text(OCI_CONFIG)
        (tmp_path / "oci-key.pem").write_text(rsa_key()[0])
        foundry("create", "secret", "oci", "creds", "--config", str(tmp_path / "oci-config"),
                "--key", str(tmp_path / "oci-key.pem"))
        options = [f"compartment={COMPARTMENT}", "availability_domain=Uocm:US-ASHBURN-AD-1",
                   "shape=VM.Standard.E4.Flex", "ocpus=1", f"image={IMAGE}", f"subnet={SUBNET}"]
    try:
        args = [a for o in [*options, f"endpoint={server.url}", "credentials=creds", "secret=vm-key", "ssh_user=root",
                            f"python={sys.executable}", "connect_timeout=5", "ssh_wait_s=120",
                            f"remote_dir={tmp_path / 'remote' / '{host}'}"] for a in ("-o", o)]
        foundry("create", "cluster", "vms", "--provider", cloud, *args)
        job = tmp_path / "job.py"
        job.write_text(JOB)
        spec = tmp_path / "run.yaml"
        spec.write_text(yaml.safe_dump({"name": "on-vms", "command": [str(job)], "compute": {"cluster": "vms", "nodes": 2},
                                        "env_variables": {"OMP_NUM_THREADS": "1"}}))
        t0 = time.monotonic()
        foundry("run", "-f", str(spec), timeout=300)
        launched_s = time.monotonic() - t0
        assert len(server.live()) == 2
        run = wait_status("on-vms", lambda d: d["status"] not in ACTIVE_STATUSES, timeout=300)
        done_s = time.monotonic() - t0
        assert run["status"] == "completed", ended_how("on-vms", run)
        assert server.live() == []                  # deleted when the resumption ended
        log = foundry("logs", "on-vms")
        assert "vm job rank 0 of 2" in log and "vm job rank 1 of 2" in log
        assert json.loads(foundry("get", "instances", "--json")) == []
        print(f"\n{cloud}: foundry run -> launched on 2 instances (SSH up, job started) {launched_s:.1f} s; "
              f"-> completed and deleted {done_s:.1f} s")
    finally:
        server.stop()


def test_a_spot_job_that_pauses_on_its_own_ends_lost_preempted_and_its_instances_deleted(vm_nodes, tmp_path):
    """What the trainer does on GCE's preemption notice (trainer/preemption.py: checkpoint, exit 75),
    played by the job itself: nobody asked it to stop, so the resumption is lost (preempted),
    retry-eligible, not paused; the job was told which notice to watch."""
    authorized = vm_nodes.settings["MN_SSH_AUTHORIZED_KEYS"]
    open(authorized, "w").close()
    foundry("create", "secret", "ssh", "vm-key", "--private-key", str(vm_nodes.key))
    server = RecordedGCE(public_key_pem=rsa_key()[1], addresses=[vm_nodes.addr(1)], authorized_keys=authorized).start()
    try:
        (tmp_path / "sa.json").write_text(service_account(f"{server.url}/token"))
        foundry("create", "secret", "gcp", "creds", "--credentials", str(tmp_path / "sa.json"))
        args = [a for o in ["project=my-project", "zone=us-central1-a", "machine_type=n2-standard-8", "spot=true",
                            f"endpoint={server.url}", "credentials=creds", "secret=vm-key", "ssh_user=root",
                            f"python={sys.executable}", "connect_timeout=5", "ssh_wait_s=120",
                            f"remote_dir={tmp_path / 'remote' / '{host}'}"] for a in ("-o", o)]
        foundry("create", "cluster", "spot", "--provider", "gce", *args)
        job = tmp_path / "job.py"
        job.write_text("import os, sys\nprint('notice:', os.environ.get('FOUNDRY_PREEMPTION_NOTICE'), flush=True)\n"
                       "sys.exit(75)\n")
        spec = tmp_path / "run.yaml"
        spec.write_text(yaml.safe_dump({"name": "preempted", "command": [str(job)], "compute": {"cluster": "spot"}}))
        foundry("run", "-f", str(spec), timeout=300)
        assert server.inserts[0]["scheduling"]["provisioningModel"] == "SPOT"
        run = wait_status("preempted", lambda d: d["status"] not in ACTIVE_STATUSES, timeout=300)
        assert run["status"] == "lost", ended_how("preempted", run)
        assert "preempted" in run["resumptions"][0]["exit_reason"]
        assert "notice: gce" in foundry("logs", "preempted")
        assert server.live() == []
    finally:
        server.stop()
