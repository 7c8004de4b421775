"""Issue 34.4: progress that tells the truth. The ETA comes from the steps the metrics rows' times
show (not one batch's throughput, which leaves out data loading and checkpoints), never past a
time budget; a run its time budget ended says so instead of `264/2000`, in the runs list, the run
header and `foundry describe run`."""

from __future__ import annotations

import json

import pytest
from support.listed_plane import listed_plane, make_run, now


def _metrics(t: float) -> dict:
    return {
        # 1900 of 2000 steps at 2 steps/s by the clock; one batch alone took 2 ms ("500 ba/s")
        "near": [{"step": s, "loss": 2.0, "throughput": 500.0, "time": t - (1900 - s) / 2.0, "resumption": 0}
                 for s in range(10, 1901, 10)],
        # a 2-minute budget started 30 s ago: 90 s left, although 2000 steps would take much longer
        "budgeted": [{"event": "time_budget", "step": 0, "seconds": 120.0, "time": t - 30, "resumption": 0}]
                    + [{"step": s, "loss": 3.0, "throughput": 300.0, "time": t - 30 + s / 2.0, "resumption": 0}
                       for s in range(10, 61, 10)],
        # ended by its budget at 264 of 2000
        "ended": [{"event": "time_budget", "step": 0, "seconds": 120.0, "time": t - 7190, "resumption": 0}]
                 + [{"step": s, "loss": 2.9, "throughput": 300.0, "time": t - 7190 + s * 120 / 264, "resumption": 0}
                    for s in range(10, 265, 10)] + [{"step": 264, "loss": 2.9, "time": t - 7070, "resumption": 0}]
                 + [{"event": "stopped", "reason": "time_budget", "step": 264, "time": t - 7070, "resumption": 0}],
    }


@pytest.mark.slow
def test_eta_and_time_budget_in_the_tui(tmp_path, tui):
    t = now()
    runs = [make_run("near", "running", t - 1000), make_run("budgeted", "running", t - 30),
            make_run("ended", "completed", t - 7200)]
    plane = listed_plane(tmp_path / "home", runs, _metrics(t))

    async def body():
        app = tui.make_app(plane, refresh_interval=0.2)
        async with app.run_test(size=(120, 24)) as pilot:
            table = await tui.until(pilot, lambda: app.screen.table.row_count == 3 and app.screen.table, what="runs")
            assert tui.cell(table, "near", "eta") == "50s"              # 100 steps at 2 steps/s, not "0s"
            assert tui.cell(table, "budgeted", "eta").startswith("1m")  # the budget's 90 s, not 16 min
            assert tui.cell(table, "ended", "step") == "264 (time budget)"
            assert tui.cell(table, "ended", "eta") == "-"

            await pilot.press("j", "j", "enter")
            summary = await tui.until(pilot, lambda: app.screen.query("#run-summary") and
                                      "time budget" in str(app.screen.query_one("#run-summary").render())
                                      and str(app.screen.query_one("#run-summary").render()), what="run header")
            assert "step 264 of 2000, stopped at its 2m00s time budget" in summary

    tui.run(body())


@pytest.mark.slow
def test_describe_run_says_it_stopped_at_its_time_budget(cli, cp, tmp_path):
    import sys

    spec = tmp_path / "run.yaml"
    spec.write_text(f"name: ended\ncommand: [{sys.executable}, -c, pass]\nparameters: {{max_duration: 2000ba}}\n")
    assert cli("run", "-f", str(spec), "--follow")[0] == 0
    rows = _metrics(now())["ended"]
    (cp.paths.run_dir("ended") / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = cli("describe", "run", "ended")
    assert code == 0, err
    assert "progress: step 264, stopped at its time budget (2 min) before the schedule's 2000, loss 2.9" in out
