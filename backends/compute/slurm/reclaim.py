"""Finding a Slurm job whose launcher died before it recorded the job id (see app/control/launch_intent.py).

The intent is the job folder (unique per launch: dryrun adds a random token). The job is found by
its comment in squeue (`foundry|run|id|resumption|job_dir`), or, once Slurm forgot it, by the
`slurm-JOBID.out` it wrote into its folder. When neither exists, the folder's `launch.claim` is taken
for "abandoned": the batch script takes that claim first thing, so a job submitted by an sbatch
still in flight finds it taken and exits without running anything (and is cancelled if we see it).
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from foundry.plugins.compute import JobHandle

from .script import CLAIM_FILE, parse_comment

if TYPE_CHECKING:
    from .provider import SlurmProvider

_OUT = re.compile(r"^slurm-(\d+)\.out$")


def _handle(provider: "SlurmProvider", job_id: str, job_dir: str, info: dict | None) -> JobHandle:
    info = info or {}
    return JobHandle(provider=provider.name, cluster=provider.config.name, job_id=job_id,
                     data={"job_dir": job_dir, "nodes": info.get("nodes"), "run_name": info.get("run_name"),
                           "run_id": info.get("run_id"), "resumption": info.get("resumption")})


def _queued(provider: "SlurmProvider", job_dir: str) -> tuple[str, dict] | None:
    for job_id, job in provider.cli.squeue().items():
        info = parse_comment(job["comment"])
        if info and info["job_dir"] == job_dir:
            nodes = int(job["nodes"]) if job["nodes"].isdigit() else None
            return job_id, {**info, "nodes": nodes, "resumption": int(info["resumption"])}
    return None


def _ran(provider: "SlurmProvider", job_dir: str) -> str | None:
    """The id of a job that already started in `job_dir` (its output file is named after it)."""
    listing = provider.cli.text(["ls", "-1", job_dir], check=False)
    ids = [m.group(1) for name in listing.split() if (m := _OUT.match(name))]
    return ids[0] if ids else None


def reclaim(provider: "SlurmProvider", intent: dict) -> JobHandle | None:
    job_dir = str(intent["job_dir"])
    found = _queued(provider, job_dir)
    if found:
        return _handle(provider, found[0], job_dir, found[1])
    job_id = _ran(provider, job_dir)
    if job_id:
        return _handle(provider, job_id, job_dir, None)
    claim = str(PurePosixPath(job_dir) / CLAIM_FILE)
    if provider.cli.exists(job_dir):
        # ln fails when the name exists: the claim is taken once, with its content
        script = (f"printf 'abandoned\\n' > {shlex.quote(claim)}.ctl.$$ && "
                  f"ln {shlex.quote(claim)}.ctl.$$ {shlex.quote(claim)}; rm -f {shlex.quote(claim)}.ctl.$$")
        provider.cli.run(["bash", "-c", script], check=False)
        owner = (provider.cli.read_file(claim) or b"").decode(errors="replace").strip()
        if owner.startswith("job "):   # the job started between our looks: adopt it
            return _handle(provider, owner.split()[1], job_dir, None)
    late = _queued(provider, job_dir)   # an sbatch that was still in flight: it would exit at once
    if late:
        provider.cli.run(["scancel", late[0]], check=False)
    return None
