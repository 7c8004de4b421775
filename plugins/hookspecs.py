"""The hooks a Foundry plugin may implement (pluggy project name `foundry`).

Contribution hooks take a `register` callback so the core can name, de-duplicate and attribute
what each plugin contributes. Built-in backends use these same hooks. Every hook here has a
section in docs/plugins.md and a test in tests/plugins/test_hookspecs.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:  # typing only
    from .compute import ComputeProvider
    from .secrets import SecretType
    from .storage import ObjectStore

hookspec = pluggy.HookspecMarker("foundry")
hookimpl = pluggy.HookimplMarker("foundry")


@hookspec
def register_storage(register: Callable[[str, "type[ObjectStore]"], None]) -> None:
    """Contribute object stores, one per URL scheme.

    Called once, when the plugin manager first builds the storage registry. Call
    `register(scheme, store_class)` for each scheme (lowercase, without "://"); `store_class` is
    built with `store_class.from_url(url, options)` and implements `foundry.plugins.storage.ObjectStore`.
    A scheme registered by two plugins is an error naming both. Return value is ignored.
    """


@hookspec
def register_compute(register: Callable[[str, "type[ComputeProvider]"], None]) -> None:
    """Contribute compute providers, one per provider name.

    Called once, when the provider registry is first built. Call `register(name, provider_class)`;
    the class implements `foundry.plugins.compute.ComputeProvider` and is built with
    `provider_class(cluster_config)`. A name registered twice is an error naming both plugins.
    Return value is ignored.
    """


@hookspec
def register_secret_types(register: Callable[[str, "SecretType"], None]) -> None:
    """Contribute credential kinds (s3, gcp, oci, env, kubeconfig, ssh, ...).

    Called once, when the secret-type registry is first built. Call `register(kind, secret_type)`;
    `secret_type` describes the fields the kind takes and how it is injected into a run (see
    `foundry.plugins.secrets.SecretType`). A kind registered twice is an error naming both plugins.
    Return value is ignored.
    """


@hookspec
def register_commands(app: Any) -> None:  # a typer.Typer (plugins/ never imports typer)
    """Add commands to the `foundry` CLI.

    Called once, when the CLI is assembled, with the root `typer.Typer` application. Add commands
    or sub-applications with `app.command()` / `app.add_typer()`. Return value is ignored.
    """


@hookspec
def on_run_event(run_name: str, event: str, details: dict) -> None:
    """Observe the lifecycle of runs.

    Called by the control plane after it records an event for a run: `event` is one of
    "created", "launched", "running", "stopping", "stopped", "paused", "completed", "failed",
    "lost" (a system failure: the watchdog may retry), "retried", "resumed", "deleted"; `details` holds the resumption index, cluster and exit reason where
    known (never secret values). Exceptions raised by a plugin are logged and ignored. Return
    value is ignored.
    """
