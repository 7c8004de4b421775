"""The preemption notice window: the seconds between a stop's SIGTERM and the kill.

The control plane passes it as FOUNDRY_GRACE_S (`grace: 30s` in the run YAML, or the provider's
known window). On a SIGTERM every rank agrees at the next step to stop and publishes a checkpoint
(trainer.py's pause); that is worth something only if it is published before the kill. A user should
learn that it will not be before the first preemption, not after it, so the trainer says so:

- at start, from the time the run's last checkpoint took to publish (`publish_s` of the previous
  resumptions' checkpoint_published records in metrics.jsonl), or, before any, after its first save;
- after a pause, how long the notice took to reach a published checkpoint (`notice_s`).

A save's time runs from the trainer's call (which first waits for a previous upload still in flight,
as a pause would) to its publication, so it is what a notice would cost at that point.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Mapping

log = logging.getLogger("foundry.trainer")


class NoticeWindow:
    def __init__(self, grace_s: float | None):
        self.grace_s = grace_s
        self._started: dict[str, float] = {}
        self._warned = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "NoticeWindow":
        raw = (os.environ if environ is None else environ).get("FOUNDRY_GRACE_S", "").strip()
        try:
            grace = float(raw) if raw else None
        except ValueError:  # set by the control plane; a hand-set bad value must not stop training
            log.warning("FOUNDRY_GRACE_S=%r is not a number of seconds: ignored", raw)
            grace = None
        return cls(grace if grace and grace > 0 else None)

    def saving(self, name: str | None, started: float) -> None:
        if name:
            self._started[name] = started

    def published(self, name: str) -> float | None:
        """Seconds from the save's call to its publication (None for a checkpoint this rank did not time)."""
        started = self._started.pop(name, None)
        return None if started is None else round(time.monotonic() - started, 3)

    def check(self, publish_s: float | None, source: str) -> str | None:
        """The warning (once per process) when a checkpoint taking `publish_s` cannot fit the window."""
        if self.grace_s is None or publish_s is None or publish_s <= self.grace_s or self._warned:
            return None
        self._warned = True
        return (f"foundry: the notice window is {self.grace_s:g}s but {source} took {publish_s:.1f}s to publish: "
                "a preemption will kill this job before its last checkpoint is saved (raise `grace` in the "
                "run YAML, save a smaller state or write to a faster store)")


def last_publish_s(metrics_file: Path | None) -> float | None:
    """The newest `publish_s` among the run's checkpoint_published records (a previous resumption's)."""
    if metrics_file is None or not metrics_file.is_file():
        return None
    last = None
    with open(metrics_file, errors="replace") as fh:
        for line in fh:
            if '"checkpoint_published"' not in line:
                continue
            try:
                row = json.loads(line)
            except ValueError:  # a line still being written
                continue
            if isinstance(row, dict) and isinstance(row.get("publish_s"), (int, float)):
                last = float(row["publish_s"])
    return last
