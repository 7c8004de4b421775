"""Training progress when stderr is not a terminal: lines by time (never long silences, never a line
per step), with step/total, the metrics and the ETA."""

from __future__ import annotations

import io

from foundry.trainer.loggers import ConsoleLogger, _format
from foundry.trainer.progress_lines import TimedProgressLines


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_by_time_with_eta_and_at_evals_and_the_end():
    out, clock = io.StringIO(), Clock()
    lines = TimedProgressLines(out, 100, _format, seconds=10.0, clock=clock)
    for step in range(1, 101):  # 1.5 s per step: a line about every 7 steps, not every step
        lines.log({"loss": 1.0, "samples_per_sec": 8.0} | ({"eval/loss": 0.5} if step == 50 else {}), step)
        clock.now += 1.5
    text = out.getvalue().splitlines()
    assert text[0] == "step 1/100: loss=1 samples_per_sec=8"  # at once, no rate yet
    assert text[1].startswith("step 8/100: ") and text[1].endswith("eta 2m18s")  # 92 steps x 1.5 s
    assert any(line.startswith("step 50/100: loss=1 eval/loss=0.5") for line in text)
    assert text[-1] == "step 100/100: loss=1 samples_per_sec=8"
    assert 14 <= len(text) <= 17  # 150 s of training: one line per 10 s (+ first, eval, last)


def test_console_logger_is_plain_lines_off_a_terminal():
    out, clock = io.StringIO(), Clock()
    console = ConsoleLogger(total_batches=None, stream=out)
    console._lines.clock = clock
    for step in (1, 2, 3):
        console.log_metrics({"loss": 2.0}, step)
        clock.now += 11.0
    assert out.getvalue().splitlines() == ["step 1: loss=2", "step 2: loss=2", "step 3: loss=2"]


def test_eta_never_exceeds_the_time_budget():
    """The main job: a 2000-batch schedule, a 2-minute budget, ~0.17 s a step. The step rate alone
    says 5m23s; training stops at the budget, so the ETA says what the budget has left."""
    out, clock = io.StringIO(), Clock()
    lines = TimedProgressLines(out, 2000, _format, seconds=10.0, clock=clock)
    lines.set_time_budget(120.0)
    for step in range(1, 101):
        clock.now = 100.0 + (step - 1) * 0.1665
        lines.log({"loss": 1.0}, step)
    text = out.getvalue().splitlines()
    assert text[0] == "step 1/2000: loss=1 eta 2m00s"  # no rate yet: the budget is all we know
    assert text[1] == "step 62/2000: loss=1 eta 1m50s"  # 120 s less the 10.2 s spent, not 5m23s
    no_budget = io.StringIO()
    plain = TimedProgressLines(no_budget, 2000, _format, seconds=10.0, clock=clock)
    for step in range(1, 63):
        clock.now = 100.0 + (step - 1) * 0.1665
        plain.log({"loss": 1.0}, step)
    assert no_budget.getvalue().splitlines()[1] == "step 62/2000: loss=1 eta 5m23s"  # step-based, as before


def test_eta_is_step_based_when_the_steps_run_out_first():
    out, clock = io.StringIO(), Clock()
    lines = TimedProgressLines(out, 100, _format, seconds=10.0, clock=clock)
    lines.set_time_budget(3600.0)
    for step in range(1, 9):
        lines.log({"loss": 1.0}, step)
        clock.now += 1.5
    assert out.getvalue().splitlines()[1] == "step 8/100: loss=1 eta 2m18s"


def test_the_main_jobs_time_budget_reaches_the_console_lines(monkeypatch):
    """examples/gpt/job.py's TimeBudget (what stops the main job) hands its budget to the console."""
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.syspath_prepend(root)
    monkeypatch.delitem(sys.modules, "examples", raising=False)
    from examples.gpt.job import TimeBudget

    out, clock = io.StringIO(), Clock()
    console = ConsoleLogger(total_batches=2000, stream=out, rich=False)
    console._lines.clock = clock

    class FakeTrainer:
        loggers = [console, object()]  # a logger without an ETA is left alone

    TimeBudget(120.0).fit_start(FakeTrainer())
    clock.now += 30.0
    console.log_metrics({"loss": 2.0}, 1)
    assert out.getvalue() == "step 1/2000: loss=2 eta 1m30s\n"
