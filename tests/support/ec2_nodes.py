"""EC2 instances that really run the job: moto's server (tests/support/moto_ec2.py) hands out
instances with no machine behind them; here each one's private address is put on a network-namespace
node running sshd (scripts/infra/multinode, MN_SSHD=1) the moment moto says it runs, and taken off
again when moto says it is terminated. The test plays the cloud's part (a machine comes up at the
address the API reported); the ec2 provider is not changed or told anything: it asks moto, waits for
SSH on the address moto gave, and hands it to the ssh provider as it would on AWS.

- `ec2_nodes` (module scope): 2 nodes `mne1..2` on 10.223.0.0/24 with sshd listening on any address
  of the node (MN_SSH_ANY_ADDRESS=1; the session's key pair in authorized_keys) and the session's S3 server forwarded to http://10.223.0.254:24334 (reachable
  from the nodes and from this machine alike, so one run YAML serves every cluster).
- `InstanceAddresses(api, nodes).start()`: a moto VPC + subnet inside that /24 (no public IPs, so
  the instances' addresses are the private ones), and the thread that maps them onto the nodes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from support.moto_ec2 import REGION
from support.multinode import JOB, _skip, foundry, missing_requirements
from support.ssh_fleet import Fleet

NET = "10.223.0"
S3_PORT = 24334
S3_ENDPOINT = f"http://{NET}.254:{S3_PORT}"
LIVE = ("pending", "running")


@pytest.fixture(scope="module", name="ec2_nodes")
def ec2_nodes_fixture(tmp_path_factory, s3_server):
    reason = missing_requirements()
    if reason:
        _skip(reason)
    base = tmp_path_factory.mktemp("ec2-nodes")
    key = base / "id_ec2"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "foundry-ec2-test", "-f", str(key)],
                   check=True)
    (base / "authorized_keys").write_bytes(key.with_suffix(".pub").read_bytes())
    port = s3_server.endpoint.rsplit(":", 1)[1]
    settings = {"MN_NODES": "2", "MN_NS_PREFIX": "mne", "MN_NET": NET, "MN_BRIDGE": "mnebr",
                "MN_VETH_PREFIX": "mnev", "MN_TAP_PREFIX": "mnew", "MN_ROOT": str(base / "root"),
                "MN_RUN": "/run/foundry-mne", "MN_SLURM": "0", "MN_S3": "forward", "MN_S3_PORT": str(S3_PORT),
                "MN_S3_FORWARD_TO": f"127.0.0.1:{port}", "MN_SSHD": "1", "MN_SSH_ANY_ADDRESS": "1",
                "MN_SSH_AUTHORIZED_KEYS": str(base / "authorized_keys"), "MN_PY": sys.executable}
    nodes = Fleet(2, base / "root", key, settings)
    nodes.script("down.sh", check=False, timeout=60)   # a killed session's leftovers
    try:
        nodes.script("up.sh", timeout=300)
        yield nodes
    finally:
        nodes.script("down.sh", check=False, timeout=120)


class InstanceAddresses:
    """moto instance -> namespace node, by address: a running instance's private IP is added to a
    free node's eth0 (a second address on the same /24, so the nodes and this machine reach it over
    the bridge, and torchrun's rendezvous on it is local to that node); a terminated one's removed."""

    def __init__(self, api, nodes: Fleet):
        self.api, self.nodes = api, nodes
        self.placed: dict[str, tuple[str, int]] = {}      # instance id -> (address, node)
        self.history: list[tuple[str, str, int]] = []     # (instance id, address, node), in order
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="moto-addresses", daemon=True)
        client = api.client()
        vpc = client.create_vpc(CidrBlock=f"{NET.rsplit('.', 1)[0]}.0.0/16")["Vpc"]["VpcId"]
        self.subnet = client.create_subnet(VpcId=vpc, CidrBlock=f"{NET}.0/24")["Subnet"]["SubnetId"]

    def start(self) -> "InstanceAddresses":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for instance in list(self.placed):
            self._unplace(instance)

    def _ip(self, node: int, *args: str) -> None:
        ns = f"{self.nodes.settings['MN_NS_PREFIX']}{node}"
        proc = subprocess.run(["ip", "-n", ns, "addr", *args, "dev", "eth0"], capture_output=True, text=True,
                              timeout=30)
        if proc.returncode != 0:
            self.errors.append(f"ip -n {ns} addr {' '.join(args)}: {proc.stderr.strip()}")

    def _unplace(self, instance: str) -> None:
        addr, node = self.placed.pop(instance)
        self._ip(node, "del", f"{addr}/24")

    def _loop(self) -> None:
        client = self.api.client()
        while not self._stop.wait(0.2):
            try:
                reply = client.describe_instances(Filters=[{"Name": "subnet-id", "Values": [self.subnet]}])
            except Exception:   # moto busy or going away: look again
                continue
            for inst in sorted((i for r in reply["Reservations"] for i in r["Instances"]),
                               key=lambda i: (i["LaunchTime"], i["AmiLaunchIndex"])):
                iid, state, addr = inst["InstanceId"], inst["State"]["Name"], inst.get("PrivateIpAddress")
                if state in LIVE and iid not in self.placed and addr:
                    used = {node for _, node in self.placed.values()}
                    free = [n for n in range(1, self.nodes.nodes + 1) if n not in used]
                    if free:
                        self._ip(free[0], "add", f"{addr}/24")
                        self.placed[iid] = (addr, free[0])
                        self.history.append((iid, addr, free[0]))
                elif state not in LIVE and iid in self.placed:
                    self._unplace(iid)


DATASET_SAMPLES = 144   # 12 steps x global batch 12: one epoch


@pytest.fixture(scope="module", name="ec2_dataset")
def ec2_dataset_fixture(s3_server) -> dict:
    """The tiny-LM dataset (tests/multinode/train_job.py's) in the S3 server, and a bucket for checkpoints."""
    bucket = s3_server.create_bucket()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from data import write_dataset; "
            f"write_dataset(sys.argv[2], n={DATASET_SAMPLES})")
    examples = Path(__file__).resolve().parents[2] / "examples" / "move-run"
    subprocess.run([sys.executable, "-c", code, str(examples), f"s3://{bucket}/data"], check=True,
                   env={**os.environ, **s3_server.env()}, timeout=120)
    return {"bucket": bucket, "url": f"s3://{bucket}/data"}


