"""Clusters: every configured cluster with its provider plugin, devices, nodes, state and its runs.

Provider status can be slow or fail: it is read in a worker, and a broken cluster shows its error
in the state column (ControlPlane.list_clusters never raises for one cluster)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header

from foundry.app.control import ACTIVE_STATUSES

from ..widgets.tables import FilterBar, LiveTable
from .base import TableScreen

CLUSTER_COLUMNS = [("name", "name"), ("provider", "provider"), ("devices", "devices"), ("nodes", "nodes"),
                   ("state", "state"), ("runs", "active runs")]


def cluster_row(info, runs) -> tuple[str, list[str]]:
    active = sorted(r.name for r in runs if r.cluster == info.name and r.status in ACTIVE_STATUSES)
    return (info.name, [info.name, info.provider, "-" if info.devices is None else str(info.devices),
                        "-" if info.nodes is None else str(info.nodes), info.state,
                        ", ".join(active) if active else "-"])


class ClustersScreen(TableScreen):
    TITLE = "Clusters"
    BINDINGS = [Binding("ctrl+r", "refresh", "Refresh")]

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
