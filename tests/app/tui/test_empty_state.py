"""An empty view says what to do next, and the hint goes away once the table has rows."""

from __future__ import annotations

import asyncio

from foundry.app.tui.widgets.tables import EmptyHint


def test_empty_views_say_what_to_do_next(plane, tui):
    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(80, 24)) as pilot:
            hint = await tui.until(pilot, lambda: next((h for h in app.screen.query(EmptyHint) if h.display), None),
                                   what="runs hint")
            assert "Press n" in str(hint.render())
            await pilot.press("colon", *"secrets", "enter")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "SecretsScreen", what="secrets view")
            await tui.until(pilot, lambda: any(h.display for h in app.screen.query(EmptyHint)), what="secrets hint")
            plane.create_secret("token", "env", {"key": "TOKEN", "value": "x" * 12})
            await pilot.press("ctrl+r")
            await tui.until(pilot, lambda: not any(h.display for h in app.screen.query(EmptyHint)), what="hint hidden")
            assert "x" * 12 not in tui.text(app)

    asyncio.run(body())
