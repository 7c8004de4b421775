"""Command groups that several modules (and plugins) add commands to: the verbs (`foundry get runs`,
`foundry create secret ...`) and the `dataset` noun (`foundry dataset convert`, `foundry dataset add`).

`group(app, "get")` returns the `get` sub-app of this root app, creating it on first use, so each
module adds its own commands without knowing the others or the order they register in.
"""

from __future__ import annotations

import typer

GROUP_HELP = {
    "get": "List things: runs, clusters, secrets.",
    "describe": "Show one thing in detail.",
    "create": "Create things: secrets, clusters.",
    "delete": "Delete things: runs, secrets, clusters.",
    "clean": "Clean up leftovers: instances.",
    "dataset": "Datasets: convert, inspect, verify; register URLs for the TUI (add, list, remove).",
}


def group(app: typer.Typer, name: str) -> typer.Typer:
    for registered in app.registered_groups:
        if registered.name == name and registered.typer_instance is not None:
            return registered.typer_instance
    sub = typer.Typer(help=GROUP_HELP.get(name), no_args_is_help=True)
    app.add_typer(sub, name=name)
    return sub
