"""Datasets: convert JSONL and an image folder into MDS from the TUI (progress bar), see them
registered with shards/samples/size, open one (summary, columns, decoded samples, an image preview),
verify hashes, register a URL, remove one (Cancel default)."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Button, DataTable, Input, ProgressBar

from foundry.app.control.datasets import DatasetRegistry


def _jsonl(path, n=300):
    path.write_text("".join(json.dumps({"text": f"sample number {i}", "n": i, "score": i / 10}) + "\n"
                            for i in range(n)))
    return path


def _images(root):
    from PIL import Image

    for label, color in (("cat", (200, 30, 30)), ("dog", (30, 30, 200))):
        (root / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (16, 12), color).save(root / label / f"{i}.png")
    return root


async def _convert(app, pilot, tui, src, dst):
    await pilot.press("c")
    await tui.until(pilot, lambda: type(app.screen).__name__ == "ConvertForm", what="convert form")
    app.screen.query_one("#convert-src", Input).value = str(src)
    app.screen.query_one("#convert-dst", Input).value = str(dst)
    await tui.press(pilot, "convert")
    error = app.screen.query_one("#form-error")
    await tui.until(pilot, lambda: str(error.render()).startswith("done"), what="converted")
    bar = app.screen.query_one(ProgressBar)
    assert bar.total and bar.progress == bar.total
    await pilot.press("escape")
    await tui.until(pilot, lambda: type(app.screen).__name__ == "DatasetsScreen", what="back to datasets")


@pytest.mark.slow
def test_convert_inspect_verify(plane, tui, tmp_path):
    src = _jsonl(tmp_path / "train.jsonl")
    images = _images(tmp_path / "pets")

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("3")
            table = await tui.until(pilot, lambda: getattr(app.screen, "table", None), what="datasets view")
            await _convert(app, pilot, tui, src, tmp_path / "mds" / "train")
            await _convert(app, pilot, tui, images, tmp_path / "mds" / "pets")
            await tui.until(pilot, lambda: table.row_count == 2 and tui.cell(table, "mds-train", "samples") == "300",
                            what="summary")
            assert tui.cell(table, "mds-pets", "samples") == "6"
            assert tui.cell(table, "mds-train", "shards") == "1"

            # open: summary, columns and decoded samples
            table.move_cursor(row=0)
            await pilot.press("d")
            samples = await tui.until(pilot, lambda: app.screen.query_one("#samples", DataTable), what="detail")
            await tui.until(pilot, lambda: samples.row_count == 20, what="first page")
            shown = tui.text(app)
            assert "samples 300" in shown and "text: str" in shown and "compression none" in shown
            assert "sample number 0" in shown
            await pilot.press("right_square_bracket")
            await tui.until(pilot, lambda: samples.row_count and str(samples.get_row_at(0)[0]) == "20", what="page 2")

            # v: verify every hash
            await pilot.press("v")
            result = await tui.until(pilot, lambda: app.screen.query_one("#verify-result"), what="verify dialog")
            await tui.until(pilot, lambda: str(result.render()).startswith("ok"), what="verified")
            await tui.press(pilot, "close")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "DatasetScreen", what="closed")
            await pilot.press("escape")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "DatasetsScreen", what="back")

            # the image dataset: its samples render as a half-block preview
            table.move_cursor(row=1)
            await pilot.press("enter")
            view = await tui.until(pilot, lambda: app.screen.query_one("#sample-view"), what="image detail")
            await tui.until(pilot, lambda: "image 16x12" in tui.text(app), what="preview")
            assert "▀" in tui.text(app)
            assert view is not None
            await pilot.press("escape")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "DatasetsScreen", what="back")

            # a: register a URL; ctrl+d: remove (Cancel default)
            await pilot.press("a")
            url = await tui.until(pilot, lambda: app.screen.query_one("#dataset-url", Input), what="add form")
            url.value = str(tmp_path / "missing")
            app.screen.query_one("#dataset-name", Input).value = "missing"
            await tui.press(pilot, "add")
            await tui.until(pilot, lambda: "missing" in table.rows and
                            tui.cell(table, "missing", "compression").startswith("error"), what="broken one shown")
            table.move_cursor(row=table.get_row_index("missing"))
            await pilot.press("ctrl+d")
            await tui.until(pilot, lambda: app.screen.query_one("#cancel", Button).has_focus, what="dialog")
            await tui.press(pilot, "confirm")
            await tui.until(pilot, lambda: "missing" not in table.rows, what="removed")
        assert [e.name for e in DatasetRegistry(plane.paths.home).list()] == ["mds-train", "mds-pets"]

    tui.run(body())
