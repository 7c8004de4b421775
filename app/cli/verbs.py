"""Verb-first command groups (`foundry get runs`, `foundry create secret ...`), shared by the noun modules.

`verb(app, "get")` returns the `get` sub-app of this root app, creating it on first use, so each noun
module (runs, secrets, clusters, ...) adds its own `get <noun>` command without knowing the others.
"""

from __future__ import annotations

import typer

VERB_HELP = {
    "get": "List things: runs, clusters, secrets.",
    "describe": "Show one thing in detail.",
    "create": "Create things: secrets, clusters.",
    "delete": "Delete things: runs, secrets, clusters.",
}


def verb(app: typer.Typer, name: str) -> typer.Typer:
    groups = app.__dict__.setdefault("_foundry_verbs", {})
    if name not in groups:
        sub = typer.Typer(help=VERB_HELP.get(name), no_args_is_help=True)
        app.add_typer(sub, name=name)
        groups[name] = sub
    return groups[name]


def json_option() -> bool:
    return typer.Option(False, "--json", help="Print JSON.")
