"""Runs (home): the live runs table and its row actions (details, logs, pause, resume, move, delete,
new run). Every control-plane call runs in a named worker; the table refreshes in the background
(a refresh still running is not started twice, so a slow provider never piles up threads)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header


from ..widgets.runs import RunTable, run_row
from ..widgets.tables import EmptyHint, FilterBar
from ..widgets.watchdog import WatchdogLine
from .base import TableScreen
from .run_actions import RUN_BINDINGS, RUN_MUTATING, RunActions


class RunsScreen(RunActions, TableScreen):
    TITLE = "Runs"
    MUTATING = RUN_MUTATING | {"new_run"}
    BINDINGS = [
        Binding("enter", "details", "Details", show=False),
        Binding("d", "details", "Describe"),
        *RUN_BINDINGS,
        Binding("n", "new_run", "New"),
        Binding("ctrl+r", "refresh", "Refresh", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield RunTable(id="runs-table")
        yield EmptyHint('No runs yet. Press n to start one from a run spec (YAML), or use `foundry run -f run.yaml`.')
        yield FilterBar()
        yield WatchdogLine(id="watchdog")
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title("Runs")
        self.refresh_runs()
        self.set_interval(self.app.refresh_interval, self.tick)

    def tick(self) -> None:
        if not self.busy("refresh runs"):
            self.refresh_runs()

    def action_refresh(self) -> None:
        self.refresh_runs()

    def after_change(self) -> None:
        self.refresh_runs()

    @work(thread=True, exclusive=True, exit_on_error=False, name="refresh runs", group="refresh")
    def refresh_runs(self) -> None:
        plane = self.app.plane
        runs = plane.list_runs()
        now = self.app.clock()
        rows = [run_row(run, plane.run_progress(run), now) for run in runs]
        watchdogs = plane.watchdogs()
        self.statuses = {run.name: run.status for run in runs}
        self.show_rows(rows)
        self.app.call_from_thread(self.query_one(WatchdogLine).show, watchdogs, now)

    def run_status(self, name: str) -> str | None:
        return getattr(self, "statuses", {}).get(name)

    def selected_run(self) -> str | None:
        name = self.table.current_key
        if name is None:
            self.notify("no run selected", severity="warning")
        return name

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_details()

    def action_details(self) -> None:
        if (name := self.selected_run()) is not None:
            from .run_detail import RunDetailScreen

            self.app.push_screen(RunDetailScreen(name))

    def action_new_run(self) -> None:
        if not self.mutating_allowed():
            return
        from .forms import NewRunForm

        self.app.push_screen(NewRunForm(), lambda name: name and self.refresh_runs())
