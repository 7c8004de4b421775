"""What every Foundry screen shares: the worker-failure route to the app's one handler, readonly
checks for mutating actions, and (for table views) the `/` filter."""

from __future__ import annotations

from typing import TypeVar

from textual.binding import Binding
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState, get_current_worker

from ..widgets.tables import EmptyHint, FilterBar, LiveTable


class WorkerFailures:
    """Routes every failed worker of this screen to `app.report_failure` (one handler)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_failure(event.worker.error, event.worker.name)


class FoundryScreen(WorkerFailures, Screen):
    MUTATING: frozenset[str] = frozenset()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MUTATING and getattr(self.app, "readonly", False):
            return None  # shown disabled in the footer, never runs
        return True

    def set_view_title(self, view: str) -> None:
        self.title = "Foundry"
        self.sub_title = view + (" (read-only)" if getattr(self.app, "readonly", False) else "")

    def busy(self, worker_name: str) -> bool:
        """Whether this screen's worker of that name is still running (skip a periodic refresh)."""
        return any(w.name == worker_name and w.is_running for w in self.workers)

    def mutating_allowed(self) -> bool:
        return not self.app.deny_readonly()


class TableScreen(FoundryScreen):
    """A view over one LiveTable (`self.table`) with `/` filtering."""

    BINDINGS = [Binding("slash", "filter", "Filter", key_display="/")]

    @property
    def table(self) -> LiveTable:
        return self.query_one(LiveTable)

    def show_rows(self, rows) -> None:
        """From a refresh worker: put rows in the table unless a newer refresh replaced this one."""
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._set_rows, rows)

    def _set_rows(self, rows) -> None:
        self.table.set_rows(rows)
        hints = self.query(EmptyHint)
        if hints:  # an empty table shrinks to its header and the hint says what to do next
            self.table.set_class(not rows, "-empty")
            for hint in hints:
                hint.display = not rows

    def action_filter(self) -> None:
        self.query_one(FilterBar).open()

    def on_filter_bar_filter(self, message: FilterBar.Filter) -> None:
        self.table.set_filter(message.text)


ResultType = TypeVar("ResultType")


class FoundryModal(WorkerFailures, ModalScreen[ResultType]):
    """A dialog; `dismiss(value)` returns its result to the screen that pushed it."""
