"""Running Slurm's commands and touching the job folder, locally or on a login node over ssh,
and parsing their output. Parsers are pure functions (unit-tested on captured output).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from foundry.plugins.errors import ProviderError

# squeue's job states -> what they mean for Foundry (see JobState)
ACTIVE_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD",
                 "SPECIAL_EXIT", "STAGE_OUT"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING"}
LOST_STATES = {"CANCELLED", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "TIMEOUT", "DEADLINE",
               "OUT_OF_MEMORY", "REVOKED"}
SQUEUE_FORMAT = "%i|%T|%r|%D|%k"   # what parse_squeue reads: id, state, reason, nodes, comment


class SlurmCLI:
    """Runs `sbatch`, `squeue`, `scancel`, `sinfo`, `scontrol` and file operations.

    With `ssh_host` every command goes through `ssh -o BatchMode=yes HOST`; job folders then
    live on the cluster's shared filesystem and are read with `cat`/`tail` there.
    """

    def __init__(self, ssh_host: str | None = None, timeout: float = 60.0, env: dict[str, str] | None = None):
        self.ssh_host = ssh_host
        self.timeout = timeout
        self.env = dict(env or {})   # the cluster's own SLURM_CONF etc., whatever the caller's environment

    def run(self, argv: list[str], input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
        full, env = argv, None
        if self.ssh_host:
            remote = ["env", *(f"{k}={v}" for k, v in self.env.items()), *argv] if self.env else argv
            full = ["ssh", "-o", "BatchMode=yes", self.ssh_host, "--", shlex.join(remote)]
        elif self.env:
            env = {**os.environ, **self.env}
        try:
            proc = subprocess.run(full, input=input, capture_output=True, timeout=self.timeout, env=env)
        except FileNotFoundError as exc:
            raise ProviderError(
                f"slurm: {full[0]!r} not found",
                hint="install the Slurm client tools, or set ssh_host to a login node in the cluster config",
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise ProviderError(f"slurm: `{argv[0]}` did not answer in {self.timeout:.0f} s") from exc
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise ProviderError(f"slurm: `{argv[0]}` failed ({proc.returncode}): {err[-1] if err else ''}".rstrip(": "))
        return proc

    def text(self, argv: list[str], check: bool = True) -> str:
        return self.run(argv, check=check).stdout.decode(errors="replace")

    def squeue(self, job_id: str | None = None) -> dict[str, dict[str, str]]:
        """The jobs squeue knows (all states; one with `job_id`), parsed: {} for a job id Slurm forgot."""
        argv = ["squeue", "-h", "--states=all", "-o", SQUEUE_FORMAT]
        if job_id:
            argv += ["-j", job_id]
        proc = self.run(argv, check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace")
            if "Invalid job id" in err:
                return {}
            raise ProviderError(f"slurm: squeue failed: {err.strip()}",
                                hint="is slurmctld running? (`scontrol ping`)")
        return parse_squeue(proc.stdout.decode(errors="replace"))

    # ---- files in job folders
    def write_file(self, path: str, content: bytes, mode: int = 0o600) -> None:
        if self.ssh_host:
            d = shlex.quote(str(Path(path).parent))
            p = shlex.quote(path)
            script = f"umask 077 && mkdir -p {d} && cat > {p} && chmod {mode:o} {p}"
            self.run(["bash", "-c", script], input=content)
            return
        Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            os.write(fd, content)
        finally:
            os.close(fd)
        os.chmod(path, mode)

    def make_dirs(self, *paths: str, mode: int = 0o700) -> None:
        if self.ssh_host:
            self.run(["mkdir", "-p", "-m", f"{mode:o}", *paths])
            return
        for p in paths:
            Path(p).mkdir(parents=True, exist_ok=True)
            os.chmod(p, mode)

    def read_file(self, path: str, offset: int = 0) -> bytes | None:
        """Bytes of `path` from `offset`, or None when it does not exist (yet)."""
        if self.ssh_host:
            proc = self.run(["tail", "-c", f"+{offset + 1}", path], check=False)
            return proc.stdout if proc.returncode == 0 else None
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return None

    def exists(self, path: str) -> bool:
        if self.ssh_host:
            return self.run(["test", "-e", path], check=False).returncode == 0
        return os.path.exists(path)


def parse_sbatch(out: str) -> str:
    """`sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`."""
    job_id = out.strip().splitlines()[-1].split(";")[0].strip() if out.strip() else ""
    if not job_id.isdigit():
        raise ProviderError(f"slurm: unexpected sbatch answer {out.strip()!r}")
    return job_id


def parse_squeue(out: str) -> dict[str, dict[str, str]]:
    """`squeue -h -o '%i|%T|%r|%D|%k'` -> {job_id: {state, reason, nodes, comment}}."""
    jobs = {}
    for line in out.splitlines():
        parts = line.strip().split("|", 4)
        if len(parts) < 4 or not parts[0]:
            continue
        jobs[parts[0]] = {"state": parts[1].split()[0] if parts[1] else "", "reason": parts[2],
                          "nodes": parts[3], "comment": parts[4] if len(parts) > 4 else ""}
    return jobs


def parse_scontrol_job(out: str) -> dict[str, str]:
    """`scontrol show job -o ID` -> its Key=Value fields (JobState, ExitCode, Reason, ...)."""
    fields = {}
    for token in out.split():
        if "=" in token:
            key, _, value = token.partition("=")
            fields.setdefault(key, value)
    return fields


def parse_gres_gpus(gres: str) -> int:
    """`gpu:a100:4(S:0-1),shard:2` -> 4."""
    total = 0
    for item in gres.split(","):
        item = item.split("(")[0]
        parts = item.split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def parse_sinfo(out: str) -> list[dict[str, object]]:
    """`sinfo -h -N -o '%N|%c|%G|%T|%P'` -> one dict per node (partitions merged)."""
    nodes: dict[str, dict[str, object]] = {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 5:
            continue
        name, cpus, gres, state, partition = parts[:5]
        node = nodes.setdefault(name, {"name": name, "cpus": int(cpus) if cpus.isdigit() else 0,
                                       "gpus": parse_gres_gpus(gres), "state": state.rstrip("*~#!%$@^-+"),
                                       "partitions": []})
        node["partitions"].append(partition.rstrip("*"))  # type: ignore[union-attr]
    return list(nodes.values())
