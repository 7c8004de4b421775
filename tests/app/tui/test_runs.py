"""Runs against the real control plane and the local provider: a new run from YAML (dry-run preview,
launch), its step advancing live, pause, resume, move to another cluster, details (plots, timeline,
config), logs per rank / resumption, delete with Cancel as the default."""

from __future__ import annotations

from textual.widgets import Button, Input, Log, Select, Static



def test_run_lifecycle(plane, run_yaml, tui):
    tui.run(_lifecycle(plane, run_yaml, tui))


async def _lifecycle(plane, run_yaml, tui):
    make_app, until, cell = tui.make_app, tui.until, tui.cell
    plane.create_cluster("other", "local")
    app = make_app(plane)
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.screen.table
        # n: new run from YAML, preview first (nothing launched), then launch
        await pilot.press("n")
        await until(pilot, lambda: app.screen.query_one("#spec-path", Input), what="new-run form")
        app.screen.query_one("#spec-path", Input).value = str(run_yaml)
        await tui.press(pilot, "preview-button")
        preview = app.screen.query_one("#preview", Static)
        await until(pilot, lambda: "# plan (local on cluster local)" in str(preview.render()), what="dry run")
        assert plane.list_runs(reconcile=False) == []
        await tui.press(pilot, "launch")
        await until(pilot, lambda: "tiny" in table.rows, what="run row")

        # the step advances live without losing the cursor
        first = await until(pilot, lambda: int(cell(table, "tiny", "step").split("/")[0] or 0) > 0
                            and int(cell(table, "tiny", "step").split("/")[0]), what="first step")
        await until(pilot, lambda: int(cell(table, "tiny", "step").split("/")[0]) > first, what="step advance")
        assert table.current_key == "tiny"
        assert cell(table, "tiny", "status") == "running"

        # p: pause (confirm), the job checkpoints and exits as paused
        await pilot.press("p")
        await until(pilot, lambda: app.screen.query_one("#confirm", Button), what="confirm dialog")
        await tui.press(pilot, "confirm")
        await until(pilot, lambda: cell(table, "tiny", "status") == "paused", what="paused")
        paused_at = int(cell(table, "tiny", "step").split("/")[0])

        # r: resume on the same cluster with the form's defaults
        await pilot.press("r")
        await until(pilot, lambda: app.screen.query_one("#cluster", Select).value == "local", what="resume form")
        await tui.press(pilot, "ok")
        await until(pilot, lambda: cell(table, "tiny", "resumptions") == "2", what="second resumption")
        await until(pilot, lambda: cell(table, "tiny", "status") == "running", what="running again")
        await until(pilot, lambda: int(cell(table, "tiny", "step").split("/")[0]) > paused_at, what="continues")

        # m: move to another cluster; an invalid placement is refused in the form first
        await pilot.press("m")
        await until(pilot, lambda: app.screen.query_one("#cluster", Select).value == "local", what="move form")
        app.screen.query_one("#cluster", Select).value = "other"
        app.screen.query_one("#gpus", Input).value = "2"
        app.screen.query_one("#nodes", Input).value = "2"
        await tui.press(pilot, "ok")
        error = app.screen.query_one("#form-error")
        await until(pilot, lambda: "one node" in str(error.render()), what="placement error")
        app.screen.query_one("#nodes", Input).value = "1"
        await tui.press(pilot, "ok")
        await until(pilot, lambda: cell(table, "tiny", "resumptions") == "3", what="moved")
        await until(pilot, lambda: cell(table, "tiny", "cluster") == "other", what="on the other cluster")
        run = plane.get_run("tiny")
        assert [r.cluster for r in run.resumptions] == ["local", "local", "other"]
        assert [r.state for r in run.resumptions[:2]] == ["paused", "paused"]

        # details: metrics plotted, the resumptions timeline, the config
        await pilot.press("d")
        await until(pilot, lambda: app.screen.query_one("#timeline"), what="details")
        timeline = app.screen.query_one("#timeline", Static)
        await until(pilot, lambda: app.screen.query_one("#plot-loss")._count > 0, what="loss plotted")
        await pilot.press("right")  # the Resumptions tab: one row per resumption, with its steps
        await until(pilot, lambda: list(timeline.content.columns[1].cells) == ["local", "local", "other"],
                    what="timeline rows")
        steps = list(timeline.content.columns[4].cells)
        assert all(s != "-" for s in steps[:2]), steps
        await until(pilot, lambda: "name: tiny" in str(app.screen.query_one("#config", Static).render()),
                    what="config")
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ == "RunsScreen", what="back to runs")

        # l: logs of the latest resumption, then of resumption 0 only
        await pilot.press("l")
        log = await until(pilot, lambda: app.screen.query_one("#log", Log), what="logs screen")
        await until(pilot, lambda: any("resumption 2" in line for line in log.lines), what="latest log")
        app.screen.query_one("#log-resumption", Select).value = 0
        await until(pilot, lambda: any("paused at step" in line for line in log.lines)
                    and not any("resumption 2" in line for line in log.lines), what="resumption 0 log")
        app.screen.query_one("#log-rank", Select).value = 0
        await tui.until(pilot, lambda: any("starting at step 0" in line for line in log.lines)
                        and not any(line.startswith("[rank") for line in log.lines), what="rank 0 log")
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ == "RunsScreen", what="back to runs")

        # ctrl+d: Cancel is the default (enter keeps the run); then confirm deletes it
        await pilot.press("ctrl+d")
        await until(pilot, lambda: app.screen.query_one("#cancel", Button).has_focus, what="cancel focused")
        await pilot.press("enter")
        await pilot.pause(0.5)
        assert "tiny" in table.rows
        await pilot.press("ctrl+d")
        await until(pilot, lambda: app.screen.query_one("#confirm", Button), what="delete dialog")
        await tui.press(pilot, "confirm")
        await until(pilot, lambda: "tiny" not in table.rows, what="deleted")
        assert plane.list_runs(reconcile=False) == []
