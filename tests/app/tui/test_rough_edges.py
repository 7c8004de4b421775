"""Small things a newcomer trips over: the resume form's cluster list has no blank "(loading
clusters)" choice once loaded; the help screen lists the navigation keys (↑/↓ j/k, ←/→ on tabs)."""

from __future__ import annotations

import pytest
from textual.widgets import Select


def test_resume_form_cluster_choice_has_no_blank_placeholder(snapshot_app, tui):
    async def body():
        app = snapshot_app()
        async with app.run_test() as pilot:
            await tui.until(pilot, lambda: app.screen.query("LiveTable") and app.screen.query_one("LiveTable").row_count,
                            what="runs")
            await pilot.press("down", "r")  # bert-base (paused): resume
            select = await tui.until(pilot, lambda: (s := app.screen.query_one("#cluster", Select)) and not s.disabled and s,
                                     what="clusters loaded")
            assert select.value == "local"
            with pytest.raises(Exception):
                select.clear()  # no blank state to fall back to
            assert "(loading clusters)" not in [str(prompt) for prompt, _ in select._options]

    tui.run(body())


def test_help_lists_navigation_keys(snapshot_app, tui):
    async def body():
        app = snapshot_app()
        async with app.run_test() as pilot:
            await pilot.press("question_mark")
            keys = await tui.until(pilot, lambda: app.screen.query("#help-table") and
                                   [key for key, _ in app.screen.rows], what="help")
            assert "↑/↓ j/k" in keys and "←/→" not in keys  # the runs screen has no tabs
            await pilot.press("escape", "enter")  # run details (tabs)
            await tui.until(pilot, lambda: app.screen.query("TabbedContent"), what="run details")
            await pilot.press("question_mark")
            keys = await tui.until(pilot, lambda: app.screen.query("#help-table") and
                                   [key for key, _ in app.screen.rows], what="help")
            assert "←/→" in keys

    tui.run(body())

