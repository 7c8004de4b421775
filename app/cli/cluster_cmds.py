"""Cluster verbs: get clusters, create cluster NAME --provider P [--option key=value ...], delete cluster.

Clusters live in FOUNDRY_HOME/clusters.yaml (edit it by hand if you prefer); `local` always exists.
"""

from __future__ import annotations

from typing import List

import typer
import yaml

from foundry.plugins.errors import ConfigError

from .groups import group
from .output import json_option, sink


def _cp():
    from foundry.app.control import ControlPlane

    return ControlPlane()


def get_clusters(json_out: bool = json_option()) -> None:
    """List clusters: name, provider, devices, nodes, state."""
    sink.json_mode = sink.json_mode or json_out
    infos = _cp().list_clusters()
    if sink.json_mode:
        sink.emit([i.to_dict() for i in infos])
    else:
        sink.emit([i.to_dict() for i in infos], columns=["name", "provider", "devices", "nodes", "state"])


def create_cluster(
    name: str = typer.Argument(..., help="Cluster name."),
    provider: str = typer.Option(..., "--provider", help="Compute provider (local, slurm, kubernetes, ...)."),
    option: List[str] = typer.Option([], "--option", "-o", help="Provider option KEY=VALUE (YAML value); repeatable."),
    json_out: bool = json_option(),
) -> None:
    """Add a cluster to clusters.yaml."""
    sink.json_mode = sink.json_mode or json_out
    options = {}
    for item in option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r} is not KEY=VALUE")
        options[key.strip()] = yaml.safe_load(value) if value else ""
    info = _cp().create_cluster(name, provider, options)
    if sink.json_mode:
        sink.emit(info.to_dict())
    else:
        sink.info(f"added cluster {name} ({provider}): {info.state}")


def delete_cluster(name: str = typer.Argument(..., help="Cluster name.")) -> None:
    """Remove a cluster from clusters.yaml."""
    _cp().delete_cluster(name)
    sink.info(f"deleted cluster {name}")


def describe_cluster(name: str = typer.Argument(..., help="Cluster name."), json_out: bool = json_option()) -> None:
    """A cluster: provider, options, devices, nodes, state, and the runs on it."""
    sink.json_mode = sink.json_mode or json_out
    cp = _cp()
    info = cp.cluster_info(name)
    runs = [r for r in cp.list_runs(reconcile=False) if any(res.cluster == name for res in r.resumptions)]
    rows = [{"name": r.name, "status": r.status, "here now": r.cluster == name, "devices": r.devices,
             "resumptions here": sum(res.cluster == name for res in r.resumptions)} for r in runs]
    if sink.json_mode:
        sink.emit(dict(info.to_dict(), runs=rows))
        return
    sink.emit({"name": info.name, "provider": info.provider, "state": info.state,
               "devices": "-" if info.devices is None else info.devices,
               "nodes": "-" if info.nodes is None else info.nodes,
               **{f"option {k}": v for k, v in info.config.items() if k not in ("provider", "name")}})
    sink.out.print()
    if rows:
        sink.emit(rows, title="Runs on it (now or before)")
    else:
        sink.info(f"no runs on {name} yet: `foundry run -f SPEC --cluster {name}`")


def register(app: typer.Typer) -> None:
    group(app, "describe").command("cluster")(describe_cluster)
    group(app, "get").command("clusters")(get_clusters)
    group(app, "create").command("cluster")(create_cluster)
    group(app, "delete").command("cluster")(delete_cluster)
