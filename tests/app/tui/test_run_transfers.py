"""The run detail's Resumptions tab shows the bytes each node moved (egress accounting) and the estimated
cost, once a job reported some; with no records nothing is shown (the snapshots stay unchanged)."""

from __future__ import annotations

import asyncio
import json

from textual.widgets import Static


def test_run_detail_shows_transfers_per_node(snapshot_app):
    app = snapshot_app()

    async def go():
        async with app.run_test(size=(140, 40)) as pilot:
            for run in app.plane.list_runs():
                folder = app.plane.paths.run_dir(run.name) / "egress" / "r0"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "nodeA-1.json").write_text(json.dumps({"resumption": 0, "node": "nodeA", "stores": {
                    "s3://bucket": {"data": {"read": 2_500_000, "written": 0},
                                    "checkpoint": {"read": 0, "written": 700_000}}}}))
            for key in ("_", "enter", "right"):
                await pilot.press(key)
                await pilot.pause(0.2)
            widget = app.screen.query_one("#transfers", Static)
            for _ in range(100):
                if widget.display and "nodeA" in _text(widget):
                    break
                await pilot.pause(0.1)
            text = _text(widget)
            assert widget.display and "nodeA" in text and "2.50 MB" in text and "0.70 MB" in text
            assert "estimated transfer cost" in text
            assert "estimated cost $" in text and "#0 compute $" in text, text   # compute + requests per resumption

    asyncio.run(go())


def _text(widget: Static) -> str:
    from rich.console import Console

    console = Console(width=140, record=True)
    console.print(widget.content)
    return console.export_text()
