"""The `local` compute provider: detached torchrun jobs on this machine, the embedded default.

launch() starts `local_job` (setup steps, then torchrun over per-rank wrappers) in a new session, so
the job outlives the CLI. Everything about a job lives in its job dir (JobRequest.log_dir):
  job.json, pid            what was launched, and the launcher's pid + start time
  launch.claim             "started PID TIME" by the launcher, or "abandoned" by reclaim (local_claim.py)
  job.log                  launcher output and every rank's output prefixed "[rank N]"
  ranks/rank-N.log|.exit   one process's output and exit status
  exit.json                the final state, written by the launcher
  secrets/                 the job's secret files (0600), relocated from their /foundry/secrets paths
Commands start in JobRequest.workdir, else the cluster's `workdir`, else the directory `foundry run`
was typed in (extra["submit_dir"]), else the job dir.
Status comes from exit.json, else from the launcher process (gone without exit.json: LOST).
stop(graceful) sends SIGTERM to the launcher's process group (torchrun forwards it to the ranks; the
trainer checkpoints and exits 75 -> PAUSED); stop(graceful=False) SIGKILLs the whole tree.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.compute import (Capabilities, JobHandle, JobRequest, JobState, JobStatus, Plan)
from foundry.plugins.errors import ProviderError
from foundry.plugins.process_identity import create_time, still_running

from .local_claim import CLAIM_FILE, claim_launch, read_claim

CLAIM_WAIT_S = 30.0   # how long reclaim waits for a launcher that runs to claim its folder


class LocalProvider:
    name = "local"

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        self.config = dict(cluster_config or {})
        self.cluster = self.config.get("name", "local")
        gpus = self.config.get("gpus")
        if gpus is None:  # autodetect: a machine with an NVIDIA driver has GPUs
            gpus = shutil.which("nvidia-smi") is not None
        self.capabilities = Capabilities(multi_node=False, gpus=bool(gpus), preemption_notice=False,
                                         graceful_stop=True, max_nodes=1, launch_modes=("per_process", "per_node"))

    # --- planning -----------------------------------------------------------------------------
    def _job_dir(self, request: JobRequest) -> Path:
        if request.log_dir:
            return Path(request.log_dir)
        base = Path(self.config.get("jobs_dir") or Path.home() / ".cache" / "foundry-local-jobs")
        return base / f"{request.run_name}-{request.resumption}"

    def dryrun(self, request: JobRequest) -> Plan:
        if request.nodes != 1:
            raise ProviderError(f"the local provider runs on one node (asked for {request.nodes})",
                                hint="use nodes: 1, or a slurm/kubernetes cluster")
        job_dir = self._job_dir(request)
        if request.extra.get("launch") == "per_node":   # the command starts its ranks itself (mcli)
            command = (f"NODE_RANK=0 NUM_NODES=1 LOCAL_WORLD_SIZE={request.procs_per_node} "
                       f"WORLD_SIZE={request.procs_per_node} MASTER_ADDR=127.0.0.1 {shlex.join(request.command)}")
        else:
            command = (f"torchrun --standalone --nnodes=1 --nproc_per_node={request.procs_per_node} "
                       f"--no-python {shlex.join(request.command)}")
        setup = request.extra.get("setup_commands", [])
        artifacts = {"command": command, "job_dir": str(job_dir)}
        if setup:
            artifacts["setup"] = "\n".join(setup)
        how = ("the command once (it starts them)" if request.extra.get("launch") == "per_node" else "under torchrun")
        summary = f"local: {request.procs_per_node} process(es), {how} on this machine, logs in {job_dir}"
        return Plan(provider=self.name, request=request, summary=summary, artifacts=artifacts)

    # --- launching ----------------------------------------------------------------------------
    def _place_secret_files(self, request: JobRequest, job_dir: Path) -> dict[str, str]:
        env = dict(request.env)
        if not request.secret_files:
            return env
        root = job_dir / "secrets"
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        for mount in request.secret_files:
            target = root / mount.path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mount.mode)
            with os.fdopen(fd, "wb") as fh:
                fh.write(mount.content)
            env = {k: v.replace(mount.path, str(target)) for k, v in env.items()}
        return env

    def launch_intent(self, plan: Plan) -> dict[str, Any]:
        """Where `reclaim` finds this launch if the launching process dies before it has a handle."""
        return {"job_dir": str(self._job_dir(plan.request))}

    def reclaim(self, intent: dict[str, Any]) -> JobHandle | None:
        """The handle of the job launched into intent["job_dir"], or None once it can never start.

        The launcher (local_job) claims the job folder as its first act; here the claim is taken for
        "abandoned" when nobody holds it, so a launcher that starts late exits without running."""
        job_dir = Path(intent["job_dir"])
        if not job_dir.is_dir():
            return None
        owner = read_claim(job_dir)
        deadline = time.monotonic() + CLAIM_WAIT_S
        while owner is None and self._launcher_started(job_dir) and time.monotonic() < deadline:
            time.sleep(0.1)   # its launcher runs and is about to claim the folder: let it
            owner = read_claim(job_dir)
        if owner is None:
            owner = claim_launch(job_dir, "abandoned")
        if owner == "abandoned":
            return None
        pid, created = (int(owner.split()[1]), float(owner.split()[2]))
        job = json.loads((job_dir / "job.json").read_text())
        return JobHandle(provider=self.name, cluster=self.cluster, job_id=job["job_id"],
                         data={"job_dir": str(job_dir), "pid": pid, "create_time": created})

    @staticmethod
    def _launcher_started(job_dir: Path) -> bool:
        """Whether the pid file names a live launcher (its process exists, with that start time)."""
        try:
            pid, created = (job_dir / "pid").read_text().split()
            return still_running(int(pid), None if created == "None" else float(created))
        except (OSError, ValueError):
            return False

    def launch(self, plan: Plan) -> JobHandle:
        request = plan.request
        job_dir = self._job_dir(request)
        job_dir.mkdir(parents=True, exist_ok=True)
        if (job_dir / CLAIM_FILE).exists():
            raise ProviderError(f"local: job folder {job_dir} was already launched", hint="run dryrun again")
        job_id = f"local-{uuid.uuid4().hex[:8]}"
        command = list(request.command)
        if command and command[0].endswith(".py"):  # a script: run it with this interpreter (as slurm does)
            command = [sys.executable, *command]
        job = {"job_id": job_id, "run_name": request.run_name, "nprocs": request.procs_per_node,
               "command": command, "setup_commands": request.extra.get("setup_commands", []),
               "launch": request.extra.get("launch", "per_process")}
        (job_dir / "job.json").write_text(json.dumps(job, indent=2))
        env = {**os.environ, **self._place_secret_files(request, job_dir)}
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        cwd = request.workdir or self.config.get("workdir") or request.extra.get("submit_dir") or str(job_dir)
        if not os.path.isdir(cwd):
            cwd = str(job_dir)
        with open(job_dir / "job.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "foundry.backends.compute.local_job", str(job_dir)],
                env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
        created = create_time(proc.pid)
        (job_dir / "pid").write_text(f"{proc.pid} {created}")
        return JobHandle(provider=self.name, cluster=self.cluster, job_id=job_id,
                         data={"job_dir": str(job_dir), "pid": proc.pid, "create_time": created})

    # --- observing ----------------------------------------------------------------------------
    def _alive(self, handle: JobHandle) -> bool:
        pid = handle.data.get("pid")
        return bool(pid) and still_running(int(pid), handle.data.get("create_time"), reap=True)

    def status(self, handle: JobHandle) -> JobStatus:
        job_dir = Path(handle.data["job_dir"])
        exit_file = job_dir / "exit.json"
        if exit_file.exists():
            record = json.loads(exit_file.read_text())
            return JobStatus(JobState(record["state"]), record.get("exit_code"), record.get("reason"), nodes=1)
        if self._alive(handle):
            state = JobState.STOPPING if (job_dir / "stop-requested").exists() else JobState.RUNNING
            return JobStatus(state, nodes=1)
        if exit_file.exists():  # written between the two checks
            return self.status(handle)
        return JobStatus(JobState.LOST, 137, "the job's launcher process disappeared", nodes=1)

    def logs(self, handle: JobHandle, follow: bool = False, rank: int | None = None) -> Iterator[str]:
        job_dir = Path(handle.data["job_dir"])
        path = job_dir / "job.log" if rank is None else job_dir / "ranks" / f"rank-{rank}.log"
        return _tail(path, follow, lambda: self.status(handle).state.terminal)

    def stop(self, handle: JobHandle, graceful: bool = True) -> None:
        job_dir = Path(handle.data["job_dir"])
        (job_dir / "stop-requested").write_text(str(time.time()))
        if not self._alive(handle):
            return
        pid = int(handle.data["pid"])
        try:
            os.killpg(pid, signal.SIGTERM if graceful else signal.SIGKILL)
        except ProcessLookupError:
            return
        if not graceful:  # each rank's command leads its own process group (local_rank): kill the group,
            for rank_pid in _live_rank_commands(job_dir):        # so what it started dies with it
                try:
                    os.killpg(rank_pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def list(self) -> list[JobHandle]:
        return []  # jobs are found through the run registry's handles

    def describe(self) -> dict[str, Any]:
        gpus = _gpu_count() if self.capabilities.gpus else 0
        return {"devices": gpus or os.cpu_count(), "gpus": gpus, "cpus": os.cpu_count(), "nodes": 1,
                "state": "ready"}


def _gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def _tail(path: Path, follow: bool, finished, poll: float = 0.2) -> Iterator[str]:
    """Lines of `path`; with follow, keep reading until `finished()` and the file is drained."""
    while follow and not path.exists():
        if finished():
            break
        time.sleep(poll)
    if not path.exists():
        return
    with open(path, "r", errors="replace") as fh:
        partial = ""
        while True:
            chunk = fh.readline()
            if chunk:
                partial += chunk
                if partial.endswith("\n"):
                    yield partial.rstrip("\n")
                    partial = ""
                continue
            if not follow:
                break
            if finished():
                rest = fh.read()
                for line in (partial + rest).splitlines():
                    yield line
                return
            time.sleep(poll)
        if partial:
            yield partial


def _live_rank_commands(job_dir: Path) -> list[int]:
    """The pids of the ranks' commands that are still the processes local_rank started: a pid file
    names a pid and its start time, and a pid reused by another process since is left alone."""
    pids = []
    for pidfile in (job_dir / "ranks").glob("rank-*.pid"):
        try:
            pid, started = pidfile.read_text().split()
            if started != "None" and still_running(int(pid), float(started)):
                pids.append(int(pid))
        except (OSError, ValueError):
            continue
    return pids
