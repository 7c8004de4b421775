"""The `ssh` provider against real sshd's: a fleet of network-namespace nodes (tests/support/ssh_fleet.py),
each its own host with its own host key, driven through the `foundry` CLI and run YAMLs.

- a run on 2 hosts pauses, resumes on the local cluster with 1 process, pauses, and comes back to the
  fleet with 4 processes (2 per host): the same batches and losses as an uninterrupted run;
- a host lost mid-run (link down, every process of it killed) makes the job `lost`, and the watchdog
  retries it on the hosts left;
- host keys are pinned on first use and a changed one is refused.
Datasets and checkpoints are folders (the nodes share this machine's file system)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from foundry.app.control import ACTIVE_STATUSES
from support.multinode import JOB, check_same_as_reference, ended_how, foundry, steps, wait_status
from support.ssh_fleet import ssh_fleet_fixture  # noqa: F401  (the ssh_fleet fixture)

pytestmark = [pytest.mark.integration, pytest.mark.multinode, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
ACTIVE = ACTIVE_STATUSES  # unknown (the provider cannot say) is still going


def run_spec(path: Path, name: str, cluster: str, nodes: int, gpus: int, data: dict, max_retries: int = 0,
             **env: str) -> Path:
    spec = {"name": name, "command": [JOB], "compute": {"cluster": cluster, "nodes": nodes, "gpus": gpus},
            "scheduling": {"max_retries": max_retries},
            "env_variables": {"DATA_URL": data["url"], "SAVE_URL": f"{data['ckpt']}/{{run_name}}", "STEPS": "12",
                              "GLOBAL_BATCH": "12", "NODE_LOCAL_ROOT": str(data["nodes_root"]),
                              "OMP_NUM_THREADS": "1", **env}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def fleet_data(ssh_fleet, tmp_path_factory) -> dict:
    """The tiny-LM dataset (144 samples: one epoch of 12 steps x 12) and the reference: the same job
    run uninterrupted on the local cluster, one process."""
    base = tmp_path_factory.mktemp("fleet-data")
    code = "import sys; sys.path.insert(0, sys.argv[1]); from data import write_dataset; write_dataset(sys.argv[2], n=144)"
    subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "move-run"), str(base / "data")],
                   check=True, timeout=120)
    data = {"url": str(base / "data"), "ckpt": str(base / "ckpt"), "nodes_root": ssh_fleet.root}
    home = base / "ref-home"
    old = os.environ.get("FOUNDRY_HOME")
    os.environ["FOUNDRY_HOME"] = str(home)
    try:
        foundry("run", "-f", str(run_spec(base / "ref.yaml", "ref", "local", 1, 1, data)))
        run = wait_status("ref", lambda d: d["status"] not in ACTIVE, timeout=300)
        assert run["status"] == "completed", ended_how("ref", run)
        data["reference"] = steps(home / "runs" / "ref")
    finally:
        if old is None:
            os.environ.pop("FOUNDRY_HOME", None)
        else:
            os.environ["FOUNDRY_HOME"] = old
    return data


def add_fleet(fleet, tmp_path: Path, name: str, hosts: str, gpus_per_host: int) -> None:
    """`foundry create secret ssh` (the key from stdin) once, then `foundry create cluster NAME --provider ssh`."""
    exe = Path(sys.executable).parent / "foundry"
    if "fleet-key" not in foundry("get", "secrets"):
        proc = subprocess.run([str(exe), "create", "secret", "ssh", "fleet-key", "--private-key", "-"],
                              input=fleet.key.read_bytes(), capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert b"PRIVATE KEY" not in proc.stdout + proc.stderr
    foundry("create", "cluster", name, "--provider", "ssh", "-o", f"hosts={hosts}", "-o", f"gpus_per_host={gpus_per_host}",
            "-o", "secret=fleet-key", "-o", f"python={sys.executable}", "-o", "connect_timeout=5",
            "-o", f"remote_dir={tmp_path / 'remote' / '{host}'}")


def leases_held(tmp_path: Path, addr: str) -> dict:
    path = tmp_path / "remote" / addr / "leases.json"
    return json.loads(path.read_text())["leases"] if path.exists() else {}


def test_fleet_run_pauses_moves_to_local_and_back_with_another_process_count(ssh_fleet, fleet_data, tmp_path):
    add_fleet(ssh_fleet, tmp_path, "fleet", ssh_fleet.hosts(1, 2), gpus_per_host=2)
    run_dir = tmp_path / "foundry-home" / "runs" / "mover"
    # a step every ~3 s: each `foundry` command here takes a second or more on a busy 2-core box
    foundry("run", "-f", str(run_spec(tmp_path / "run.yaml", "mover", "fleet", 2, 2, fleet_data, STEP_DELAY="3.0")))
    wait_status("mover", lambda d: len(steps(run_dir)) >= 3 or d["status"] not in ACTIVE, timeout=300, poll=0.5)
    foundry("stop", "mover", "--wait", timeout=300)
    run = wait_status("mover", lambda d: d["status"] not in ACTIVE, timeout=300)
    assert run["status"] == "paused", ended_how("mover", run)
    log = foundry("logs", "mover")
    assert f"environment ready on root@{ssh_fleet.addr(1)} in" in log and f"root@{ssh_fleet.addr(2)}" in log
    rank1 = foundry("logs", "mover", "--rank", "1")
    assert "rank-env" in rank1 and "RANK=1 " in rank1 and "WORLD_SIZE=2" in rank1
    assert run["resumptions"][0]["exit_code"] == 75
    assert leases_held(tmp_path, ssh_fleet.addr(1)) == {} == leases_held(tmp_path, ssh_fleet.addr(2))
    pinned = (tmp_path / "foundry-home" / "cluster-state" / "fleet" / "known_hosts").read_text()
    assert ssh_fleet.addr(1) in pinned and ssh_fleet.addr(2) in pinned   # first use pinned both host keys

    on_fleet = max(steps(run_dir))
    foundry("resume", "mover", "--cluster", "local", "--gpus", "1", "--nodes", "1")
    wait_status("mover", lambda d: max(steps(run_dir)) >= on_fleet + 2 or d["status"] not in ACTIVE, timeout=300,
                poll=0.5)
    foundry("stop", "mover", "--wait", timeout=300)
    run = wait_status("mover", lambda d: d["status"] not in ACTIVE, timeout=300)
    assert run["status"] == "paused", ended_how("mover", run)

    foundry("resume", "mover", "--cluster", "fleet", "--gpus", "4", "--nodes", "2")
    run = wait_status("mover", lambda d: d["status"] not in ACTIVE, timeout=400)
    assert run["status"] == "completed", ended_how("mover", run)
    assert [(r["cluster"], r["devices"], r["state"]) for r in run["resumptions"]] == [
        ("fleet", 2, "paused"), ("local", 1, "paused"), ("fleet", 4, "completed")]
    check_same_as_reference(steps(run_dir), fleet_data["reference"])
    assert leases_held(tmp_path, ssh_fleet.addr(1)) == {} == leases_held(tmp_path, ssh_fleet.addr(2))


@pytest.fixture
def watchdog(tmp_path):
    exe = Path(sys.executable).parent / "foundry"
    log = tmp_path / "watch.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(exe), "watch", "--interval", "2"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    proc.log = log
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def test_a_host_lost_mid_run_is_lost_not_failed_and_retried_on_the_hosts_left(ssh_fleet, fleet_data, tmp_path,
                                                                              watchdog):
    add_fleet(ssh_fleet, tmp_path, "fleet3", ssh_fleet.hosts(1, 2, 3), gpus_per_host=1)
    run_dir = tmp_path / "foundry-home" / "runs" / "survivor"
    spec = run_spec(tmp_path / "run.yaml", "survivor", "fleet3", 2, 2, fleet_data, max_retries=1, STEP_DELAY="2.0",
                    SAVE_INTERVAL="2ba")
    foundry("run", "-f", str(spec))
    wait_status("survivor", lambda d: len(steps(run_dir)) >= 4 or d["status"] not in ACTIVE, timeout=300, poll=0.5)
    ssh_fleet.kill_host(2)                  # the second of the two hosts the run got (host 3 is free)
    try:
        done = wait_status("survivor", lambda d: d["status"] not in ACTIVE
                           and not (d["status"] == "lost" and d["retries_used"] < d["max_retries"]),
                           timeout=400, poll=2)
    finally:
        ssh_fleet.revive_host(2)
    assert done["status"] == "completed", ended_how("survivor", done) + "\nwatchdog:\n" + watchdog.log.read_text()[-3000:]
    lost, retry = done["resumptions"]
    assert lost["state"] == "lost" and f"{ssh_fleet.addr(2)} stopped answering" in (lost["exit_reason"] or ""), lost
    assert retry["cause"] == "retry" and retry["state"] == "completed", retry
    log = foundry("logs", "survivor")
    assert f"environment ready on root@{ssh_fleet.addr(3)}" in log   # the retry ran on hosts 1 and 3
    check_same_as_reference(steps(run_dir), fleet_data["reference"])


def test_host_keys_are_pinned_on_first_use_and_a_changed_one_is_refused(ssh_fleet, tmp_path):
    from foundry.app.control import ControlPlane
    from foundry.backends.compute.ssh.config import Host
    from foundry.plugins.errors import CredentialsError

    add_fleet(ssh_fleet, tmp_path, "pinned", ssh_fleet.hosts(1), gpus_per_host=1)
    provider = ControlPlane().clusters.provider("pinned")
    host = Host(ssh_fleet.addr(1), "root")
    assert provider.client.run(host, ["hostname"]).stdout.decode().strip() == "mnf1"
    known = Path(provider.client.known_hosts)
    line = known.read_text().strip()
    assert line.startswith(f"{ssh_fleet.addr(1)} ssh-ed25519 ")
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known.write_text(f"{ssh_fleet.addr(1)} {' '.join(other.with_suffix('.pub').read_text().split()[:2])}\n")
    with pytest.raises(CredentialsError, match="not the one pinned"):
        provider.client.run(host, ["hostname"])
    # given up front (-o known_hosts), an empty file accepts nobody
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    foundry("create", "cluster", "strict", "--provider", "ssh", "-o", f"hosts={ssh_fleet.hosts(1)}",
            "-o", "secret=fleet-key", "-o", f"known_hosts={empty}")
    strict = ControlPlane().clusters.provider("strict")
    with pytest.raises(CredentialsError, match="not the one pinned"):
        strict.client.run(host, ["true"])
    assert empty.read_text() == ""
