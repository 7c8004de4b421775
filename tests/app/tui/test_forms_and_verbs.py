"""Issue 34.5 in the TUI: y/n answer a confirm; Enter submits the forms; after choosing a secret's
kind, typing goes into its first field (masked for a key), never into a visible one; clusters are
added and removed from the Clusters view, and Enter on one shows its detail and the runs on it."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Select
from support.listed_plane import listed_plane, make_run, now

from foundry.app.tui.screens.dialogs import ConfirmDialog

pytestmark = pytest.mark.slow


def test_secret_form_focus_and_enter(tmp_path, tui):
    plane = listed_plane(tmp_path / "home", [], {})

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("4", "a")
            name = await tui.until(pilot, lambda: app.screen.query_one("#secret-name", Input), what="secret form")
            assert name.has_focus
            await pilot.press(*"r2")
            app.screen.query_one("#secret-kind", Select).value = "s3"
            first = await tui.until(pilot, lambda: app.screen.query("#field-access_key_id")
                                    and app.screen.query_one("#field-access_key_id", Input), what="s3 fields")
            await tui.until(pilot, lambda: first.has_focus, what="focus in the first field")
            assert first.password
            await pilot.press(*"AKIATYPEDRIGHTAFTER")      # typed right after choosing the kind
            assert name.value == "r2" and first.value == "AKIATYPEDRIGHTAFTER"
            assert "AKIATYPEDRIGHTAFTER" not in tui.text(app)
            await pilot.press("tab", *"typed-secret-value")
            assert app.screen.query_one("#field-secret_access_key", Input).has_focus
            assert "typed-secret-value" not in tui.text(app)
            await pilot.press("enter")                       # Enter submits
            await tui.until(pilot, lambda: type(app.screen).__name__ == "SecretsScreen", what="saved")
        assert plane.secrets.injection("r2").env["AWS_SECRET_ACCESS_KEY"] == "typed-secret-value"

    tui.run(body())


def test_clusters_add_detail_remove_with_y_and_n(tmp_path, tui):
    t = now()
    runs = [make_run("on-hpc", "running", t - 60, cluster="hpc"), make_run("elsewhere", "paused", t - 600)]
    plane = listed_plane(tmp_path / "home", runs, {})

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("2")
            table = await tui.until(pilot, lambda: app.screen.table.row_count and app.screen.table, what="clusters")
            await pilot.press("a")
            await tui.until(pilot, lambda: app.screen.query("#cluster-name"), what="add form")
            await pilot.press(*"hpc")
            app.screen.query_one("#cluster-provider", Select).value = "local"
            app.screen.query_one("#cluster-options", Input).focus()
            await pilot.press(*"workdir=/nonexistent-workdir", "enter")
            await tui.until(pilot, lambda: "hpc" in table.rows, what="the new cluster")
            assert plane.clusters.config("hpc")["workdir"] == "/nonexistent-workdir"

            table.move_cursor(row=table.get_row_index("hpc"))
            await pilot.press("enter")                        # detail and the runs on it
            runs_table = await tui.until(pilot, lambda: app.screen.query("#cluster-runs") and
                                         app.screen.query_one("#cluster-runs", DataTable).row_count and
                                         app.screen.query_one("#cluster-runs", DataTable), what="cluster detail")
            assert list(runs_table.rows) == ["on-hpc"] and "workdir=/nonexistent-workdir" in tui.text(app)
            await pilot.press("escape")

            await pilot.press("ctrl+d")                       # n keeps it
            await tui.until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
            await pilot.press("n")
            await tui.until(pilot, lambda: not isinstance(app.screen, ConfirmDialog), what="answered n")
            assert "hpc" in plane.clusters.names()
            await pilot.press("ctrl+d")                       # y removes it
            await tui.until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
            await pilot.press("y")
            await tui.until(pilot, lambda: "hpc" not in table.rows, what="removed")
        assert "hpc" not in plane.clusters.names()

    tui.run(body())