# ---- the clusters, the secret and the run YAML, as a user would type them
def ec2_spec(path: Path, name: str, cluster: str, nodes: int, gpus: int, data: dict, root: Path, **env: str) -> Path:
    spec = {"name": name, "command": [JOB], "compute": {"cluster": cluster, "nodes": nodes, "gpus": gpus},
            "secrets": ["s3"],
            "env_variables": {"DATA_URL": data["url"], "SAVE_URL": f"s3://{data['bucket']}/ckpt/{{run_name}}",
                              "STEPS": "12", "GLOBAL_BATCH": "12", "NODE_LOCAL_ROOT": str(root),
                              "OMP_NUM_THREADS": "1", **env}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def add_s3_secret(s3_server) -> None:
    foundry("create", "secret", "s3", "s3", "--access-key-id", s3_server.access_key, "--secret-access-key",
            s3_server.secret_key, "--endpoint", S3_ENDPOINT, "--region", s3_server.region)


def add_ec2_cluster(name: str, nodes, addresses: InstanceAddresses, api, tmp_path: Path) -> None:
    """`foundry create secret ssh` (the nodes' key) and `foundry create cluster NAME --provider ec2`."""
    if "ec2-key" not in foundry("get", "secrets"):
        foundry("create", "secret", "ssh", "ec2-key", "--private-key", str(nodes.key))
    options = [f"region={REGION}", "instance_type=g5.xlarge", f"image={api.image()}", f"subnet={addresses.subnet}",
               "secret=ec2-key", "ssh_user=root", f"python={sys.executable}", "connect_timeout=5", "ssh_wait_s=120",
               f"remote_dir={tmp_path / 'remote' / '{host}'}"]
    foundry("create", "cluster", name, "--provider", "ec2", *[a for o in options for a in ("-o", o)])
