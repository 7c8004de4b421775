"""Instance verbs: `foundry get instances [--json]` (what cloud machines Foundry has running, and
their cost so far) and `foundry clean instances` (terminate those whose resumption is not running)."""

from __future__ import annotations

import typer

from .groups import group
from .output import json_option, sink


def _cp():
    from foundry.app.control import ControlPlane

    return ControlPlane()


def get_instances(json_out: bool = json_option()) -> None:
    """List the cloud instances Foundry made that are alive: run, type, state, hours, cost so far."""
    sink.json_mode = sink.json_mode or json_out
    rows = _cp().list_instances()
    if sink.json_mode:
        sink.emit(rows)
    else:
        sink.emit(rows, columns=["instance", "cluster", "run", "resumption", "type", "spot", "state", "hours", "cost"])


def clean_instances(json_out: bool = json_option()) -> None:
    """Terminate every instance Foundry made whose resumption is not running (leftovers)."""
    sink.json_mode = sink.json_mode or json_out
    ids = _cp().clean_instances()
    if sink.json_mode:
        sink.emit({"terminated": ids})
    else:
        sink.info(f"terminated {len(ids)} instance(s){': ' + ', '.join(ids) if ids else ''}")


def register(app: typer.Typer) -> None:
    group(app, "get").command("instances")(get_instances)
    clean = group(app, "clean")
    clean.command("instances")(clean_instances)
