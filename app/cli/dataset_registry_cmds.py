"""`foundry dataset add URL [--name N]`, `foundry dataset list`, `foundry dataset remove NAME`: the
registered datasets (FOUNDRY_HOME/datasets.yaml) the TUI's Datasets screen shows.

Adds to the `dataset` group that convert/inspect/verify (dataset_cmds.py) share; the work is in
the control plane.
"""

from __future__ import annotations

from typing import Optional

import typer

from .groups import group
from .output import json_option, sink


def _plane():
    from foundry.app.control import ControlPlane

    return ControlPlane()


def add(url: str = typer.Argument(..., help="Dataset URL (s3://, gs://, oci://, file:// or a folder)."),
        name: Optional[str] = typer.Option(None, "--name", help="Short name (default: from the URL)."),
        secret: Optional[str] = typer.Option(None, "--secret",
                                             help="A stored secret to read it with (foundry get secrets)."),
        json_out: bool = json_option()) -> None:
    """Register a dataset URL (shown by `foundry dataset list` and the TUI)."""
    sink.json_mode = sink.json_mode or json_out
    entry = _plane().add_dataset(url, name, secret)
    if sink.json_mode:
        sink.emit({"name": entry.name, "url": entry.url} | ({"secret": entry.secret} if entry.secret else {}))
    else:
        sink.info(f"registered dataset {entry.name}: {entry.url}" + (f" (read with secret {secret})" if secret else ""))


def list_datasets(json_out: bool = json_option()) -> None:
    """List registered datasets."""
    sink.json_mode = sink.json_mode or json_out
    entries = _plane().list_datasets()
    if sink.json_mode:  # "secret" only where one is bound
        sink.emit([{"name": e.name, "url": e.url} | ({"secret": e.secret} if e.secret else {}) for e in entries])
    else:
        sink.emit([{"name": e.name, "url": e.url, "secret": e.secret or ""} for e in entries],
                  columns=["name", "url", "secret"])


def remove(name: str = typer.Argument(..., help="Name or URL of a registered dataset.")) -> None:
    """Forget a registered dataset (its data is untouched)."""
    _plane().remove_dataset(name)
    sink.info(f"removed dataset {name}")


def register(app: typer.Typer) -> None:
    sub = group(app, "dataset")
    sub.command("add")(add)
    sub.command("list")(list_datasets)
    sub.command("remove")(remove)
