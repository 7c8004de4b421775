"""A test storage scheme `logged://x/ABS/PATH`: a folder store that logs every download (one line
per get or get_file of a shard in ABS/PATH.log) and can stall mid-download (seconds in ABS/PATH.stall), so tests can
count downloads across processes and SIGKILL a reader while a shard is half written."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from foundry.backends.storage.file import FileStore
from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.storage import StorageURL, atomic_destination


class LoggedStore(FileStore):
    @classmethod
    def from_url(cls, url, options=None):
        return cls("/" + StorageURL.parse(url).prefix)

    def _log(self, key):
        with open(f"{self.root}.log", "a") as log:
            log.write(f"{os.getpid()} {key}\n")

    def get(self, key):  # compressed shards are downloaded into memory
        if key != "index.json":
            self._log(key)
        return super().get(key)

    def get_file(self, key, path, progress=None):
        self._log(key)
        stall = Path(f"{self.root}.stall")
        if key != "index.json" and stall.exists():
            with atomic_destination(path) as tmp, open(self._path(key), "rb") as src, open(tmp, "wb") as out:
                out.write(src.read(100))
                out.flush()
                time.sleep(float(stall.read_text() or 30))
                shutil.copyfileobj(src, out)
            return
        super().get_file(key, path, progress)


class Plugin:
    @hookimpl
    def register_storage(self, register):
        register("logged", LoggedStore)


def register() -> None:
    from foundry.plugins.manager import register_plugin

    register_plugin(Plugin(), name="test-logged-store")


def url(path) -> str:
    return "logged://x" + str(Path(path).absolute())


def downloads(path) -> list[str]:
    log = Path(f"{Path(path).absolute()}.log")
    return [line.split()[1] for line in log.read_text().splitlines()] if log.exists() else []
