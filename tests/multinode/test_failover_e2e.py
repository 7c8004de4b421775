"""Failover end to end (issue 31), with the real parts: two namespace Slurm clusters and the local
cluster as three placements of one run, launched through the `foundry` CLI, a watchdog daemon
(`foundry watch --daemon`, its pid recorded) and nobody else acting.

Every node of the first cluster is lost (SIGKILL of every process: its controller with it, so only
the job's silent heartbeat plus the unreachable provider make it lost) -> the watchdog relaunches
on the second cluster with another node count -> that cluster's slurmctld is frozen
(SIGSTOP by its recorded pid) for longer than the watchdog's timeouts: the run shows `unknown`, no
second job starts -> SIGCONT -> it completes, once, with the losses of an uninterrupted run.
Exactly one job is alive at any time: checked in every provider's process table (each namespace's
processes, and the host's for the local cluster), sampled throughout, never in the registry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from support.multinode import (JOB, check_same_as_reference, ended, ended_how, foundry, run_yaml, steps,
                               steps_of_resumption, wait_status)

pytestmark = [pytest.mark.integration, pytest.mark.multinode, pytest.mark.slow]
RUN = "failover-e2e"
CUT_RUN = "route-cut"   # its own name: its own checkpoint folder (the bucket is the session's)
DEADLINE_S = 20          # FOUNDRY_HEARTBEAT_DEADLINE_S for the watchdog (heartbeats every 10 s)
SLURM_CMD_TIMEOUT_S = 60  # the slurm provider's command timeout (backends/compute/slurm/commands.py)
FREEZE_S = SLURM_CMD_TIMEOUT_S + 5   # longer than every watchdog timeout: the command's and the deadline


def _job_key(pid: int, run: str) -> tuple[str, str] | None:
    """(cluster or 'local', job id) when `pid` is a process of this test's run, else None."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if JOB.encode() not in cmdline:
            return None
        env = dict(kv.split(b"=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in kv)
    except OSError:   # exited meanwhile
        return None
    if env.get(b"RUN_NAME") != run.encode():
        return None
    job = env.get(b"SLURM_JOB_ID", b"").decode() or "pid-group"
    return job, env.get(b"RESUMPTION_INDEX", b"?").decode()


class ProcessTables:
    """Samples, every 0.5 s, the jobs of this run alive in each provider's process table: the
    namespace nodes' processes (`ip netns pids`) per Slurm cluster, and the host's own processes
    (outside every node namespace) for the local cluster."""

    def __init__(self, clusters, run: str = RUN):
        self.clusters, self.run = clusters, run
        self.samples: list[tuple[float, dict[str, set]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> dict[str, set]:
        seen: dict[str, set] = {}
        in_nodes: set[int] = set()
        for cluster in self.clusters:
            for node in cluster.node_names:
                out = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True).stdout
                for pid in map(int, out.split()):
                    in_nodes.add(pid)
                    key = _job_key(pid, self.run)
                    if key:
                        seen.setdefault(cluster.name, set()).add(key)
        host_net = os.readlink("/proc/self/ns/net")
        for entry in os.listdir("/proc"):   # the local cluster: its ranks are host processes
            if entry.isdigit() and int(entry) not in in_nodes:
                try:   # a node's process started after its namespace was listed is not the local cluster's
                    if os.readlink(f"/proc/{entry}/ns/net") != host_net:
                        continue
                except OSError:
                    continue
                key = _job_key(int(entry), self.run)
                if key:
                    seen.setdefault("local", set()).add(key)
        return seen

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.sample()))
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)

    def jobs_at_once(self) -> int:
        return max((sum(len(v) for v in s.values()) for _, s in self.samples), default=0)

    def crowded(self) -> list:
        """The samples that saw more than one job (for the assertion message)."""
        return [x for x in self.samples if sum(len(v) for v in x[1].values()) > 1][:5]

    def jobs_seen(self) -> set:
        return {(c, k) for _, s in self.samples for c, keys in s.items() for k in keys}


