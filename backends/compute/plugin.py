"""Built-in compute providers, contributed through the same hook third-party plugins use.

Each provider module is registered with one `register(...)` line; heavy SDKs are imported inside
the provider modules only when used.
"""

from __future__ import annotations

from foundry.plugins.hookspecs import hookimpl


@hookimpl
def register_compute(register):
    from .local import LocalProvider

    register("local", LocalProvider)
