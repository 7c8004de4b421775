"""GPU leases on one host: which job holds which device indices, so two runs never share a GPU.

One lease file per host (REMOTE_DIR/leases.json), changed only under an exclusive flock of its
lock file and replaced atomically: concurrent launches from two `foundry` processes (or two
control machines sharing the fleet) serialize on the host itself, where the devices are.
A lease names the job folder that holds it; it is given back by the job's launcher when the job
ends, and taken back by the next `take` when its holder is gone (an exit record written, or the
launcher's recorded pid + start time no longer alive, or never started STALE_AFTER_S after taking).
Runs on the host, with the job's python (standard library + foundry.plugins only).
"""

from __future__ import annotations

import fcntl
import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.process_identity import still_running

STALE_AFTER_S = 300.0   # a lease whose launcher never started (the launching CLI died) is free after this


class LeaseBusy(Exception):
    pass


@contextmanager
def _locked(path: Path) -> Iterator[dict]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = json.loads(path.read_text()) if path.exists() else {}
        except ValueError:
            data = {}
        leases = data.setdefault("leases", {})
        before = json.dumps(data, sort_keys=True)
        yield leases
        if json.dumps(data, sort_keys=True) != before:
            atomic_write(path, json.dumps(data, indent=1))


def holder_alive(lease: dict, now: float | None = None) -> bool:
    job_dir = Path(lease["job_dir"])
    if (job_dir / "exit.json").exists():
        return False
    try:
        pid, created = (job_dir / "pid").read_text().split()
    except (OSError, ValueError):   # not started (yet): the launch is in progress, or its CLI died
        return (now or time.time()) - float(lease.get("taken_at", 0)) < STALE_AFTER_S
    return still_running(int(pid), None if created == "None" else float(created))


def take(path: Path, job_id: str, job_dir: str, count: int, total: int) -> list[int]:
    """`count` of the host's `total` device indices for `job_id`; LeaseBusy when fewer are free."""
    with _locked(Path(path)) as leases:
        for other in [k for k, v in leases.items() if k != job_id and not holder_alive(v)]:
            del leases[other]
        if job_id in leases:
            return list(leases[job_id]["gpus"])
        used = {g for v in leases.values() for g in v["gpus"]}
        free = [i for i in range(total) if i not in used]
        if len(free) < count:
            holders = ", ".join(sorted(v.get("run", k) for k, v in leases.items()))
            raise LeaseBusy(f"{len(free)} of {total} GPU(s) free (held by {holders or 'nobody'}); {count} needed")
        leases[job_id] = {"gpus": free[:count], "job_dir": job_dir, "taken_at": time.time(),
                          "run": Path(job_dir).name}
        return free[:count]


def release(path: Path, job_id: str) -> None:
    with _locked(Path(path)) as leases:
        leases.pop(job_id, None)


def held(path: Path) -> dict[str, list[int]]:
    """job id -> device indices, as the lease file says now (stale leases included)."""
    with _locked(Path(path)) as leases:
        return {k: list(v["gpus"]) for k, v in leases.items()}