@pytest.fixture
def watchdog_daemon(mn_home, monkeypatch):
    """`foundry watch --daemon` with a short heartbeat deadline; its pid from its record; stopped at the end."""
    monkeypatch.setenv("FOUNDRY_HEARTBEAT_DEADLINE_S", str(DEADLINE_S))
    out = foundry("watch", "--daemon", "--interval", "2")
    home = Path(os.environ["FOUNDRY_HOME"])
    records = [json.loads(p.read_text()) for p in (home / "watchdogs").glob("*.json")]
    assert len(records) == 1, out
    pid = records[0]["pid"]
    yield pid
    foundry("watch", "--stop")
    stat = Path(f"/proc/{pid}/stat")   # gone, or a zombie its new parent has not reaped yet
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", f"watchdog {pid} still runs"


def hold_without_false_recovery(run_dir: Path, resumption: int, seconds: float,
                                name: str = RUN) -> tuple[dict | None, int]:
    """For `seconds` (the provider unobservable meanwhile): the run is `running` or `unknown`, never
    relaunched. Returns the latest resumption as first seen `unknown` and the steps it trained meanwhile."""
    start, steps_before = time.monotonic(), len(steps_of_resumption(run_dir, resumption))
    unknown = None
    while time.monotonic() - start < seconds:
        run = json.loads(foundry("describe", "run", name, "--json"))
        assert len(run["resumptions"]) == resumption + 1, ended_how(name, run)   # no second job
        assert run["status"] in ("running", "unknown"), ended_how(name, run)
        if run["status"] == "unknown" and unknown is None:
            unknown = run["resumptions"][-1]
        time.sleep(2)
    return unknown, len(steps_of_resumption(run_dir, resumption)) - steps_before


def restore_cluster(cluster) -> None:
    """Every node back (links up, slurmd) and the controller too (up.sh is idempotent)."""
    for n in range(1, cluster.nodes + 1):
        cluster.revive_node(n)
    cluster.script("up.sh", timeout=300)


@pytest.mark.timeout(600)   # ~4 min: a freeze longer than the watchdog's timeouts, two launches
def test_failover_across_three_placements_survives_a_frozen_controller(mn3, mn2, mn_home, mn_dataset, mn_reference,
                                                                       watchdog_daemon, capsys):
    spec_path = run_yaml(mn_home["tmp"] / "run.yaml", RUN, "mn3", 3, 3, mn_dataset, mn_dataset["bucket"], mn3,
                         max_retries=2, STEP_DELAY="3.0", SAVE_INTERVAL="2ba")
    spec = yaml.safe_load(spec_path.read_text())
    spec["compute"] = [{"cluster": "mn3", "nodes": 3, "gpus": 3},    # world 3
                       {"cluster": "mn2", "nodes": 2, "gpus": 2},    # world 2: another node count
                       {"cluster": "local", "gpus": 1}]
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    run_dir = mn_home["tmp"] / "foundry-home" / "runs" / RUN
    ctld_pid = int((mn2.root / "run" / "slurmctld.pid").read_text())
    frozen = mn3_down = False
    with ProcessTables((mn3, mn2)) as tables:
        try:
            foundry("run", "-f", str(spec_path))
            wait_status(RUN, lambda d: len(steps_of_resumption(run_dir, 0)) >= 4, timeout=240, poll=0.5)
            # every node, the controller's (node 1) with them; links stay up, so the control plane's
            # squeue is refused at once rather than hanging on a dead link (each pass would take ~60 s)
            for n in range(1, mn3.nodes + 1):
                mn3.kill_node(n)
            mn3_down = True
            moved = wait_status(RUN, lambda d: len(d["resumptions"]) >= 2 and steps_of_resumption(run_dir, 1),
                                timeout=240, poll=0.5)
            assert moved["resumptions"][1]["cluster"] == "mn2", ended_how(RUN, moved)

            os.kill(ctld_pid, signal.SIGSTOP)
            frozen = True
            unknown_seen, steps_in_freeze = hold_without_false_recovery(run_dir, 1, FREEZE_S)
            os.kill(ctld_pid, signal.SIGCONT)
            frozen = False
            done = wait_status(RUN, lambda d: ended(d) and not (d["status"] == "lost"
                                                                and d["retries_used"] < d["max_retries"]),
                               timeout=240, poll=1)
        finally:
            if frozen:
                os.kill(ctld_pid, signal.SIGCONT)
            if mn3_down:
                restore_cluster(mn3)
    assert done["status"] == "completed", ended_how(RUN, done)
    assert unknown_seen and unknown_seen.get("unknown_reason") and unknown_seen.get("unknown_since"), unknown_seen
    assert steps_in_freeze > 0, "the job did not train while its controller was frozen"
    first, second = done["resumptions"]
    assert first["cluster"] == "mn3" and first["state"] == "lost", first
    assert second["cluster"] == "mn2" and second["cause"] in ("failover", "retry") and second["state"] == "completed"
    check_same_as_reference(steps(run_dir), mn_reference)

    ledger = done["recovery"]
    lost = ledger["entries"][0]
    with capsys.disabled():
        print(f"\nfailover e2e: failure->detection {lost['detect_s']} s (heartbeat deadline {DEADLINE_S} s), "
              f"detection->first step on mn2 {lost['restart_s']} s, steps redone {lost['steps_redone']}, "
              f"goodput {ledger['goodput']} (useful {ledger['useful_s']:.1f} s of wall {ledger['wall_s']:.1f} s); "
              f"controller frozen {FREEZE_S} s, unknown since {unknown_seen['unknown_since']}: "
              f"{unknown_seen['unknown_reason']}")
    # the process tables: never two jobs of the run at once, and exactly the two jobs (mn3's, mn2's)
    assert tables.jobs_at_once() == 1, tables.crowded()
    clusters_seen = {c for c, _ in tables.jobs_seen()}
    assert clusters_seen == {"mn3", "mn2"}, tables.jobs_seen()
    assert len(tables.jobs_seen()) == 2, tables.jobs_seen()

    assert lost["detect_s"] is not None and lost["restart_s"] is not None and ledger["goodput"] > 0


