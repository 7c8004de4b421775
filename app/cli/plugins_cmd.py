"""`foundry plugins`: what is installed, its version, the hooks it implements, what it contributes."""

from __future__ import annotations

import dataclasses

import typer

from foundry.plugins.manager import list_plugins

from .output import sink


def plugins(json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List plugins (built-ins first), their versions, hooks and contributions."""
    sink.json_mode = sink.json_mode or json_out
    rows = [dataclasses.asdict(info) for info in list_plugins()]
    if sink.json_mode:
        sink.emit(rows)
        return
    for row in rows:
        row["contributes"] = "; ".join(f"{k}: {', '.join(v)}" for k, v in row["contributes"].items())
    sink.emit(rows, columns=["name", "version", "builtin", "hooks", "contributes"])
