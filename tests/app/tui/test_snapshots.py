"""Snapshots of the main screens at 80x24 over fixed data (fixed names, metrics and clock).

Update with `pytest tests/app/tui/test_snapshots.py --snapshot-update`; docs/tui/ holds copies."""

from __future__ import annotations

import pytest


def _rows(n):
    async def wait(pilot):
        screen = pilot.app.screen
        for _ in range(100):
            table = getattr(screen, "table", None)
            if table is not None and table.row_count >= n:
                break
            await pilot.pause(0.05)
        await _idle(pilot)
    return wait


async def _idle(pilot):
    """Until no worker is running twice in a row (a worker may start the next one)."""
    quiet = 0
    for _ in range(200):
        await pilot.pause(0.05)
        quiet = quiet + 1 if not any(w.is_running for w in pilot.app.workers) else 0
        if quiet >= 3:
            return


def _settled(*keys):
    async def run(pilot):
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.1)
            await _idle(pilot)
        await pilot.pause(0.2)
        await _idle(pilot)
        from textual.widgets import Input

        for field in pilot.app.screen.query(Input):  # a blinking cursor is not deterministic
            field.cursor_blink = False
        await pilot.pause(0.2)
    return run


def test_runs_screen(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_rows(3))


def test_run_details_metrics(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("_", "enter"))


def test_run_details_resumptions(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("_", "enter", "right"))


def test_run_details_checkpoints(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("_", "enter", "right", "right"))


@pytest.mark.slow  # about 4 s on an idle machine: near the 5 s an unmarked test may take under CI
def test_run_details_config(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("_", "enter", "right", "right", "right"))


def test_clusters_screen(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("2"))


def test_datasets_screen(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("3"))


def test_dataset_samples(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("3", "_", "d"))


def test_dataset_image_preview(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("3", "_", "down", "d"))


def test_credentials_screen(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("4"))


def test_help_dialog(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("_", "question_mark"))


def test_readonly_runs(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(readonly=True), run_before=_rows(3))


def _until_log(pilot):
    async def wait(pilot):
        from textual.widgets import Log

        for _ in range(100):
            logs = pilot.app.screen.query(Log)
            if logs and logs.first().line_count >= 8:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.3)
    return wait


def test_logs_screen(snap_compare, snapshot_app):
    async def run(pilot):
        await _settled("_")(pilot)
        await pilot.press("l")
        await _until_log(pilot)(pilot)
    assert snap_compare(snapshot_app(), run_before=run)


def test_resume_form(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("_", "down", "r"))


def test_new_secret_form(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("4", "_", "a"))


def test_convert_form(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("3", "_", "c"))


def test_jump_dialog(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), run_before=_settled("_", "colon", "c", "l"))


def test_run_details_wide(snap_compare, snapshot_app):
    """The same screen scales up: a 140x40 terminal gets wider plots and full rows."""
    assert snap_compare(snapshot_app(), terminal_size=(140, 40), run_before=_settled("_", "enter"))
