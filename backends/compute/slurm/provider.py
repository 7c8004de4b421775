"""The `slurm` compute provider: sbatch + srun + torchrun on a Slurm cluster.

Status comes from squeue (finished jobs stay visible for MinJobAge) and the exit-code file the
batch script writes; `sacct` is not needed (clusters without slurmdbd have no accounting).
"""

from __future__ import annotations

import dataclasses
import secrets as _secrets
import time
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from foundry.plugins.compute import (
    PAUSED_EXIT_CODE,
    Capabilities,
    JobHandle,
    JobRequest,
    JobState,
    JobStatus,
    Plan,
)
from foundry.plugins.errors import ProviderError

from . import commands as sc
from .config import SlurmConfig
from .script import job_environment, parse_comment, render_env, render_files, secret_path


def exit_code_state(code: int) -> JobState:
    if code == 0:
        return JobState.COMPLETED
    if code == PAUSED_EXIT_CODE:
        return JobState.PAUSED
    return JobState.FAILED


class SlurmProvider:
    """One Slurm cluster. `SlurmProvider({"partition": ..., "ssh_host": ...})`."""

    name = "slurm"
    capabilities = Capabilities(multi_node=True, gpus=True, preemption_notice=True, graceful_stop=True,
                                gpu_type_selection=True, launch_modes=("per_process", "per_node"))

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        self.config = SlurmConfig.from_dict(cluster_config)
        if self.config.signal and self.config.signal.startswith("TERM@"):  # SIGTERM N s before the time limit
            self.capabilities = dataclasses.replace(type(self).capabilities,
                                                    notice_window_s=float(self.config.signal.split("@")[1]))
        self.cli = sc.SlurmCLI(self.config.ssh_host, env=self.config.command_env())

    # ---- planning (no side effects)
    def _jobs_root(self, request: JobRequest) -> str:
        root = self.config.jobs_dir or request.log_dir
        if root is None:
            if self.config.ssh_host:
                return "foundry-jobs"  # relative to the login user's home
            root = str(Path.home() / ".foundry" / "slurm-jobs")
        return str(Path(root).expanduser()) if not self.config.ssh_host else root

    def dryrun(self, request: JobRequest) -> Plan:
        token = _secrets.token_hex(3)
        job_dir = str(PurePosixPath(self._jobs_root(request)) / f"{request.run_name}-r{request.resumption}-{token}")
        files = render_files(request, self.config, job_dir)
        where = f" on {self.config.ssh_host}" if self.config.ssh_host else ""
        part = f" partition {self.config.partition}" if self.config.partition else ""
        summary = (f"sbatch{where}{part}: {request.nodes} node(s) x {request.procs_per_node} process(es)"
                   f"{f', {request.gpus_per_node} GPU(s)/node' if request.gpus_per_node else ''}; job folder {job_dir}")
        artifacts = {"sbatch": files["job.sbatch"], "rank.sh": files["rank.sh"], "pause.sh": files["pause.sh"]}
        planned = dataclasses.replace(request, extra={**request.extra, "slurm_job_dir": job_dir})
        return Plan(provider=self.name, request=planned, summary=summary, artifacts=artifacts)

    # ---- launching
    def launch(self, plan: Plan) -> JobHandle:
        request = plan.request
        job_dir = request.extra.get("slurm_job_dir")
        if not job_dir:
            raise ProviderError("slurm: this plan was not made by the slurm provider's dryrun")
        if self.cli.exists(str(PurePosixPath(job_dir) / "job.sbatch")):
            raise ProviderError(f"slurm: job folder {job_dir} was already launched", hint="run dryrun again")
        d = PurePosixPath(job_dir)
        self.cli.make_dirs(job_dir, str(d / "secrets"), str(d / "ranks"), str(d / "logs"))
        for mount in request.secret_files:
            self.cli.write_file(secret_path(job_dir, mount.path), mount.content, mode=mount.mode or 0o600)
        self.cli.write_file(str(d / "env.sh"), render_env(job_environment(request, job_dir)).encode(), 0o600)
        for name, text in render_files(request, self.config, job_dir).items():
            self.cli.write_file(str(d / name), text.encode(), 0o700 if name != "job.sbatch" else 0o600)
        job_id = sc.parse_sbatch(self.cli.text(["sbatch", "--parsable", str(d / "job.sbatch")]))
        return JobHandle(
            provider=self.name, cluster=self.config.name, job_id=job_id,
            data={"job_dir": job_dir, "nodes": request.nodes, "run_name": request.run_name,
                  "run_id": request.run_id, "resumption": request.resumption},
        )

    # ---- a launch whose launcher died before recording the job id (reclaim.py)
    def launch_intent(self, plan: Plan) -> dict[str, Any]:
        return {"job_dir": plan.request.extra["slurm_job_dir"]}

    def reclaim(self, intent: dict[str, Any]) -> JobHandle | None:
        from .reclaim import reclaim

        return reclaim(self, intent)

    # ---- observing
    def _exit_code(self, handle: JobHandle) -> int | None:
        raw = self.cli.read_file(str(PurePosixPath(handle.data["job_dir"]) / "exit_code"))
        try:
            return int(raw.decode().strip()) if raw else None
        except ValueError:
            return None

    def status(self, handle: JobHandle) -> JobStatus:
        job = self.cli.squeue(handle.job_id).get(handle.job_id)
        nodes = handle.data.get("nodes")
        code = self._exit_code(handle)
        state = job["state"] if job else None
        job_dir = PurePosixPath(handle.data["job_dir"])
        # Only stop() writes stop_requested: it is the one proof that someone asked for a stop. The batch
        # trap's pause_requested is not: Slurm's own SIGTERM (NODE_FAIL, time limit) runs the same trap.
        stopped_by_us = self.cli.exists(str(job_dir / "stop_requested"))
        if state in sc.ACTIVE_STATES:
            return JobStatus(JobState.PENDING, reason=job["reason"] if job["reason"] != "None" else None, nodes=nodes)
        if state in sc.RUNNING_STATES:
            # COMPLETING hides the final state (a cancelled job shows COMPLETING first): wait for it
            return JobStatus(JobState.STOPPING if stopped_by_us else JobState.RUNNING, nodes=nodes)
        if state == "CANCELLED" and code is None and stopped_by_us and not self.cli.exists(str(job_dir / "ranks" / "0.pid")):
            return JobStatus(JobState.PAUSED, reason="stopped before it started", nodes=nodes)
        killed_by_us = self.cli.exists(str(job_dir / "kill_requested"))
        if killed_by_us and code not in (0, PAUSED_EXIT_CODE) and state not in sc.RUNNING_STATES:
            return JobStatus(JobState.LOST, exit_code=code, reason="slurm job cancelled by a hard stop", nodes=nodes)
        if state in sc.LOST_STATES and code != PAUSED_EXIT_CODE:
            return JobStatus(JobState.LOST, exit_code=code, reason=f"slurm job {state.lower()}", nodes=nodes)
        if code is not None:
            reason = "paused after a checkpoint" if code == PAUSED_EXIT_CODE else None
            return JobStatus(exit_code_state(code), exit_code=code, reason=reason, nodes=nodes)
        if state in ("COMPLETED", "FAILED"):
            # the batch script ended without writing its exit code: ask scontrol
            fields = sc.parse_scontrol_job(self.cli.text(["scontrol", "show", "job", "-o", handle.job_id], check=False))
            code = int(fields.get("ExitCode", "1:0").split(":")[0] or 1)
            return JobStatus(exit_code_state(code), exit_code=code, reason="no exit-code file", nodes=nodes)
        if state is None:
            return JobStatus(JobState.LOST, reason="slurm no longer knows the job and it wrote no exit code")
        return JobStatus(JobState.UNKNOWN, reason=f"slurm state {state}")

    def logs(self, handle: JobHandle, follow: bool = False, rank: int | None = None) -> Iterator[str]:
        d = PurePosixPath(handle.data["job_dir"])
        path = str(d / "logs" / f"rank-{rank}.log") if rank is not None else str(d / f"slurm-{handle.job_id}.out")
        offset, pending = 0, b""
        while True:
            chunk = self.cli.read_file(path, offset) or b""
            offset += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode(errors="replace")
            if not follow:
                break
            if not chunk and self.status(handle).state.terminal:
                final = self.cli.read_file(path, offset) or b""
                pending += final
                if not final:
                    break
                continue
            if not chunk:
                time.sleep(0.5)
        if pending:
            yield pending.decode(errors="replace")

    # ---- stopping
    def stop(self, handle: JobHandle, graceful: bool = True) -> None:
        job = self.cli.squeue(handle.job_id).get(handle.job_id)
        if job is None or job["state"] not in sc.ACTIVE_STATES | sc.RUNNING_STATES:
            return  # already finished
        job_dir = PurePosixPath(handle.data["job_dir"])
        if graceful:   # status() shows STOPPING at once, and PAUSED for a job cancelled while pending
            self.cli.write_file(str(job_dir / "stop_requested"), b"graceful\n")
        else:          # status() reports the job as cancelled (LOST) whatever exit code the kill leaves
            self.cli.write_file(str(job_dir / "kill_requested"), b"hard\n")
        if graceful and job["state"] in sc.RUNNING_STATES:
            # the batch shell's trap sends SIGTERM once to every worker; they checkpoint and exit 75
            self.cli.run(["scancel", "--batch", "--signal=TERM", handle.job_id])
        else:
            self.cli.run(["scancel", handle.job_id])

    def list(self) -> list[JobHandle]:
        handles = []
        for job_id, job in self.cli.squeue().items():
            info = parse_comment(job["comment"])
            if info is None:
                continue
            handles.append(JobHandle(
                provider=self.name, cluster=self.config.name, job_id=job_id,
                data={"job_dir": info["job_dir"], "nodes": int(job["nodes"]) if job["nodes"].isdigit() else None,
                      "run_name": info["run_name"], "run_id": info["run_id"],
                      "resumption": int(info["resumption"]) if info["resumption"].isdigit() else 0},
            ))
        return handles

    def describe(self) -> dict[str, Any]:
        argv = ["sinfo", "-h", "-N", "-o", "%N|%c|%G|%T|%P"]
        if self.config.partition:
            argv += ["-p", self.config.partition]
        nodes = sc.parse_sinfo(self.cli.text(argv))
        gpus = sum(int(n["gpus"]) for n in nodes)
        cpus = sum(int(n["cpus"]) for n in nodes)
        usable = [n for n in nodes if str(n["state"]).split("+")[0] in ("idle", "mixed", "allocated", "completing")]
        return {
            "provider": self.name,
            "nodes": len(nodes),
            "cpus": cpus,
            "gpus": gpus,
            "devices": gpus or cpus,
            "state": "ready" if usable else ("down" if nodes else "no nodes"),
            "node_list": nodes,
        }
