"""Clusters: every configured cluster with its provider plugin, devices, nodes, state and its runs.

Provider status can be slow or fail: it is read in a worker, and a broken cluster shows its error
in the state column (ControlPlane.list_clusters never raises for one cluster)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header

from foundry.app.control import ACTIVE_STATUSES

from ..widgets.tables import FilterBar, LiveTable
from .base import TableScreen
from .dialogs import ConfirmDialog

CLUSTER_COLUMNS = [("name", "name"), ("provider", "provider"), ("devices", "devices"), ("nodes", "nodes"),
                   ("state", "state"), ("runs", "active runs")]


def cluster_row(info, runs) -> tuple[str, list[str]]:
    active = sorted(r.name for r in runs if r.cluster == info.name and r.status in ACTIVE_STATUSES)
    return (info.name, [info.name, info.provider, "-" if info.devices is None else str(info.devices),
                        "-" if info.nodes is None else str(info.nodes), info.state,
                        ", ".join(active) if active else "-"])


class ClustersScreen(TableScreen):
    TITLE = "Clusters"
    MUTATING = frozenset({"add", "remove"})
    BINDINGS = [Binding("enter", "open", "Open", show=False), Binding("d", "open", "Describe"),
                Binding("a", "add", "Add"), Binding("ctrl+d", "remove", "Remove"),
                Binding("ctrl+r", "refresh", "Refresh")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield LiveTable(CLUSTER_COLUMNS, id="clusters-table")
        yield FilterBar()
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title("Clusters")
        self.refresh_clusters()
        self.set_interval(max(self.app.refresh_interval * 5, 5.0), self.tick)

    def tick(self) -> None:
        if not self.busy("refresh clusters"):
            self.refresh_clusters()

    def action_refresh(self) -> None:
        self.refresh_clusters()

    @work(thread=True, exclusive=True, exit_on_error=False, name="refresh clusters", group="refresh")
    def refresh_clusters(self) -> None:
        plane = self.app.plane
        runs = plane.list_runs(reconcile=False)
        rows = [cluster_row(info, runs) for info in plane.list_clusters()]
        self.show_rows(rows)

    def _selected(self) -> str | None:
        name = self.table.current_key
        if name is None:
            self.notify("no cluster selected", severity="warning")
        return name

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        if (name := self._selected()) is None:
            return
        from .cluster_forms import ClusterDetail

        def to_run(run: str | None) -> None:
            if run:
                from .run_detail import RunDetailScreen

                self.app.push_screen(RunDetailScreen(run))

        self.app.push_screen(ClusterDetail(name), to_run)

    def action_add(self) -> None:
        if not self.mutating_allowed():
            return
        from .cluster_forms import AddClusterForm

        self.app.push_screen(AddClusterForm(), lambda name: name and self.refresh_clusters())

    def action_remove(self) -> None:
        if not self.mutating_allowed() or (name := self._selected()) is None:
            return
        self.app.push_screen(ConfirmDialog(f"Remove cluster {name} from clusters.yaml? Its runs and their "
                                           "checkpoints stay; resume them on another cluster.",
                                           confirm="Remove", destructive=True),
                             lambda ok: ok and self.remove_cluster(name))

    @work(thread=True, exclusive=True, exit_on_error=False, name="remove cluster", group="action")
    def remove_cluster(self, name: str) -> None:
        self.app.plane.delete_cluster(name)
        self.app.call_from_thread(self.notify, f"removed cluster {name}")
        self.app.call_from_thread(self.refresh_clusters)
