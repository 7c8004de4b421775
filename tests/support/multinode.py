"""Fixtures: real multi-node Slurm clusters on one machine, nodes being network namespaces.

`scripts/infra/multinode/up.sh` gives each node its own network namespace (address, hostname, local
disk folder) on a private bridge, and runs a real Slurm across them (slurmctld in node 1, one slurmd
per node, its own munge key and socket): nothing clashes with the single-node Slurm on localhost.

- `mn_clusters` (session): two clusters side by side, each with its own slurm.conf:
  `mn3` 3 nodes (mna1..3 on 10.213.0.0/24) and `mn2` 2 nodes (mnb1..2 on 10.214.0.0/24).
  S3: the session's loopback SeaweedFS (`s3_server`) is exposed to every node at `S3_ENDPOINT`
  (a forwarder bound to mn3's bridge address; mn2's nodes reach that address through their host).
- Torn down in a `finally` (down.sh: daemons by pid file, leftovers by `ip netns pids`, namespaces,
  bridges); a previous session's leftovers are removed before starting.
- Needs root (CI has it); without it the tests skip with the reason, and tests/multinode/conftest.py
  repeats it in the summary. FOUNDRY_REQUIRE_INTEGRATION=1 turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from foundry.app.control import ACTIVE_STATUSES
from support.control import wait_for as _wait_for

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "infra" / "multinode"
S3_HOST, S3_PORT = "10.213.0.254", 24333
S3_ENDPOINT = f"http://{S3_HOST}:{S3_PORT}"
JOB = str(Path(__file__).resolve().parents[1] / "multinode" / "train_job.py")
SKIPPED: list[str] = []   # reasons, printed again at the end of the session


@dataclass
class NamespaceCluster:
    """One namespace Slurm cluster: its settings (MN_* variables) and helpers that act on it."""

    name: str
    nodes: int
    settings: dict[str, str]
    root: Path
    python: str = sys.executable   # jobs run as root here: the test venv's python works on every node
    log: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return self.settings["MN_NS_PREFIX"]

    @property
    def node_names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.nodes + 1)]

    @property
    def slurm_conf(self) -> str:
        return str(self.root / "etc" / "slurm.conf")

    def node_local(self, node: str) -> Path:
        """The node's "local disk" folder."""
        return self.root / node / "local"

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.settings}

    def script(self, name: str, *args: str, timeout: float = 120, check: bool = True) -> str:
        proc = subprocess.run(["bash", str(SCRIPTS / name), *args], env=self.env(), capture_output=True,
                              text=True, timeout=timeout)
        self.log.append(f"$ {name} {' '.join(args)}\n{proc.stdout}{proc.stderr}")
        if check and proc.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def slurm(self, *argv: str) -> str:
        """A Slurm command against this cluster (its own SLURM_CONF)."""
        return subprocess.run(list(argv), env={**os.environ, "SLURM_CONF": self.slurm_conf}, capture_output=True,
                              text=True, timeout=30).stdout

    def kill_node(self, n: int, power: bool = False) -> str:
        return self.script("node.sh", "kill", str(n), *(["power"] if power else []))

    def revive_node(self, n: int) -> str:
        return self.script("node.sh", "revive", str(n))

    def wan_on(self, n: int, delay_ms: int = 20, rate: str = "200mbit") -> str:
        """Delay each way (RTT = 2 x delay_ms) and a rate cap on node n's link (scripts/.../wan.sh)."""
        return self.script("wan.sh", "on", str(n), str(delay_ms), rate)

    def wan_off(self, n: int) -> str:
        return self.script("wan.sh", "off", str(n))

    def provider_options(self, jobs_dir: str | os.PathLike, **extra) -> dict[str, str]:
        """`foundry create cluster NAME --provider slurm -o K=V ...` options for this cluster."""
        return {"slurm_conf": self.slurm_conf, "python": self.python, "jobs_dir": str(jobs_dir), **extra}


def _settings(tag: str, nodes: int, net: str, root: Path, **extra: str) -> dict[str, str]:
    return {"MN_NODES": str(nodes), "MN_NS_PREFIX": f"mn{tag}", "MN_NET": net, "MN_BRIDGE": f"mn{tag}br",
            "MN_VETH_PREFIX": f"mn{tag}v", "MN_TAP_PREFIX": f"mn{tag}w", "MN_ROOT": str(root),
            "MN_RUN": f"/run/foundry-mn{tag}",
            "MN_MUNGE_DIR": f"/run/foundry-mn{tag}/munge", "MN_CLUSTER_NAME": f"mn{tag}", "MN_S3_PORT": str(S3_PORT),
            "MN_PY": sys.executable, **extra}


def missing_requirements() -> str | None:
    """Why this machine cannot run namespace clusters, or None."""
    if sys.platform != "linux":
        return "namespace clusters need Linux"
    if os.geteuid() != 0:
        return "namespace clusters need root (ip netns, veth, bridge, slurmd); CI runs as root"
    tools = ["ip", "nsenter", "unshare", "tc"]
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        tools.append("slurmctld")
    missing = [t for t in tools if shutil.which(t) is None]
    return f"missing tools: {', '.join(missing)}" if missing else None


