"""The recovery ledger and goodput of a run: what each resumption cost, from structured facts only.

Inputs are the registry's resumptions (state, ended_at = when the control plane saw it end, exit
reason: a lost job's cause, a failed job's last error line) and the trainer's metrics rows (a step
row: `step`, `time`, `resumption`; the `resumed` event: `checkpoint_batch`), plus each resumption's
last heartbeat (plugins/heartbeat.py). No log text is parsed.

Per resumption:
- ended / why: completed, paused, stopped, lost (why: the provider's cause), failed (why: the job's
  last error line), or None while it runs.
- detect_s (a lost one): from its last sign of life (newest of its last metrics row and its last
  heartbeat; the failure came after it, so this is an upper bound) to the control plane recording it
  lost.
- restart_s (a lost one): from that record to the next resumption's first step (a paused or stopped
  one waits for a person, which is not a recovery time).
- steps_redone / lost_s: steps it trained past the checkpoint the next resumption started from, and
  the time they took, as far as its metrics rows show (a SIGKILL loses the rows of the last second
  before it, the file being flushed once a second: then a lower bound).

Goodput: time on steps that counted (a step interval counts unless a later resumption redid it) ÷
wall time since the first launch (to the run's end, or now while it is active).

A row covers the steps since the row before it in its resumption (log intervals of several batches
are fine); a resumption's first row covers the steps since its start, timed by the row's
`throughput` (batches per second) when it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .models import ACTIVE_STATUSES, RunInfo


@dataclass
class LedgerEntry:
    resumption: int
    cluster: str
    cause: str                      # why it was launched: create | resume | retry | failover
    ended: str | None               # completed | paused | stopped | lost | failed; None while it runs
    why: str | None = None          # lost: the cause; failed: the job's last error line
    steps: tuple[int, int] | None = None    # (first, last) step it trained
    detect_s: float | None = None   # a lost one: last sign of life -> recorded lost
    restart_s: float | None = None  # a lost one: recorded lost -> the next resumption's first step
    steps_redone: int | None = None  # steps past the checkpoint the next one resumed from
    lost_s: float | None = None     # the time those steps took


@dataclass
class Ledger:
    entries: list[LedgerEntry] = field(default_factory=list)
    useful_s: float = 0.0           # time on steps that counted
    wall_s: float | None = None     # first launch -> the run's end (or now)
    goodput: float | None = None    # useful_s / wall_s


def _intervals(rows: list[dict[str, Any]], start: int) -> list[tuple[int, int, float, float]]:
    """(from_step, to_step, seconds, end_time) per step row of one resumption, in step order."""
    out = []
    prev_step, prev_time = start, None
    for row in sorted(rows, key=lambda r: (r["step"], r["time"])):
        step, t = row["step"], row["time"]
        if step <= prev_step:   # an evaluation row repeats its step
            continue
        if prev_time is not None:
            seconds = t - prev_time
        else:
            rate = row.get("throughput")
            seconds = (step - prev_step) / rate if isinstance(rate, (int, float)) and rate > 0 else 0.0
        out.append((prev_step, step, max(seconds, 0.0), t))
        prev_step, prev_time = step, t
    return out


def _step_rows(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    by: dict[int, list[dict[str, Any]]] = {}
    for row in records:
        if "event" in row or not isinstance(row.get("step"), int) or not isinstance(row.get("resumption"), int):
            continue
        if isinstance(row.get("time"), (int, float)) and not isinstance(row["time"], bool):
            by.setdefault(row["resumption"], []).append(row)
    return by


def _resumed_batches(records: list[dict[str, Any]]) -> tuple[dict[int, int], dict[int, int]]:
    """Resumption -> the batch of the checkpoint it resumed from; and -> the resumption that saved it."""
    batch, saver = {}, {}
    for row in records:
        if row.get("event") == "resumed" and isinstance(row.get("resumption"), int) \
                and isinstance(row.get("checkpoint_batch"), int):
            batch[row["resumption"]] = row["checkpoint_batch"]
            if isinstance(row.get("checkpoint_resumption"), int):
                saver[row["resumption"]] = row["checkpoint_resumption"]
    return batch, saver


def ledger(run: RunInfo, records: list[dict[str, Any]], beats: dict[int, float | None],
           now: float) -> Ledger:
    rows, (resumed, saved_by) = _step_rows(records), _resumed_batches(records)
    res = run.resumptions
    out = Ledger()
    for i, r in enumerate(res):
        nxt = res[i + 1] if i + 1 < len(res) else None
        spans = _intervals(rows.get(r.index, []), resumed.get(r.index, 0))
        # the steps of this resumption that counted: up to where the next one picked up
        keep = None if nxt is None else resumed.get(nxt.index, 0 if rows.get(nxt.index) else None)
        ended = None if r.state in ("pending", "running", "stopping") and nxt is None else r.state
        entry = LedgerEntry(r.index, r.cluster, r.cause, ended,
                            r.exit_reason if r.state in ("lost", "failed") else None)
        if spans:
            entry.steps = (spans[0][0] + 1, spans[-1][1])
        if nxt is not None and saved_by.get(nxt.index) == r.index and keep is not None:
            # it saved the checkpoint the next one resumed from, so it got at least that far (a SIGKILL
            # loses the metrics rows of its last second: steps redone are then a lower bound)
            first = entry.steps[0] if entry.steps else resumed.get(r.index, 0) + 1
            entry.steps = (first, max(entry.steps[1] if entry.steps else keep, keep))
        redone = lost = 0.0
        for lo, hi, seconds, _ in spans:
            if keep is None or hi <= keep:
                out.useful_s += seconds
            else:
                part = (hi - max(lo, keep)) / (hi - lo)
                out.useful_s += seconds * (1 - part)
                lost += seconds * part
                redone += hi - max(lo, keep)
        if keep is not None and spans:
            entry.steps_redone, entry.lost_s = int(redone), round(lost, 3)
        if r.state == "lost" and r.ended_at is not None:
            signs = [t for t in ([spans[-1][3]] if spans else []) + [beats.get(r.index)] if t is not None]
            if signs:
                entry.detect_s = round(max(r.ended_at - max(signs), 0.0), 3)
        first_next = min((row["time"] for row in rows.get(nxt.index, [])), default=None) if nxt else None
        if first_next is not None and r.ended_at is not None and r.state == "lost":
            entry.restart_s = round(first_next - r.ended_at, 3)
        out.entries.append(entry)
    starts = [r.started_at for r in res if r.started_at is not None]
    first = min(starts) if starts else run.created_at
    end = now if run.status in ACTIVE_STATUSES or not res or res[-1].ended_at is None else res[-1].ended_at
    out.wall_s = round(max(end - first, 0.0), 3)
    out.useful_s = round(out.useful_s, 3)
    if rows and out.wall_s:  # no timed step rows (a job without metrics): no figure, rather than 0%
        out.goodput = round(min(out.useful_s / out.wall_s, 1.0), 4)
    return out
