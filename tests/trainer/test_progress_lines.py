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
