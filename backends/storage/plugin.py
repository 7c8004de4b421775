"""Built-in storage schemes, contributed through the same hook third-party plugins use.

Cloud SDKs are imported inside each backend module only when a store of that scheme is built.
"""

from __future__ import annotations

from foundry.plugins.hookspecs import hookimpl

from .file import FileStore


@hookimpl
def register_storage(register):
    register("file", FileStore)
