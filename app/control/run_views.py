"""What the dashboards show about a run beyond the registry: progress from metrics.jsonl (step / max,
loss, throughput, ETA), the resolved config, and the checkpoints in its save folder.

The ETA comes from the steps the rows' `time` stamps show per second (the last minute of the
latest resumption), not from one batch's `throughput`, which leaves out data loading, evaluation
and checkpoints. A job bounded by wall-clock time says so with two records, which any callback can
write to metrics.jsonl (examples/gpt/job.py's TimeBudget does): `{"event": "time_budget",
"seconds": S}` when it starts (the ETA is then never past the budget) and `{"event": "stopped",
"reason": "time_budget"}` when the budget ends it (shown as such, not as "264/2000").

Pure summarising (`summarize`, `steps_by_resumption`) is apart from the readers of a run folder
(`run_progress`, `save_url`, `list_checkpoints`); the CLI and the TUI reach them through
`ControlPlane.runs`, so both print the same numbers.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .models import RunInfo


@dataclass
class RunProgress:
    step: int | None = None
    max_steps: int | None = None
    loss: float | None = None
    throughput: float | None = None     # batches per second
    eta_s: float | None = None
    tokens_per_sec: float | None = None  # tokens the model consumed, all ranks
    mfu: float | None = None            # model FLOPs utilisation (0..1), when the device's peak is known
    deadline: float | None = None       # when the latest resumption's time budget ends (UNIX time)
    budget_s: float | None = None       # that budget, seconds
    stop_reason: str | None = None      # why training ended before max_steps ("time_budget"), if it said


RATE_WINDOW_S = 60.0   # the ETA's rate: steps per second over the newest rows within this window


@dataclass
class CheckpointRow:
    name: str
    epoch: int
    batch: int
    complete: bool
    latest: bool
    size: int
    url: str


def max_steps_of(spec: dict[str, Any], config: dict[str, Any] | None = None) -> int | None:
    """The run's length in batches when it is given in batches (`max_duration: 100ba`; a bare int
    counts epochs, as in Composer)."""
    trainer = (config or {}).get("trainer") or {}
    duration = trainer.get("max_duration") or (spec.get("parameters") or {}).get("max_duration")
    if duration is None:
        return None
    text = str(duration).strip().lower()
    if not text.endswith("ba"):
        return None
    text = text[:-2]
    try:
        return int(text)
    except ValueError:
        return None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if isinstance(value, float) and math.isnan(value) else float(value)


def summarize(records: list[dict[str, Any]], max_steps: int | None = None) -> RunProgress:
    """Progress from metrics rows (oldest first); a row may carry `max_steps` itself."""
    out = RunProgress(max_steps=max_steps)
    found_max = False
    # The newest value of each field wins: walk back from the end and stop once all are known.
    for row in reversed(records):
        if out.step is None and isinstance(row.get("step"), int):
            out.step = row["step"]
        if not found_max and isinstance(row.get("max_steps"), int):
            out.max_steps, found_max = row["max_steps"], True
        if out.loss is None:
            out.loss = _num(row.get("loss"))
        if out.throughput is None:
            out.throughput = _num(row.get("throughput"))
        if out.tokens_per_sec is None:
            out.tokens_per_sec = _num(row.get("tokens_per_sec"))
        if out.mfu is None:
            out.mfu = _num(row.get("mfu"))
        if found_max and None not in (out.step, out.loss, out.throughput):
            break
    _budget(records, out)
    rate = step_rate(records) or out.throughput
    if out.step is not None and out.max_steps and rate:
        out.eta_s = max(out.max_steps - out.step, 0) / rate
    return out


def _budget(records: list[dict[str, Any]], out: RunProgress) -> None:
    """The latest resumption's time budget and whether it ended training (records in order)."""
    for row in records:
        if row.get("event") == "time_budget" and _num(row.get("seconds")) and _num(row.get("time")):
            out.budget_s = float(row["seconds"])
            out.deadline = float(row["time"]) + out.budget_s
            out.stop_reason = None   # a new resumption, a new budget
        elif row.get("event") == "stopped" and isinstance(row.get("reason"), str):
            out.stop_reason = row["reason"]


