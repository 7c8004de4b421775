"""Cluster dialogs: add one (name, provider, options as `key=value`, as `foundry create cluster -o`),
and one cluster's detail: its provider state and options, and the runs on it (Enter on a row)."""

from __future__ import annotations

import yaml
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DataTable, Input, Label, Select, Static

from foundry.plugins.errors import ConfigError, FoundryError

from .. import format as fmt
from ..errors import one_line
from ..widgets.runs import status_text
from .base import FoundryModal


def parse_options(text: str) -> dict:
    """`partition=debug, python=/usr/bin/python3` -> {"partition": "debug", ...} (YAML values)."""
    options = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"option {item!r} is not key=value")
        options[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return options


class AddClusterForm(FoundryModal[str | None]):
    """Dismisses with the new cluster's name once the control plane added it."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label("Add a cluster (clusters.yaml)", classes="dialog-title")
            yield Input(placeholder="name (e.g. hpc)", id="cluster-name")
            yield Select([], id="cluster-provider", prompt="provider")
            yield Input(placeholder="options: key=value, ... (e.g. partition=debug)", id="cluster-options")
            yield Label("", id="form-error", classes="form-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Add", id="add", variant="primary")

    def on_mount(self) -> None:
        from foundry.plugins.manager import compute_registry

        names = sorted(compute_registry().names())
        self.query_one("#cluster-provider", Select).set_options([(n, n) for n in names])
        self.query_one("#cluster-name", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.submit()

    def submit(self) -> None:
        error = self.query_one("#form-error", Label)
        name = self.query_one("#cluster-name", Input).value.strip()
        provider = self.query_one("#cluster-provider", Select).value
        if not name or not isinstance(provider, str):
            error.update("give a name and choose a provider")
            return
        try:
            options = parse_options(self.query_one("#cluster-options", Input).value)
        except ConfigError as exc:
            error.update(one_line(exc))
            return
        error.update("adding…")
        self.add(name, provider, options)

    @work(thread=True, exclusive=True, exit_on_error=False, name="add cluster")
    def add(self, name: str, provider: str, options: dict) -> None:
        try:
            info = self.app.plane.create_cluster(name, provider, options)
        except FoundryError as exc:
            self.app.call_from_thread(self.query_one("#form-error", Label).update, one_line(exc))
            return
        self.app.call_from_thread(self.notify, f"added cluster {name} ({provider}): {info.state}")
        self.app.call_from_thread(self.dismiss, name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ClusterDetail(FoundryModal[str | None]):
    """One cluster and the runs on it (now or before); Enter on a run dismisses with its name."""

    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, name: str):
        super().__init__(classes="dialog-screen")
        self.cluster = name

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form wide"):
            yield Label(f"Cluster {self.cluster}", classes="dialog-title")
            yield Static("loading…", id="cluster-info", markup=False)
            yield DataTable(id="cluster-runs", cursor_type="row")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="close", variant="primary")

    def on_mount(self) -> None:
        table = self.query_one("#cluster-runs", DataTable)
        for key, label in (("name", "run"), ("status", "status"), ("here", "here now"), ("devices", "devices"),
                           ("age", "age")):
            table.add_column(label, key=key)
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, name="load cluster")
    def load(self) -> None:
        plane = self.app.plane
        info = plane.cluster_info(self.cluster)
        runs = [r for r in plane.list_runs(reconcile=False) if any(x.cluster == self.cluster for x in r.resumptions)]
        self.app.call_from_thread(self._show, info, runs)

    def _show(self, info, runs) -> None:
        options = ", ".join(f"{k}={v}" for k, v in info.config.items() if k not in ("provider", "name")) or "-"
        devices = "-" if info.devices is None else info.devices
        nodes = "-" if info.nodes is None else info.nodes
        self.query_one("#cluster-info", Static).update(
            f"provider {info.provider}   state {info.state}   devices {devices}   nodes {nodes}\n"
            f"options  {options}\n" + ("runs on it:" if runs else "no runs on it yet"))
        table = self.query_one("#cluster-runs", DataTable)
        table.clear()
        now = self.app.clock()
        for run in runs:
            table.add_row(run.name, status_text(run.status), "yes" if run.cluster == self.cluster else "-",
                          str(run.devices), fmt.age(run.created_at, now), key=run.name)
        table.display = bool(runs)
        (table if runs else self.query_one("#close", Button)).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.row_key.value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