def _skip(reason: str) -> None:
    message = f"multi-node tests skipped: {reason}"
    SKIPPED.append(message)
    if os.environ.get("FOUNDRY_REQUIRE_INTEGRATION") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def mn_clusters(request, tmp_path_factory):
    reason = missing_requirements()
    if reason:
        _skip(reason)
    s3_server = request.getfixturevalue("s3_server")   # only once the machine can run the clusters
    base = tmp_path_factory.mktemp("mn")
    host = S3_HOST.rsplit(".", 1)[0]
    port = s3_server.endpoint.rsplit(":", 1)[1]
    mn3 = NamespaceCluster("mn3", 3, _settings("a", 3, host, base / "a", MN_S3="forward",
                                                MN_S3_FORWARD_TO=f"127.0.0.1:{port}"), base / "a")
    mn2 = NamespaceCluster("mn2", 2, _settings("b", 2, "10.214.0", base / "b", MN_S3="none",
                                                MN_ROUTES=f"{S3_HOST}/32"), base / "b")
    clusters = (mn3, mn2)
    for c in clusters:   # leftovers of a session that was killed
        c.script("down.sh", check=False, timeout=60)
    try:
        for c in clusters:
            c.script("up.sh", timeout=300)
        yield clusters
    finally:   # reverse order: the first cluster up owns /run/netns and removes it once both are gone
        for c in reversed(clusters):
            c.script("down.sh", check=False, timeout=120)


@pytest.fixture(scope="session")
def mn3(mn_clusters) -> NamespaceCluster:
    return mn_clusters[0]


@pytest.fixture(scope="session")
def mn2(mn_clusters) -> NamespaceCluster:
    return mn_clusters[1]


# ---- driving runs through the CLI
def foundry(*args: str, check: bool = True, timeout: float = 120, cwd: str | os.PathLike | None = None) -> str:
    exe = Path(sys.executable).parent / "foundry"
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"foundry {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def describe(name: str) -> dict:
    return json.loads(foundry("describe", "run", name, "--json"))


def run_yaml(path: Path, name: str, cluster: str, nodes: int, gpus: int, dataset: dict, bucket_ckpt: str,
             mn3, max_retries: int = 0, **env: str) -> Path:
    """A run YAML for tests/multinode/train_job.py (12 steps, global batch 12, data + checkpoints in S3)."""
    spec = {"name": name, "command": [JOB], "compute": {"cluster": cluster, "nodes": nodes, "gpus": gpus},
            "secrets": ["s3"], "scheduling": {"max_retries": max_retries},
            "env_variables": {"DATA_URL": dataset["url"], "SAVE_URL": f"s3://{bucket_ckpt}/ckpt/{{run_name}}",
                              "STEPS": "12", "GLOBAL_BATCH": "12", "NODE_LOCAL_ROOT": str(mn3.root), "OMP_NUM_THREADS": "1",
                              **env}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def wait_status(name: str, until, timeout: float = 300, poll: float = 1.0) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = describe(name)
        if until(last):
            return last
        time.sleep(poll)
    raise AssertionError(f"run {name} never reached the expected state: {json.dumps(last, indent=1)[:3000]}")


def ended(run: dict) -> bool:
    """The run is no longer going: 'stopping' and 'unknown' (the provider cannot say, the job may well be
    training) are not an end."""
    return run["status"] not in ACTIVE_STATUSES


def ended_how(name: str, run: dict) -> str:
    """An assertion message for a run that ended otherwise than expected: each resumption's state,
    exit code and reason, the last events, and the tail of the latest resumption's log (a bare
    repr of `run` is cut before any of them)."""
    keys = ("index", "cluster", "nodes", "devices", "state", "cause", "exit_code", "exit_reason")
    rows = [{k: r.get(k) for k in keys} for r in run.get("resumptions", [])]
    log = foundry("logs", name, check=False)
    return (f"run {name} is {run.get('status')}\nresumptions: {json.dumps(rows)}\n"
            f"last events: {json.dumps(run.get('events', [])[-8:], default=str)}\n--- log tail ---\n{log[-4000:]}")


def wait_for(predicate, timeout: float = 120, poll: float = 0.3, what: str = "condition"):
    return _wait_for(predicate, timeout, poll, what)


def steps_of_resumption(run_dir: Path, resumption: int) -> set[int]:
    """Steps rank 0 finished in one resumption."""
    path = run_dir / f"samples-r{resumption}-rank0.jsonl"
    return {json.loads(line)["step"] for line in path.read_text().splitlines()} if path.exists() else set()


def steps(run_dir: Path) -> dict[int, dict]:
    """step -> {"ids": global batch ids in rank order, "loss"} over all resumptions (latest wins)."""
    out: dict[int, dict] = {}
    files = sorted(run_dir.glob("samples-r*-rank*.jsonl"),
                   key=lambda p: (int(p.stem.split("-r")[1].split("-")[0]), int(p.stem.split("rank")[1])))
    by_res: dict[int, dict[int, dict]] = {}
    for path in files:
        res = int(path.stem.split("-r")[1].split("-")[0])
        for line in path.read_text().splitlines():
            row = json.loads(line)
            entry = by_res.setdefault(res, {}).setdefault(row["step"], {"ids": [], "loss": row["loss"]})
            entry["ids"] += row["ids"]
    for res in sorted(by_res):
        out.update(by_res[res])
    return out


def check_same_as_reference(run_steps: dict, ref: dict) -> None:
    assert sorted(run_steps) == sorted(ref) == list(range(1, 13))
    for step in ref:
        assert sorted(run_steps[step]["ids"]) == sorted(ref[step]["ids"]), f"step {step}: other samples"
        assert abs(run_steps[step]["loss"] - ref[step]["loss"]) <= 1e-5 * max(1.0, abs(ref[step]["loss"])), step
