"""Datasets: the registered dataset URLs (FOUNDRY_HOME/datasets.yaml) with shards, samples, size and
compression read from each index.json in a worker; add, open, convert into MDS, verify, remove."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header

from foundry.plugins.errors import FoundryError

from .. import format as fmt
from ..widgets.tables import EmptyHint, FilterBar, LiveTable
from .base import TableScreen
from .dialogs import ConfirmDialog

DATASET_COLUMNS = [("name", "name"), ("url", "url"), ("shards", "shards"), ("samples", "samples"),
                   ("bytes", "size"), ("compression", "compr.")]


def dataset_row(entry, summary=None, error: str | None = None) -> tuple[str, list[str]]:
    if summary is None:
        return (entry.name, [entry.name, entry.url, "-", "-", "-", error or "…"])
    return (entry.name, [entry.name, entry.url, str(summary.shards), str(summary.samples),
                         fmt.size(summary.bytes), summary.compression or "none"])


class DatasetsScreen(TableScreen):
    TITLE = "Datasets"
    MUTATING = frozenset({"add", "convert", "remove"})
    BINDINGS = [Binding("enter", "open", "Open", show=False), Binding("d", "open", "Inspect"),
                Binding("a", "add", "Add"), Binding("c", "convert", "Convert"), Binding("v", "verify", "Verify"),
                Binding("ctrl+d", "remove", "Remove"), Binding("ctrl+r", "refresh", "Refresh", show=False)]

    def compose(self) -> ComposeResult:
        yield Header()
        yield LiveTable(DATASET_COLUMNS, id="datasets-table")
        yield EmptyHint('No datasets registered. Press a to add a dataset URL, or c to convert JSONL, CSV or an image folder into MDS.')
        yield FilterBar()
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title("Datasets")
        self.entries: dict = {}
        self.refresh_datasets()

    def action_refresh(self) -> None:
        self.refresh_datasets()

    @work(thread=True, exclusive=True, exit_on_error=False, name="list datasets", group="refresh")
    def refresh_datasets(self) -> None:
        plane = self.app.plane
        entries = plane.list_datasets()
        self.entries = {e.name: e for e in entries}
        self.show_rows([dataset_row(e) for e in entries])
        rows = []
        for e in entries:
            try:
                rows.append(dataset_row(e, plane.dataset_summary(e.url, secret=e.secret)))
            except FoundryError as exc:
                rows.append(dataset_row(e, error="error: " + exc.message))
        self.show_rows(rows)

    def selected(self):
        name = self.table.current_key
        if name is None or name not in self.entries:
            self.notify("no dataset selected", severity="warning")
            return None
        return self.entries[name]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        if (entry := self.selected()) is not None:
            from .dataset_detail import DatasetScreen

            self.app.push_screen(DatasetScreen(entry.name, entry.url, entry.secret))

    def action_add(self) -> None:
        if not self.mutating_allowed():
            return
        from .dataset_forms import AddDatasetForm

        self.app.push_screen(AddDatasetForm(), lambda added: added and self.refresh_datasets())

    def action_convert(self) -> None:
        if not self.mutating_allowed():
            return
        from .dataset_forms import ConvertForm

        self.app.push_screen(ConvertForm(), lambda done: done and self.refresh_datasets())

    def action_verify(self) -> None:
        if (entry := self.selected()) is not None:
            from .dataset_forms import VerifyDialog

            self.app.push_screen(VerifyDialog(entry.url, entry.secret))

    def action_remove(self) -> None:
        if not self.mutating_allowed() or (entry := self.selected()) is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.remove_dataset(entry.name)

        self.app.push_screen(ConfirmDialog(f"Forget dataset {entry.name}? Its data is not touched.",
                                           confirm="Remove", destructive=True), confirmed)

    @work(thread=True, exclusive=True, exit_on_error=False, name="remove dataset", group="action")
    def remove_dataset(self, name: str) -> None:
        self.app.plane.remove_dataset(name)
        self.app.call_from_thread(self.notify, f"removed dataset {name}")
        self.app.call_from_thread(self.refresh_datasets)
