"""Credentials: secrets by name and kind, values always masked; add, test against a bucket, delete."""

from __future__ import annotations

from datetime import datetime

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header

from ..widgets.tables import EmptyHint, FilterBar, LiveTable
from .base import TableScreen
from .dialogs import ConfirmDialog

SECRET_COLUMNS = [("name", "name"), ("kind", "kind"), ("value", "value"), ("fields", "fields"),
                  ("details", "details"), ("created", "created")]
MASK = "••••••••"


def secret_row(info) -> tuple[str, list[str]]:
    details = ", ".join(f"{k}={v}" for k, v in sorted(info.public.items())) or "-"
    return (info.name, [info.name, info.kind, MASK, ", ".join(info.fields), details,
                        datetime.fromtimestamp(info.created_at).strftime("%Y-%m-%d %H:%M")])


class SecretsScreen(TableScreen):
    TITLE = "Credentials"
    MUTATING = frozenset({"add", "delete", "test"})
    BINDINGS = [Binding("a", "add", "Add"), Binding("t", "test", "Test bucket"),
                Binding("ctrl+d", "delete", "Delete"), Binding("ctrl+r", "refresh", "Refresh", show=False)]

    def compose(self) -> ComposeResult:
        yield Header()
        yield LiveTable(SECRET_COLUMNS, id="secrets-table")
        yield EmptyHint('No credentials yet. Press a to add one (s3 and R2, gcp, oci, env, kubeconfig, ssh).')
        yield FilterBar()
        yield Footer()

    def on_mount(self) -> None:
        self.set_view_title("Credentials")
        self.refresh_secrets()

    def action_refresh(self) -> None:
        self.refresh_secrets()

    @work(thread=True, exclusive=True, exit_on_error=False, name="list secrets", group="refresh")
    def refresh_secrets(self) -> None:
        rows = [secret_row(info) for info in self.app.plane.list_secrets()]
        self.show_rows(rows)

    def selected(self) -> str | None:
        name = self.table.current_key
        if name is None:
            self.notify("no secret selected", severity="warning")
        return name

    def action_add(self) -> None:
        if not self.mutating_allowed():
            return
        from .secret_forms import SecretForm

        def created(name: str | None) -> None:
            if name:
                self.refresh_secrets()

        self.app.push_screen(SecretForm(), created)

    def action_test(self) -> None:
        if not self.mutating_allowed() or (name := self.selected()) is None:
            return
        from .secret_forms import BucketTestForm

        self.app.push_screen(BucketTestForm(name))

    def action_delete(self) -> None:
        if not self.mutating_allowed() or (name := self.selected()) is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.delete_secret(name)

        self.app.push_screen(ConfirmDialog(f"Delete secret {name}? Runs that name it will not start.",
                                           confirm="Delete", destructive=True), confirmed)

    @work(thread=True, exclusive=True, exit_on_error=False, name="delete secret", group="action")
    def delete_secret(self, name: str) -> None:
        self.app.plane.delete_secret(name)
        self.app.call_from_thread(self.notify, f"deleted secret {name}")
        self.app.call_from_thread(self.refresh_secrets)
