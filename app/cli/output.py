"""The one output sink of the CLI: data to stdout (a rich table or JSON), everything else to stderr.

Every data command builds rows (dicts) and calls `emit`; `--json` switches the whole sink to JSON,
so no command formats JSON itself.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import typer
from rich.console import Console
from rich.table import Table


@dataclass
class Sink:
    json_mode: bool = False

    @property
    def out(self) -> Console:
        return Console(file=sys.stdout, highlight=False, soft_wrap=True)

    @property
    def err(self) -> Console:
        return Console(file=sys.stderr, highlight=False, soft_wrap=True)

    @property
    def interactive(self) -> bool:
        """Progress bars only for a person at a terminal, never with --json."""
        return not self.json_mode and sys.stderr.isatty()

    def emit(self, data: Any, columns: Sequence[str] | None = None, title: str | None = None) -> None:
        """Print `data` (a list of row dicts, or one dict) as JSON or as a table / key-value list."""
        if self.json_mode:
            sys.stdout.write(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")
            return
        if isinstance(data, dict):
            width = max((len(k) for k in data), default=0)
            for key, value in data.items():
                self.out.print(f"{key:<{width}}  {_cell(value)}", markup=False)
            return
        rows = list(data)
        columns = list(columns or (rows[0].keys() if rows else []))
        table = Table(title=title, box=None, header_style="bold", pad_edge=False)
        for col in columns:
            table.add_column(col.upper().replace("_", " "), overflow="fold")
        for row in rows:
            table.add_row(*(_cell(row.get(c)) for c in columns))
        self.out.print(table)

    def info(self, message: str) -> None:
        self.err.print(message, markup=False)

    def lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            sys.stdout.write(line if line.endswith("\n") else line + "\n")
            sys.stdout.flush()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


sink = Sink()


def json_option() -> bool:
    """The per-command `--json` (the root's `foundry --json` sets the same sink)."""
    return typer.Option(False, "--json", help="Print JSON.")
