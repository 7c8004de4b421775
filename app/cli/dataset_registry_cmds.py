"""`foundry dataset add URL [--name N]`, `foundry dataset list`, `foundry dataset remove NAME`: the
registered datasets (FOUNDRY_HOME/datasets.yaml) the TUI's Datasets screen shows.

Adds to the `dataset` sub-app when another module (convert/inspect/verify) already made one.
"""

from __future__ import annotations

from typing import Optional

import typer

from .groups import DATASET_HELP, sub_app
from .output import sink
from .verbs import json_option


def _registry():
    from foundry.app.control.config import FoundryPaths
    from foundry.app.control.datasets import DatasetRegistry

    return DatasetRegistry(FoundryPaths.resolve().home)


def add(url: str = typer.Argument(..., help="Dataset URL (s3://, gs://, oci://, file:// or a folder)."),
        name: Optional[str] = typer.Option(None, "--name", help="Short name (default: from the URL)."),
        secret: Optional[str] = typer.Option(None, "--secret",
                                             help="A stored secret to read it with (foundry get secrets)."),
        json_out: bool = json_option()) -> None:
    """Register a dataset URL (shown by `foundry dataset list` and the TUI)."""
    sink.json_mode = sink.json_mode or json_out
    if secret:
        from foundry.app.control.config import FoundryPaths
        from foundry.app.control.secrets import SecretStore
        from foundry.plugins.errors import ConfigError

        if not SecretStore(FoundryPaths.resolve().secrets_dir).exists(secret):
            raise ConfigError(f"no secret named {secret!r}", hint="`foundry get secrets` lists them; "
                                                                "`foundry create secret` adds one")
    entry = _registry().add(url, name, secret)
    if sink.json_mode:
        sink.emit({"name": entry.name, "url": entry.url} | ({"secret": entry.secret} if entry.secret else {}))
    else:
        sink.info(f"registered dataset {entry.name}: {entry.url}" + (f" (read with secret {secret})" if secret else ""))


def list_datasets(json_out: bool = json_option()) -> None:
    """List registered datasets."""
    sink.json_mode = sink.json_mode or json_out
    entries = _registry().list()
    if sink.json_mode:  # "secret" only where one is bound
        sink.emit([{"name": e.name, "url": e.url} | ({"secret": e.secret} if e.secret else {}) for e in entries])
    else:
        sink.emit([{"name": e.name, "url": e.url, "secret": e.secret or ""} for e in entries],
                  columns=["name", "url", "secret"])


def remove(name: str = typer.Argument(..., help="Name or URL of a registered dataset.")) -> None:
    """Forget a registered dataset (its data is untouched)."""
    _registry().remove(name)
    sink.info(f"removed dataset {name}")


def register(app: typer.Typer) -> None:
    sub = sub_app(app, "dataset", DATASET_HELP)
    sub.command("add")(add)
    sub.command("list")(list_datasets)
    sub.command("remove")(remove)
