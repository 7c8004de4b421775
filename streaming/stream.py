"""`Stream`: one dataset directory (remote and/or local, optional split) and how much of it an
epoch takes (proportion, repeat or choose), as in mosaicml-streaming."""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path
from typing import Any

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.errors import (ConfigValueError, DataError, DataFileNotFoundError, DataRuntimeError,
                                    DataValueError, FoundryError, ObjectNotFoundError)
from foundry.plugins.storage import StorageURL

INDEX = "index.json"


class Stream:
    def __init__(
        self,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        proportion: float | None = None,
        repeat: float | None = None,
        choose: int | None = None,
        download_retry: int | None = None,
        download_timeout: float | None = None,
        validate_hash: str | bool | None = None,
        keep_zip: bool | None = None,
    ):
        if remote is None and local is None:
            raise ConfigValueError("a stream needs remote=, local= or both")
        if sum(x is not None for x in (proportion, repeat, choose)) > 1:
            raise ConfigValueError("a stream takes at most one of proportion, repeat and choose")
        self.remote = None if remote is None else str(remote)
        self.local = None if local is None else str(local)
        self.split = split
        self.proportion = proportion
        self.repeat = repeat
        self.choose = choose
        self.download_retry = download_retry
        self.download_timeout = download_timeout
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip
        self.index_fetch_s: float | None = None  # how long index.json took to come from the remote

    def __repr__(self) -> str:
        return f"Stream(remote={self.remote!r}, local={self.local!r}, split={self.split!r})"

    @property
    def remote_url(self) -> str | None:
        """The remote split as a URL, or None."""
        if self.remote is None:
            return None
        url = StorageURL.parse(self.remote)
        base = url.join("")
        return StorageURL.parse(base).join(self.split) if self.split else base

    @property
    def local_dir(self) -> Path:
        """The local split folder; a per-remote folder under the temp dir when local= is not given."""
        if self.local is not None:
            root = Path(self.local).expanduser()
        else:
            digest = hashlib.sha1(self.remote_url.encode()).hexdigest()[:16]
            root = Path(tempfile.gettempdir()) / "foundry-streaming" / digest
            return root
        return root / self.split if self.split else root

    def load_index(self) -> list[Any]:
        """Fetch index.json from the remote (into the local folder, atomically) and parse it."""
        from foundry.streaming.format import load_index

        local_index = self.local_dir / INDEX
        if self.remote_url is not None and not self._remote_is_local():
            from foundry.plugins.manager import open_store

            try:
                store = open_store(self.remote_url)
                getattr(store, "client", None)  # a cloud SDK's client is made on first use: not timed
                started = time.monotonic()
                data = store.get(INDEX)
                self.index_fetch_s = time.monotonic() - started  # a connection and a GET: ~2 round trips
            except FoundryError as exc:
                if local_index.exists():
                    data = local_index.read_bytes()
                else:  # mosaic lets the download's FileNotFoundError through
                    missing = isinstance(exc, ObjectNotFoundError)
                    raise (DataFileNotFoundError if missing else DataError)(
                        f"cannot read {self.remote_url}/{INDEX}: {exc.message}",
                        hint=exc.hint or "check the remote URL and credentials") from exc
            else:
                self._write_if_changed(local_index, data)
        elif local_index.exists():
            data = local_index.read_bytes()
        else:
            where = self.remote_url or str(self.local_dir)
            raise DataRuntimeError(f"no {INDEX} in {where}", hint="point remote=/local= at a dataset written by MDSWriter")
        try:
            return list(load_index(data, self.remote_url or str(self.local_dir)))
        except FoundryError:
            raise
        except Exception as exc:
            raise DataValueError(f"malformed {INDEX} in {self.remote_url or self.local_dir}: {exc}") from exc

    def _remote_is_local(self) -> bool:
        url = StorageURL.parse(self.remote_url)
        return url.scheme == "file" and Path(url.prefix).resolve() == self.local_dir.resolve()

    @staticmethod
    def _write_if_changed(path: Path, data: bytes) -> None:
        try:
            if path.read_bytes() == data:
                return
        except FileNotFoundError:
            pass
        atomic_write(path, data)


class StreamRegistry:
    """mosaicml-streaming's `streams_registry`: `StreamingDataset(stream_name=NAME, stream_config={...})`
    builds its one stream with the class registered under NAME (default "stream": Stream)."""

    def __init__(self) -> None:
        self._classes: dict[str, type] = {}

    def register(self, name: str, *, func: type | None = None) -> Any:
        """`register("mine", func=MyStream)`, or `@streams_registry.register("mine")` on the class."""
        if func is None:
            return lambda cls: self.register(name, func=cls)
        self._classes[name] = func
        return func

    def get(self, name: str) -> type:
        if name not in self._classes:
            raise ConfigValueError(f"no stream class registered as {name!r}",
                                   hint=f"register it with streams_registry.register({name!r}, func=YourStream); "
                                        f"registered: {', '.join(sorted(self._classes))}")
        return self._classes[name]

    def get_all(self) -> dict[str, type]:
        return dict(self._classes)


streams_registry = StreamRegistry()
streams_registry.register("stream", func=Stream)
