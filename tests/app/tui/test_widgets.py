"""Widgets and small pieces on their own: LiveTable keeps the cursor on its row across refreshes and
filters; sample values render by type (images as half blocks); checkpoints of a run's save folder
are listed with their URLs; the entry point's options."""

from __future__ import annotations

import asyncio

import numpy as np
from textual.app import App

from foundry.app.tui.main import parse_args
from foundry.app.tui.widgets.datasets import image_preview, render_value, short
from foundry.app.tui.widgets.tables import LiveTable


class _TableApp(App):
    def compose(self):
        yield LiveTable([("name", "name"), ("n", "n")])


def test_live_table_keeps_cursor_and_filters():
    async def body():
        app = _TableApp()
        async with app.run_test() as pilot:
            table = app.query_one(LiveTable)
            table.set_rows([("a", ["a", "1"]), ("b", ["b", "2"]), ("c", ["c", "3"])])
            table.move_cursor(row=1)
            table.set_rows([("a", ["a", "1"]), ("b", ["b", "20"]), ("c", ["c", "3"])])  # in place
            assert table.current_key == "b" and table.get_cell("b", "n") == "20"
            table.set_rows([("new", ["new", "0"]), ("c", ["c", "3"]), ("b", ["b", "21"])])  # reordered
            assert table.current_key == "b" and table.cursor_row == 2
            table.set_filter("ne")
            assert [k.value for k in table.rows] == ["new"]
            table.set_filter("")
            assert table.row_count == 3
            await pilot.pause()

    asyncio.run(body())


def test_sample_values_render_by_type():
    from PIL import Image

    img = Image.new("RGB", (10, 6), (255, 0, 0))
    text = image_preview(img)
    assert text.plain.count("▀") == 10 * 3 and "rgb(255,0,0)" in str(text.spans[0].style)
    assert short(img) == "<image 10x6 RGB>"
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert short(arr) == "<array 2x3 float32>"
    assert "shape=(2, 3)" in render_value(arr).plain
    assert short("x" * 40).endswith("…") and short(b"\x00\x01") == "<2 bytes>"


def test_run_checkpoints_listed_with_urls(plane, run_yaml, tmp_path):
    from foundry.trainer.checkpoint.format import LATEST, MANIFEST, pointer_bytes

    save = tmp_path / "ckpt" / "tiny"
    for name in ("ep0-ba10", "ep0-ba20"):
        (save / name).mkdir(parents=True)
        (save / name / "model.pt").write_bytes(b"w" * 100)
        (save / name / MANIFEST).write_bytes(b"{}")
    (save / "ep0-ba30").mkdir()
    (save / "ep0-ba30" / "model.pt").write_bytes(b"partial")
    (save / LATEST).write_bytes(pointer_bytes("ep0-ba20", b"{}"))
    spec = {"name": "tiny", "command": "true", "parameters": {"save_folder": str(tmp_path / "ckpt" / "{run_name}")}}
    plane.registry.create_run("tiny", spec, 0)
    rows = plane.runs.checkpoints(plane.get_run("tiny", reconcile=False))
    assert [(r.name, r.batch, r.complete, r.latest) for r in rows] == [
        ("ep0-ba10", 10, True, False), ("ep0-ba20", 20, True, True), ("ep0-ba30", 30, False, False)]
    assert rows[1].url.startswith("file://") and rows[1].url.endswith("/ckpt/tiny/ep0-ba20")


def test_entry_point_options():
    args = parse_args(["--readonly", "--home", "/tmp/h"])
    assert args.readonly and args.home == "/tmp/h"
    assert not parse_args([]).readonly


def test_live_table_widens_columns_on_update_and_moves_with_j_k():
    async def body():
        app = _TableApp()
        async with app.run_test() as pilot:
            table = app.query_one(LiveTable)
            table.set_rows([("a", ["a", "1"]), ("b", ["b", "2"])])
            await pilot.pause()
            narrow = table.columns["n"].content_width
            table.set_rows([("a", ["a", "1322/3000 completed"]), ("b", ["b", "2"])])  # in place: update_cell
            await pilot.pause()
            assert table.columns["n"].content_width >= len("1322/3000 completed") > narrow
            table.focus()
            await pilot.press("j")
            assert table.current_key == "b"
            await pilot.press("k")
            assert table.current_key == "a"


def test_resumption_timeline_names_the_checkpoint_each_resumption_resumed_from():
    from foundry.app.control.models import Resumption
    from foundry.app.tui.widgets.runs import ResumptionTimeline

    class _TimelineApp(App):
        def compose(self):
            yield ResumptionTimeline("", id="timeline")

    rows = [Resumption(0, "local", "local", 1, 1, "paused", started_at=0.0, ended_at=5.0),
            Resumption(1, "hpc", "slurm", 1, 2, "running", started_at=6.0,
                       resumed_from="s3://bucket/run/checkpoints/ep0-ba12")]

    async def body():
        app = _TimelineApp()
        async with app.run_test(size=(160, 10)) as pilot:
            timeline = app.query_one(ResumptionTimeline)
            timeline.show(rows, {0: (1, 12), 1: (13, 20)}, 40, now=10.0)
            await pilot.pause()
            screen = app.export_screenshot().replace("&#160;", " ")
            assert "resumed from" in screen and "ep0-ba12" in screen

    asyncio.run(body())
