"""Issue 34.1: the runs table's selection follows the run, not the row, when a new run appears or
the order changes between refreshes; `p`, `r`, `m` are refused with the reason, before any dialog,
for a run whose state makes them meaningless."""

from __future__ import annotations

import pytest
from support.listed_plane import listed_plane, make_run, now

from foundry.app.tui.screens.dialogs import ConfirmDialog


def _notes(app) -> list[str]:
    return [n.message for n in app._notifications]


@pytest.mark.slow
def test_selection_stays_on_the_run_and_actions_respect_its_state(tmp_path, tui):
    t = now()
    runs = [make_run("gpt-small", "running", t - 100), make_run("bert-base", "paused", t - 3600),
            make_run("vit-tiny", "completed", t - 7200)]
    plane = listed_plane(tmp_path / "home", runs, {})

    async def body():
        app = tui.make_app(plane, refresh_interval=0.1)
        async with app.run_test(size=(110, 24)) as pilot:
            table = await tui.until(pilot, lambda: app.screen.table.row_count == 3 and app.screen.table,
                                    what="three runs")
            await pilot.press("j")
            assert table.current_key == "bert-base"

            runs.insert(0, make_run("new-run", "pending", t))  # a new run appears on top
            await tui.until(pilot, lambda: table.row_count == 4, what="the new run's row")
            assert table.current_key == "bert-base" and table.cursor_row == 2

            runs.reverse()  # another order: still the same run
            await tui.until(pilot, lambda: table.coordinate_to_cell_key((0, 0)).row_key.value == "vit-tiny",
                            what="re-sorted rows")
            assert table.current_key == "bert-base"

            # r on the paused run opens the resume form; p on it is refused (nothing to pause)
            await pilot.press("p")
            await tui.until(pilot, lambda: any("bert-base is paused: there is nothing to pause" in m
                                               for m in _notes(app)), what="refusal")
            assert not isinstance(app.screen, ConfirmDialog)

            # the completed run: no pause, no resume, no move; each says why
            await pilot.press("k")
            assert table.current_key == "vit-tiny"
            for key, reason in (("p", "vit-tiny is completed: there is nothing to pause"),
                                ("r", "vit-tiny is completed: there is nothing left to resume"),
                                ("m", "vit-tiny is completed: only running, paused")):
                await pilot.press(key)
                await tui.until(pilot, lambda: any(reason in m for m in _notes(app)), what=reason)
                assert app.screen.query("#runs-table"), f"{key} opened a dialog for a completed run"

            # the running run is offered a pause (with the confirm), not a resume
            await pilot.press("j", "j")
            assert table.current_key == "gpt-small"
            await pilot.press("r")
            await tui.until(pilot, lambda: any("gpt-small is running, not stopped" in m for m in _notes(app)),
                            what="resume refused")
            await pilot.press("p")
            dialog = await tui.until(pilot, lambda: isinstance(app.screen, ConfirmDialog) and app.screen,
                                     what="pause confirm")
            assert "gpt-small" in dialog.message

    tui.run(body())
