"""LiveTable: a DataTable refreshed in place from (key, cells) rows, keeping the cursor on its row;
FilterBar: the `/` filter line; its Filter message carries the text up to the screen."""

from __future__ import annotations

from typing import Any, Sequence

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static, DataTable, Input

Row = tuple[str, Sequence[Any]]


class LiveTable(DataTable):
    """Rows refreshed in place; j/k move like ↓/↑ (k9s, vim)."""

    BINDINGS = [Binding("j", "cursor_down", "Down", show=False), Binding("k", "cursor_up", "Up", show=False)]

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: Any):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._columns = list(columns)
        self._rows: list[Row] = []
        self._shown: list[str] = []
        self.filter_text = ""

    def on_mount(self) -> None:
        for key, label in self._columns:
            self.add_column(label, key=key)

    @property
    def current_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    def set_rows(self, rows: Sequence[Row]) -> None:
        self._rows = list(rows)
        self._render_rows()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._render_rows()

    def _matches(self, row: Row) -> bool:
        if not self.filter_text:
            return True
        return any(self.filter_text in str(getattr(c, "plain", c)).lower() for c in (row[0], *row[1]))

    def _render_rows(self) -> None:
        rows = [r for r in self._rows if self._matches(r)]
        keys = [k for k, _ in rows]
        if keys == self._shown:
            for key, cells in rows:
                for (col, _), value in zip(self._columns, cells):
                    if self.get_cell(key, col) != value:
                        self.update_cell(key, col, value, update_width=True)  # "completed" is wider than "running"
            return
        current, index = self.current_key, self.cursor_row
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        self._shown = keys
        if current in keys:
            self.move_cursor(row=keys.index(current), animate=False)
        elif keys:
            self.move_cursor(row=min(index, len(keys) - 1), animate=False)


class FilterBar(Input):
    """`/` opens it; typing filters the screen's table; escape clears and closes it."""

    BINDINGS = [Binding("escape", "close", "Close filter", show=False)]

    class Filter(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self) -> None:
        super().__init__(placeholder="filter (escape to clear)", id="filter-bar")
        self.display = False

    def open(self) -> None:
        self.display = True
        self.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Filter(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.screen.focus_next()

    def action_close(self) -> None:
        self.value = ""
        self.display = False
        self.post_message(self.Filter(""))
        self.screen.focus_next()


class EmptyHint(Static):
    """What to do next, shown in place of an empty table (hidden once the table has rows)."""

    DEFAULT_CSS = """
    EmptyHint { color: $text-muted; padding: 1 2; height: auto; display: none; }
    """
