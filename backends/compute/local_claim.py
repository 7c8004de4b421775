"""Who owns a local job folder: the launcher that started, or the control plane that gave up on it.

`launch.claim` is created once, atomically and with its content (a hard link of a finished temp
file: link(2) fails if the name exists), by whichever comes first:
  - local_job, as its first act:       "started PID CREATE_TIME"  -> the job runs; reclaim adopts it
  - LocalProvider.reclaim, after the launching CLI died without a handle: "abandoned" -> a launcher
    that starts later finds the claim taken and exits without running anything.
So a launch whose outcome was unknown ends exactly one way, whatever the timing.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

CLAIM_FILE = "launch.claim"


def read_claim(job_dir: Path) -> str | None:
    try:
        return (Path(job_dir) / CLAIM_FILE).read_text().strip()
    except FileNotFoundError:
        return None


def claim_launch(job_dir: Path, owner: str) -> str:
    """Claim `job_dir` for `owner`; returns the owner that holds it (ours, or the one that was first)."""
    job_dir = Path(job_dir)
    tmp = job_dir / f".claim-{uuid.uuid4().hex[:8]}"
    tmp.write_text(owner + "\n")
    try:
        os.link(tmp, job_dir / CLAIM_FILE)
        return owner
    except FileExistsError:
        return read_claim(job_dir) or ""
    finally:
        tmp.unlink(missing_ok=True)
