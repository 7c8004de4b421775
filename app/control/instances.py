"""Cloud instances Foundry made (`foundry get instances`, `foundry clean instances`).

Providers that make machines (ec2, ...) implement two optional methods: `instances()` -> rows of
what is alive with its cost so far, and `clean_instances(keep_tokens)` -> ids terminated. The only
state that decides what to keep is the registry: an instance belongs to a launch token, and a token
is kept while its resumption is active (running, stopping, or still launching by a live process).
Everything else a provider finds by its tags is a leftover and is terminated.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from foundry.plugins.errors import FoundryError, ProviderError

from .launch_intent import launcher_alive
from .models import ACTIVE_STATUSES

if TYPE_CHECKING:
    from .clusters import Clusters
    from .registry import Registry

log = logging.getLogger("foundry.control")


def _machine_providers(clusters: "Clusters") -> list[tuple[str, Any]]:
    out = []
    for name in clusters.names():
        try:
            provider = clusters.provider(name)
        except Exception as exc:   # an unusable cluster entry is `get clusters`' business
            log.debug("cluster %s skipped: %s", name, exc)
            continue
        if callable(getattr(provider, "instances", None)):
            out.append((name, provider))
    return out


def _each(clusters: "Clusters", call) -> list[Any]:
    out: list[Any] = []
    for name, provider in _machine_providers(clusters):
        try:
            out.extend(call(provider))
        except FoundryError:
            raise
        except Exception as exc:   # the SDK's own error (no credentials, endpoint down): one line, which cluster
            raise ProviderError(f"cluster {name!r}: {type(exc).__name__}: {exc}",
                                hint="check the cluster's credentials and endpoint; `foundry get clusters`") from None
    return out


def list_instances(clusters: "Clusters") -> list[dict[str, Any]]:
    return _each(clusters, lambda provider: provider.instances())


def active_tokens(registry: "Registry") -> set[str]:
    """Launch tokens of resumptions that are active, or whose launcher still runs."""
    keep: set[str] = set()
    for run in registry.list_runs():
        for res in run.resumptions:
            if res.state not in ACTIVE_STATUSES:
                continue
            handle = registry.handle(run.id, res.index) or {}
            token = (handle.get("data") or {}).get("token")
            intent = registry.launch_intent(run.id, res.index) or {}
            if token is None and launcher_alive(intent.get("launcher") or {}):
                token = (intent.get("job") or {}).get("token")
            if token:
                keep.add(token)
    return keep


def clean_instances(clusters: "Clusters", registry: "Registry") -> list[str]:
    keep = active_tokens(registry)
    return _each(clusters, lambda provider: provider.clean_instances(keep))
