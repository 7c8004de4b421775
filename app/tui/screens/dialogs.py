"""Small modal dialogs: confirm (Cancel is the default), jump to a view (`:`), help (`?`)."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from .base import FoundryModal


def own_bindings(node) -> list[tuple[object, Binding]]:
    """The bindings Foundry's own classes declare on `node` (not Textual's base navigation keys)."""
    out = []
    for cls in reversed(type(node).__mro__):
        if cls.__module__.startswith("foundry.") and "BINDINGS" in cls.__dict__:
            out += [(node, b) for b in cls.__dict__["BINDINGS"] if isinstance(b, Binding)]
    return out


class ConfirmDialog(FoundryModal[bool]):
    """Returns True only when the confirm button (or `y`) is pressed; escape, `n` and Cancel return False."""

    BINDINGS = [Binding("escape,n", "cancel", "Cancel"), Binding("y", "confirm", "Yes")]

    def __init__(self, message: str, confirm: str = "OK", destructive: bool = False):
        super().__init__(classes="dialog-screen")
        self.message, self.confirm, self.destructive = message, confirm, destructive

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.message, classes="dialog-message")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel", variant="primary" if self.destructive else "default")
                yield Button(self.confirm, id="confirm", variant="error" if self.destructive else "primary")

    def on_mount(self) -> None:
        self.query_one("#cancel" if self.destructive else "#confirm", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_confirm(self) -> None:
        self.dismiss(True)


class JumpDialog(FoundryModal[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, views: dict[str, str]):
        super().__init__(classes="dialog-screen")
        self.views = views

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Jump to view", classes="dialog-title")
            yield Input(placeholder=":runs, :clusters, :datasets, :secrets", id="jump-input")
            yield OptionList(*[Option(f"{title}  (:{view})", id=view) for view, title in self.views.items()],
                             id="jump-list")

    def on_input_changed(self, event: Input.Changed) -> None:
        text = event.value.strip().lower().lstrip(":")
        options = self.query_one("#jump-list", OptionList)
        options.clear_options()
        options.add_options([Option(f"{title}  (:{view})", id=view) for view, title in self.views.items()
                             if text in view or text in title.lower()])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        view = self.app.resolve_view(event.value)
        if view is None:
            self.notify(f"no view named {event.value!r}", severity="warning")
            return
        self.dismiss(view)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpDialog(FoundryModal[None]):
    """The bindings of the screen it was opened from (k9s' `?`)."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, screen: Screen):
        super().__init__(classes="dialog-screen")
        self.target = screen

    def compose(self) -> ComposeResult:
        self.rows = self.help_rows()
        table = Table(show_header=True, box=None, expand=True)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("action")
        for key, action in self.rows:
            table.add_row(key, action)
        with Vertical(classes="dialog help"):
            yield Label(f"Help: {getattr(self.target, 'TITLE', None) or type(self.target).__name__}",
                        classes="dialog-title")
            with VerticalScroll():
                yield Static(table, id="help-table")

    def help_rows(self) -> list[tuple[str, str]]:
        """(key, action) rows: the screen's own bindings, the app's, then navigation."""
        rows, seen = [], set()
        for node, binding in own_bindings(self.target) + own_bindings(self.app):
            if not binding.description or binding.description in seen:
                continue
            seen.add(binding.description)
            allowed = node.check_action(binding.action.split("(")[0], ())
            rows.append((self.app.get_key_display(binding),
                         binding.description + ("" if allowed else " (disabled: read-only)")))
        rows.append((":", "jump to a view (runs, clusters, datasets, secrets)"))
        rows.append(("↑/↓ j/k", "move in a list"))
        if self.target.query("TabbedContent"):
            rows.append(("←/→", "switch tab (when the tab bar has focus; tab moves focus)"))
        rows.append(("ctrl+p", "command palette: every action"))
        return rows

    def action_close(self) -> None:
        self.dismiss(None)