@pytest.mark.timeout(600)
def test_a_cut_route_to_the_cluster_is_no_loss(mn3, mn2, mn_home, mn_dataset, mn_reference, watchdog_daemon):
    """The control plane's route to mn2 cut (scripts/infra/multinode/route.sh) for longer than the
    watchdog's timeouts while the run trains there, with a failover placement ready: the run keeps
    training, shows `unknown` with the reason and since when, no second job starts, and it completes
    once after the route is back."""
    spec_path = run_yaml(mn_home["tmp"] / "run.yaml", CUT_RUN, "mn2", 2, 2, mn_dataset, mn_dataset["bucket"], mn3,
                         max_retries=1, STEP_DELAY="3.0", SAVE_INTERVAL="2ba")
    spec = yaml.safe_load(spec_path.read_text())
    spec["compute"] = [{"cluster": "mn2", "nodes": 2, "gpus": 2}, {"cluster": "local", "gpus": 1}]
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    run_dir = mn_home["tmp"] / "foundry-home" / "runs" / CUT_RUN
    cut = False
    with ProcessTables((mn3, mn2), CUT_RUN) as tables:
        try:
            foundry("run", "-f", str(spec_path))
            wait_status(CUT_RUN, lambda d: len(steps_of_resumption(run_dir, 0)) >= 2, timeout=240, poll=0.5)
            mn2.script("route.sh", "cut")
            cut = True
            unknown, steps_in_cut = hold_without_false_recovery(run_dir, 0, FREEZE_S, CUT_RUN)
            mn2.script("route.sh", "restore")
            cut = False
            done = wait_status(CUT_RUN, ended, timeout=240, poll=1)
        finally:
            if cut:
                mn2.script("route.sh", "restore")
    assert done["status"] == "completed", ended_how(CUT_RUN, done)
    assert len(done["resumptions"]) == 1 and done["resumptions"][0]["cluster"] == "mn2", ended_how(CUT_RUN, done)
    assert unknown and unknown.get("unknown_reason") and unknown.get("unknown_since"), unknown
    assert steps_in_cut > 0, "the job did not train while the control plane's route was cut"
    check_same_as_reference(steps(run_dir), mn_reference)
    assert tables.jobs_at_once() == 1 and {c for c, _ in tables.jobs_seen()} == {"mn2"}, tables.crowded()
    print(f"\nroute cut {FREEZE_S} s: unknown since {unknown['unknown_since']}: {unknown['unknown_reason']}; "
          f"{steps_in_cut} steps trained meanwhile")
