"""Sub-apps that several command modules (or plugins) add commands to, e.g. `foundry dataset ...`."""

from __future__ import annotations

import typer

DATASET_HELP = "Datasets: convert, inspect, verify; register URLs for the TUI (add, list, remove)."


def sub_app(app: typer.Typer, name: str, help: str) -> typer.Typer:
    """The `name` sub-app of `app`, created on first use so modules can share it in any order."""
    for group in app.registered_groups:
        if group.name == name and group.typer_instance is not None:
            return group.typer_instance
    sub = typer.Typer(help=help, no_args_is_help=True)
    app.add_typer(sub, name=name)
    return sub
