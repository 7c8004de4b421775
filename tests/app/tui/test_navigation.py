"""Help (`?` lists the current screen's bindings), `:` jumps to a view by name, `/` filters the
table, the command palette offers the screen's actions, the clusters view, and failures from a
worker become one notification with the FoundryError's message and hint."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from foundry.plugins.errors import ProviderError


@pytest.mark.slow
def test_help_jump_filter_palette(plane, tui):
    plane.create_cluster("gpu-box", "local", {"gpus": True})
    for name in ("alpha", "beta"):
        plane.create_secret(name, "env", {"key": "K", "value": "v" * 8})

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("question_mark")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "HelpDialog", what="help")
            shown = tui.text(app)
            for words in ("Pause", "Resume", "Move", "Logs", "Filter", "Delete", "New"):
                assert words in shown, words
            await pilot.press("escape")

            await pilot.press("colon")
            await tui.until(pilot, lambda: app.screen.query_one("#jump-input", Input), what="jump")
            await pilot.press(*"clus", "enter")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "ClustersScreen", what="clusters")
            table = app.screen.table
            await tui.until(pilot, lambda: {"local", "gpu-box"} <= set(k.value for k in table.rows), what="rows")
            assert tui.cell(table, "local", "provider") == "local"
            assert tui.cell(table, "gpu-box", "state") == "ready"

            await pilot.press("colon", *"credentials", "enter")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "SecretsScreen", what="secrets")
            table = app.screen.table
            await tui.until(pilot, lambda: table.row_count == 2, what="two secrets")
            table.move_cursor(row=1)
            await pilot.press("slash", *"alp")
            await tui.until(pilot, lambda: table.row_count == 1 and "alpha" in table.rows, what="filtered")
            await pilot.press("escape")
            await tui.until(pilot, lambda: table.row_count == 2, what="unfiltered")

            from foundry.app.tui.commands import FoundryCommands

            titles = [t for t, _, _ in FoundryCommands(app.screen)._commands()]
            assert any(t.startswith("Add") for t in titles) and any(t.startswith("Delete") for t in titles)
            system = [c.title for c in app.get_system_commands(app.screen)]
            assert "Go to Datasets" in system

            # the palette runs a screen action and a view jump
            await pilot.press("ctrl+p")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "CommandPalette", what="palette")
            await pilot.press(*"Add (a)")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "SecretForm", what="add form from palette")
            await pilot.press("escape")
            await pilot.press("ctrl+p")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "CommandPalette", what="palette")
            await pilot.press(*"Go to Clusters")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "ClustersScreen", what="jump from palette")

    tui.run(body())


def test_worker_failure_is_one_notification(plane, tui, monkeypatch):
    def broken(*args, **kwargs):
        raise ProviderError("cluster 'hpc' is unreachable", hint="check `foundry get clusters`")

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(80, 24)) as pilot:
            monkeypatch.setattr(plane, "list_runs", broken)
            app.screen.refresh_runs()
            await tui.until(pilot, lambda: app._notifications, what="notification")
            idle = lambda: not app.screen.busy("refresh runs")  # noqa: E731
            await tui.until(pilot, idle, what="refresh done")
            app.screen.refresh_runs()  # the same failure again (a periodic refresh): not repeated
            await pilot.pause(0.1)
            await tui.until(pilot, idle, what="second refresh done")
            await pilot.pause(0.2)
            assert len(app._notifications) == 1
            note = list(app._notifications)[-1]
            assert note.severity == "error"
            assert note.message == "cluster 'hpc' is unreachable\nhint: check `foundry get clusters`"
            await pilot.press("2")  # the UI keeps working
            await tui.until(pilot, lambda: type(app.screen).__name__ == "ClustersScreen", what="still alive")

    tui.run(body())
