"""Runs (home): the live runs table and its row actions (details, logs, pause, resume, move, delete,
new run). Every control-plane call runs in a named worker; the table refreshes in the background."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header

from foundry.app.control.run_views import run_progress

from ..widgets.runs import RunTable, run_row
from ..widgets.tables import FilterBar
from .base import TableScreen
from .dialogs import ConfirmDialog


class RunsScreen(TableScreen):
    TITLE = "Runs"
    MUTATING = frozenset({"pause", "resume", "move", "delete", "new_run"})
    BINDINGS = [
        Binding("enter", "details", "Details", show=False),
        Binding("d", "details", "Describe"),
        Binding("l", "logs", "Logs"),
        Binding("p", "pause", "Pause"),
        Binding("r", "resume", "Resume"),
        Binding("m", "move", "Move"),
        Binding("ctrl+d", "delete", "Delete"),
        Binding("n", "new_run", "New"),
        Binding("ctrl+r", "refresh", "Refresh", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield RunTable(id="runs-table")
        yield FilterBar()
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title("Runs")
        self.refresh_runs()
        self.set_interval(self.app.refresh_interval, self.refresh_runs)

    def action_refresh(self) -> None:
        self.app.call_from_thread(self.refresh_runs)

    @work(thread=True, exclusive=True, exit_on_error=False, name="refresh runs", group="refresh")
    def refresh_runs(self) -> None:
        plane = self.app.plane
        runs = plane.list_runs()
        now = self.app.clock()
        rows = [run_row(run, run_progress(plane, run), now) for run in runs]
        self.app.call_from_thread(self.table.set_rows, rows)

    # --- row actions --------------------------------------------------------------------------
    def selected(self) -> str | None:
        name = self.table.current_key
        if name is None:
            self.notify("no run selected", severity="warning")
        return name

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_details()

    def action_details(self) -> None:
        if (name := self.selected()) is not None:
            from .run_detail import RunDetailScreen

            self.app.push_screen(RunDetailScreen(name))

    def action_logs(self) -> None:
        if (name := self.selected()) is not None:
            from .logs import LogsScreen

            self.app.push_screen(LogsScreen(name))

    def action_pause(self) -> None:
        if not self.mutating_allowed() or (name := self.selected()) is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.pause_run(name)

        self.app.push_screen(ConfirmDialog(f"Pause run {name}? It checkpoints and stops; resume it anywhere.",
                                           confirm="Pause"), confirmed)

    @work(thread=True, exclusive=True, exit_on_error=False, name="pause run", group="action")
    def pause_run(self, name: str) -> None:
        info = self.app.plane.stop_run(name, graceful=True)
        self.app.call_from_thread(self.notify, f"run {name} {info.status}")
        self.app.call_from_thread(self.refresh_runs)

    def _placement(self, title: str, then) -> None:
        if not self.mutating_allowed() or (name := self.selected()) is None:
            return
        from .forms import PlacementForm

        def chosen(result) -> None:
            if result:
                then(name, *result)

        self.app.push_screen(PlacementForm(name, title), chosen)

    def action_resume(self) -> None:
        self._placement("Resume", self.resume_run)

    def action_move(self) -> None:
        self._placement("Move", self.move_run)

    @work(thread=True, exclusive=True, exit_on_error=False, name="resume run", group="action")
    def resume_run(self, name: str, cluster: str, gpus: int | None, nodes: int | None) -> None:
        info = self.app.plane.resume_run(name, cluster=cluster, gpus=gpus, nodes=nodes)
        self.app.call_from_thread(self.notify, f"run {name} resumed on {info.cluster} "
                                               f"(resumption {info.latest.index}, {info.devices} device(s))")
        self.app.call_from_thread(self.refresh_runs)

    @work(thread=True, exclusive=True, exit_on_error=False, name="move run", group="action")
    def move_run(self, name: str, cluster: str, gpus: int | None, nodes: int | None) -> None:
        from foundry.app.control.moves import move_run

        def step(message: str) -> None:
            self.app.call_from_thread(self.notify, message, timeout=3)
            self.app.call_from_thread(self.refresh_runs)

        info = move_run(self.app.plane, name, cluster=cluster, gpus=gpus, nodes=nodes, timeout=600, on_step=step)
        self.app.call_from_thread(self.notify, f"run {name} moved to {info.cluster} (resumption {info.latest.index})")
        self.app.call_from_thread(self.refresh_runs)

    def action_delete(self) -> None:
        if not self.mutating_allowed() or (name := self.selected()) is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.delete_run(name)

        self.app.push_screen(ConfirmDialog(f"Delete run {name}? It is stopped and its logs are removed.",
                                           confirm="Delete", destructive=True), confirmed)

    @work(thread=True, exclusive=True, exit_on_error=False, name="delete run", group="action")
    def delete_run(self, name: str) -> None:
        self.app.plane.delete_run(name)
        self.app.call_from_thread(self.notify, f"deleted run {name}")
        self.app.call_from_thread(self.refresh_runs)

    def action_new_run(self) -> None:
        if not self.mutating_allowed():
            return
        from .forms import NewRunForm

        def launched(name: str | None) -> None:
            if name:
                self.refresh_runs()

        self.app.push_screen(NewRunForm(), launched)
