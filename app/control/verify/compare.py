"""Compare a stopped-and-resumed run with the straight one: pure, over the rows both wrote.

Losses come from metrics.jsonl (the trainer's own rows: {"step", "loss" or "eval/loss",
"resumption"}); state digests, stops and final parameters from the probe's rows (trainer/resume_probe.py),
one file per rank. Every row of every resumption is compared with the straight run's row of the same
step, so a killed process's steps count too. The first difference in execution order (resumption,
then step) is where the checkpoint failed; the state parts whose digests differ right before that step
are what it did not carry back.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

HINTS = {
    "model": "the model's parameters were not restored as saved: does the script build the model the same way "
             "each time and pass that model to Trainer(model=...)?",
    "optimizer": "the optimizer's state (moments, step counts) was not carried back: pass the optimizer to "
                 "Trainer(optimizers=...); one the trainer does not know is not in the checkpoint",
    "optimizer:hyperparameters": "the optimizer's learning rate (or another hyperparameter) differs: something "
                                 "outside the checkpoint sets it (a callback or loop with a counter of its own): "
                                 "use a scheduler passed to Trainer(schedulers=...), whose state the checkpoint holds",
    "schedulers": "a scheduler's state was not carried back: pass it to Trainer(schedulers=...), and give the "
                  "resumed run the same max_duration",
    "scaler": "the grad scaler's state was not carried back: let the trainer make it (precision='fp16')",
    "data": "the batch differs: the data position was not carried back. Use StreamingDataLoader, a loader with "
            "state_dict()/load_state_dict(), or a sampler whose set_epoch the trainer drives; random augmentation "
            "in DataLoader workers is not replayed (docs/resume.md)",
    "rng": "a global random stream differs before the step: something draws random numbers outside the training "
           "step (between steps, in a callback, in a background thread) or reseeds the global RNG",
    "generator": "this random generator is not one the checkpoint holds: draw from the global RNG "
                 "(torch.randn(..., generator=None), random.random()) or save and restore its state yourself",
    "unseen": "every part of the state the checkpoint holds was identical before this step, yet the loss differs: "
              "the step draws from randomness the probe cannot see (a generator created inside forward, "
              "os.urandom, time) or runs nondeterministic kernels (try deterministic_mode=True)",
    "final": "the final parameters differ although every logged loss matched: a step after the last logged "
             "one, or state the loss does not show, differs",
    "missing": "the stopped run did not log every step the straight run did: see its log",
    # resumption 0 of the stopped run is a fresh process, like the straight run, until its first stop
    "fresh": "the two runs differ before any stop: nothing was restored yet, so this is not the resume; "
             "two fresh runs of the same command do not compute the same (nondeterministic kernels: try "
             "deterministic_mode=True; a thread count or math library code path that differs between "
             "processes, e.g. MKL on CPU, whose sqrt AdamW's update uses; randomness drawn outside the "
             "global RNG)",
}


@dataclass
class RunRecord:
    metrics: list[dict[str, Any]]
    probe: dict[int, list[dict[str, Any]]]  # rank -> rows


@dataclass
class Difference:
    step: int
    resumption: int
    resumed_from: str | None
    parts: list[str]  # the state parts whose digests differ right before `step` ("unseen": none)
    loss: float | None = None
    straight_loss: float | None = None
    first_loss_step: int | None = None
    hint: str = ""


@dataclass
class Comparison:
    world_size: int
    ok: bool
    losses_compared: int
    states_compared: int
    final_equal: bool | None
    final_differing: list[str] = field(default_factory=list)
    first: Difference | None = None
    missing_steps: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _loss_rows(metrics: list[dict[str, Any]]):
    for row in metrics:
        if "event" in row or "step" not in row:
            continue
        for series in ("loss", "eval/loss"):
            if isinstance(row.get(series), (int, float)):
                yield (series, int(row["step"])), float(row[series]), int(row.get("resumption", 0))


def same_float(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def part_family(name: str) -> str:
    return name.split(":", 1)[0]


ORDER = ("model", "optimizer", "schedulers", "scaler", "data", "rng", "generator", "unseen", "final")


def ordered(parts) -> list[str]:
    """The most telling first: a wrong model or optimizer makes every later part differ too."""
    return sorted(parts, key=lambda name: (ORDER.index(part_family(name)), name))


def compare(world_size: int, straight: RunRecord, stopped: RunRecord) -> Comparison:
    want = {key: value for key, value, _ in _loss_rows(straight.metrics)}
    seen: set[tuple[str, int]] = set()
    diffs: list[tuple[tuple[int, int], Difference]] = []
    losses_compared = 0
    first_loss: dict[int, tuple[int, float, float]] = {}  # resumption -> (step, loss, straight loss)
    for key, value, resumption in _loss_rows(stopped.metrics):
        if key not in want:
            continue
        seen.add(key)
        losses_compared += 1
        if key[0] == "loss" and not same_float(value, want[key]):
            if resumption not in first_loss or key[1] < first_loss[resumption][0]:
                first_loss[resumption] = (key[1], value, want[key])

    resumed_from = {row.get("resumption", 0): row.get("resumed_from")
                    for rows in stopped.probe.values() for row in rows if row.get("kind") == "start"}
    states_compared = 0
    state_diffs: dict[tuple[int, int], set[str]] = {}  # (resumption, step) -> differing parts
    for rank, rows in stopped.probe.items():
        ref = {row["step"]: row["parts"] for row in straight.probe.get(rank, []) if row.get("kind") == "state"}
        for row in rows:
            if row.get("kind") != "state" or row["step"] not in ref:
                continue
            states_compared += 1
            theirs = ref[row["step"]]
            differ = {name for name, value in row["parts"].items() if name in theirs and theirs[name] != value}
            if differ:
                state_diffs.setdefault((row.get("resumption", 0), row["step"]), set()).update(differ)

    for resumption, (step, loss, ref_loss) in first_loss.items():
        parts = ordered(state_diffs.get((resumption, step), ())) or ["unseen"]
        diffs.append(((resumption, step), Difference(step, resumption, resumed_from.get(resumption), parts,
                                                     loss, ref_loss, step)))
    for (resumption, step), parts in state_diffs.items():
        fl = first_loss.get(resumption)
        diffs.append(((resumption, step), Difference(step, resumption, resumed_from.get(resumption), ordered(parts),
                                                     first_loss_step=fl[0] if fl else None,
                                                     loss=fl[1] if fl else None, straight_loss=fl[2] if fl else None)))
    first = min(diffs, key=lambda d: d[0])[1] if diffs else None
    if first is not None and first.resumption == 0 and first.resumed_from is None:
        first.hint = HINTS["fresh"]
    elif first is not None:
        first.hint = HINTS.get(first.parts[0]) or HINTS[part_family(first.parts[0])]

    final_equal, final_differing = _final(straight, stopped)
    missing = sorted({step for series, step in want if series == "loss"} - {step for series, step in seen if series == "loss"})
    ok = first is None and final_equal is True and not missing
    comparison = Comparison(world_size, ok, losses_compared, states_compared, final_equal, final_differing, first, missing)
    if first is None and final_equal is False:
        comparison.first = Difference(step=-1, resumption=-1, resumed_from=None, parts=["final"], hint=HINTS["final"])
    return comparison


def _final(straight: RunRecord, stopped: RunRecord) -> tuple[bool | None, list[str]]:
    """Whether each rank's final parameters are bit for bit the straight run's; the names that differ."""
    differing: set[str] = set()
    for rank, rows in straight.probe.items():
        ref = next((r["parameters"] for r in reversed(rows) if r.get("kind") == "final"), None)
        got = next((r["parameters"] for r in reversed(stopped.probe.get(rank, [])) if r.get("kind") == "final"), None)
        if ref is None or got is None:
            return None, []
        differing |= {name for name in ref if got.get(name) != ref[name]}
    return not differing, sorted(differing)