def step_rate(records: list[dict[str, Any]]) -> float | None:
    """Steps per second the newest rows show over their `time` stamps (the last RATE_WINDOW_S of
    one resumption: a step count that goes back, or a gap, is where an earlier one ended)."""
    newest = oldest = None
    resumption = None
    for row in reversed(records):
        step, t = row.get("step"), _num(row.get("time"))
        if "event" in row or not isinstance(step, int) or t is None:
            continue
        if newest is None:
            newest = oldest = (step, t)
            resumption = row.get("resumption")
            continue
        if step > oldest[0] or newest[1] - t > RATE_WINDOW_S or row.get("resumption") != resumption:
            break
        if step < oldest[0]:   # an evaluation row repeats its step: keep the step's newest time
            oldest = (step, t)
    if newest is None or oldest is None or newest[1] <= oldest[1] or newest[0] <= oldest[0]:
        return None
    return (newest[0] - oldest[0]) / (newest[1] - oldest[1])


def _config_json(run_dir: Path) -> Any:
    """The trainer's resolved config (run_dir/config.json) when it wrote a readable one, else None."""
    path = run_dir / "config.json"
    if path.exists():
        try:
            return json.loads(path.read_text())
        except ValueError:
            pass
    return None


def resolved_config(run_dir: Path, run: RunInfo) -> dict[str, Any]:
    """The trainer's resolved config when it wrote one, else the run spec."""
    config = _config_json(run_dir)
    return run.spec if config is None else config


def run_progress(run_dir: Path, run: RunInfo, records: list[dict[str, Any]],
                 now: float | None = None) -> RunProgress:
    """Progress from the run's metrics `records`; no ETA once the run is not active, and never
    one past the time budget."""
    progress = summarize(records, max_steps_of(run.spec, _config_json(run_dir)))
    if run.status not in ("pending", "running", "stopping"):
        progress.eta_s = None
    elif progress.deadline is not None:
        left = max(progress.deadline - (time.time() if now is None else now), 0.0)
        progress.eta_s = left if progress.eta_s is None else min(progress.eta_s, left)
    return progress


def save_url(run_dir: Path, run: RunInfo) -> str | None:
    """Where the run's trainer saves checkpoints: the resolved folder, else the spec's template."""
    config = resolved_config(run_dir, run)
    trainer = config.get("trainer") if isinstance(config, dict) else None
    if isinstance(trainer, dict) and trainer.get("save_folder_resolved"):
        return trainer["save_folder_resolved"]
    folder = (run.spec.get("parameters") or {}).get("save_folder")
    return folder.format(run_name=run.name) if isinstance(folder, str) else None


def list_checkpoints(url: str) -> list[CheckpointRow]:
    """Every checkpoint in the save folder at `url` (oldest first), with its storage URL."""
    from foundry.plugins.manager import open_store
    from foundry.trainer.checkpoint.store_ops import list_checkpoints as _list

    store = open_store(url)
    return [CheckpointRow(e.name, e.epoch, e.batch, e.complete, e.latest, e.size, store.child_url(e.name))
            for e in _list(store)]


def resumed_from(records: list[dict[str, Any]]) -> dict[int, str]:
    """Resumption index -> the checkpoint (URL) it resumed from, from the trainer's `resumed` records."""
    out: dict[int, str] = {}
    for row in records:
        if row.get("event") == "resumed" and isinstance(row.get("resumption"), int):
            checkpoint = row.get("checkpoint_url") or row.get("checkpoint")
            if isinstance(checkpoint, str):
                out[row["resumption"]] = checkpoint
    return out


def steps_by_resumption(run: RunInfo, records: list[dict[str, Any]]) -> dict[int, tuple[int, int]]:
    """Which steps each resumption covered: (first, last) step logged while it ran.

    A row's resumption is its `resumption` field when present, else the latest resumption that had
    started by the row's `time`."""
    spans: dict[int, tuple[int, int]] = {}
    starts = [(r.started_at, r.index) for r in run.resumptions if r.started_at is not None]
    for row in records:
        step = row.get("step")
        if not isinstance(step, int) or "event" in row:  # a fact (resumed at ...), not a trained step
            continue
        idx = row.get("resumption")
        if not isinstance(idx, int):
            t = row.get("time")
            idx = None
            for started, index in starts:
                if isinstance(t, (int, float)) and t >= started - 1.0:
                    idx = index
            if idx is None:
                idx = starts[0][1] if starts else 0
        lo, hi = spans.get(idx, (step, step))
        spans[idx] = (min(lo, step), max(hi, step))
    return spans
