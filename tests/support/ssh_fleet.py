"""Fixture: a fleet of machines reachable over SSH, on one box: network-namespace nodes
(scripts/infra/multinode, MN_SSHD=1) each running its own OpenSSH server (own address, hostname and
host key), logins with a key pair made for the session. No Slurm, no S3 (the nodes share this
machine's file system: datasets and checkpoints are plain folders).

`ssh_fleet` (module scope): 3 nodes `mnf1..3` on 10.216.0.0/24, torn down in a `finally` by down.sh
(sshd's by pid file, every process left in the namespaces by pid, namespaces, bridge).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.multinode import SCRIPTS, _skip, missing_requirements


@dataclass
class Fleet:
    nodes: int
    root: Path
    key: Path
    settings: dict[str, str]

    def addr(self, n: int) -> str:
        return f"{self.settings['MN_NET']}.{n}"

    def hosts(self, *ns: int) -> str:
        return ",".join(f"root@{self.addr(n)}" for n in ns)

    def script(self, name: str, *args: str, timeout: float = 120, check: bool = True) -> str:
        proc = subprocess.run(["bash", str(SCRIPTS / name), *args], env={**os.environ, **self.settings},
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def kill_host(self, n: int) -> str:
        """The host is lost: its link down, then every process in it SIGKILLed (its sshd included)."""
        return self.script("node.sh", "kill", str(n), "power")

    def revive_host(self, n: int) -> None:
        subprocess.run(["ip", "link", "set", f"{self.settings['MN_VETH_PREFIX']}{n}", "up"], check=True)
        self.script("sshd.sh", "start")


@pytest.fixture(scope="module", name="ssh_fleet")
def ssh_fleet_fixture(tmp_path_factory):
    reason = missing_requirements()
    if reason:
        _skip(reason)
    base = tmp_path_factory.mktemp("fleet")
    key = base / "id_fleet"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "foundry-test", "-f", str(key)], check=True)
    (base / "authorized_keys").write_bytes(key.with_suffix(".pub").read_bytes())
    settings = {"MN_NODES": "3", "MN_NS_PREFIX": "mnf", "MN_NET": "10.216.0", "MN_BRIDGE": "mnfbr",
                "MN_VETH_PREFIX": "mnfv", "MN_TAP_PREFIX": "mnfw", "MN_ROOT": str(base / "root"),
                "MN_RUN": "/run/foundry-mnf", "MN_SLURM": "0", "MN_S3": "none", "MN_SSHD": "1",
                "MN_SSH_AUTHORIZED_KEYS": str(base / "authorized_keys"), "MN_PY": sys.executable}
    fleet = Fleet(3, base / "root", key, settings)
    fleet.script("down.sh", check=False, timeout=60)   # a killed session's leftovers
    try:
        fleet.script("up.sh", timeout=300)
        yield fleet
    finally:
        fleet.script("down.sh", check=False, timeout=120)
