"""A minimal third-party Foundry plugin: a `memfs://bucket/prefix` store kept in a folder, and a command.

The folder is FOUNDRY_SAMPLE_MEMFS_ROOT (default: a `foundry-memfs` folder in the temp dir).
FOUNDRY_SAMPLE_DUPLICATE=SCHEME also registers SCHEME, to show how a clash is reported.
It uses only the public contract in `foundry.plugins`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from foundry.plugins.errors import ObjectNotFoundError
from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.storage import BaseObjectStore, ObjectInfo, StorageURL, atomic_destination, join_key


class MemFSStore(BaseObjectStore):
    def __init__(self, url: str):
        parsed = StorageURL.parse(url)
        base = Path(os.environ.get("FOUNDRY_SAMPLE_MEMFS_ROOT") or Path(tempfile.gettempdir(), "foundry-memfs"))
        self.root = base / parsed.bucket / parsed.prefix
        self.url = url.rstrip("/")

    @classmethod
    def from_url(cls, url, options=None):
        return cls(url)

    def _path(self, key: str) -> Path:
        return self.root / key

    def get(self, key):
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectNotFoundError(f"no such object: {self.child_url(key)}") from None

    def get_range(self, key, start, end):
        return self.get(key)[start:end]

    def put(self, key, data):
        with atomic_destination(self._path(key)) as tmp:
            Path(tmp).write_bytes(data)

    def put_file(self, key, path, progress=None):
        data = Path(path).read_bytes()
        self.put(key, data)
        if progress:
            progress(len(data))

    def list(self, prefix=""):
        found = []
        for path in sorted(self.root.rglob("*")) if self.root.is_dir() else []:
            key = path.relative_to(self.root).as_posix()
            if path.is_file() and key.startswith(prefix) and not path.name.endswith(".part"):
                found.append(ObjectInfo(key, path.stat().st_size))
        return iter(found)

    def delete(self, key):
        self._path(key).unlink(missing_ok=True)

    def head(self, key):
        path = self._path(key)
        if not path.is_file():
            raise ObjectNotFoundError(f"no such object: {self.child_url(key)}")
        return ObjectInfo(join_key("", key), path.stat().st_size)


@hookimpl
def register_storage(register):
    register("memfs", MemFSStore)
    duplicate = os.environ.get("FOUNDRY_SAMPLE_DUPLICATE")
    if duplicate:
        register(duplicate, MemFSStore)


@hookimpl
def register_commands(app):
    @app.command("sample-hello")
    def sample_hello(name: str = "world") -> None:
        """Say hello (a command contributed by foundry-sample-plugin)."""
        print(f"hello {name} from foundry-sample-plugin")
