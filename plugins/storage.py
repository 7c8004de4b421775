"""The ObjectStore contract: what a storage backend implements, and what every layer calls.

A store is rooted at a URL (`s3://bucket/prefix`, `gs://bucket`, `file:///data`, ...). Keys are
relative to that root and use "/" separators. `open_store(url)` in `foundry.plugins.manager`
finds the class registered for the URL's scheme and builds it with `from_url`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, runtime_checkable
from urllib.parse import urlsplit

from .atomic_files import atomic_path
from .errors import ConfigError, ObjectNotFoundError

# Called with the number of bytes just transferred (an increment, not a total).
ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str | None = None
    modified: float | None = None  # seconds since the epoch


@dataclass(frozen=True)
class Listing:
    """One level below a prefix, as `ls` shows it: sub-folders ("name/", relative to the store
    root like keys) and the objects directly inside, each sorted."""

    prefixes: list[str]
    objects: list[ObjectInfo]


@runtime_checkable
class ObjectStore(Protocol):
    """Operations on the objects below one root URL."""

    url: str

    @classmethod
    def from_url(cls, url: str, options: dict[str, Any] | None = None) -> "ObjectStore": ...

    def get(self, key: str) -> bytes: ...
    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object."""
    def put(self, key: str, data: bytes) -> None: ...
    def put_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        """Upload a local file; large files go in parallel parts with bounded memory."""
    def get_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        """Download to `path` atomically: a crash never leaves a partial file under that name."""
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects whose key starts with `prefix`, keys relative to the store root, sorted."""
    def list_dir(self, prefix: str = "") -> Listing:
        """One level below the folder `prefix` ("" or "a/b/"): what `foundry ls` shows. Stores with
        a native delimiter listing use it, so a folder never pages the whole prefix."""
    def delete(self, key: str) -> None:
        """Delete one object; deleting a missing key is not an error."""
    def head(self, key: str) -> ObjectInfo:
        """Size and metadata; raises ObjectNotFoundError when the key does not exist."""
    def exists(self, key: str) -> bool: ...
    def child_url(self, key: str) -> str: ...


@dataclass(frozen=True)
class StorageURL:
    """A parsed storage URL: scheme, bucket (netloc, may be empty for file) and path prefix."""

    scheme: str
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> "StorageURL":
        if not isinstance(url, str) or not url.strip():
            raise ConfigError("empty storage URL", hint="use a path or a URL like s3://bucket/prefix")
        if "://" not in url:
            return cls("file", "", str(Path(url).expanduser().absolute()))
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if not scheme:
            raise ConfigError(f"malformed storage URL {url!r}", hint="expected SCHEME://BUCKET/KEY")
        if scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise ConfigError(f"malformed file URL {url!r}", hint="use file:///absolute/path")
            return cls("file", "", parts.path or "/")
        if not parts.netloc:
            raise ConfigError(f"storage URL {url!r} has no bucket", hint=f"expected {scheme}://BUCKET/KEY")
        return cls(scheme, parts.netloc, parts.path.strip("/"))

    def join(self, key: str) -> str:
        key = key.strip("/")
        if self.scheme == "file":
            return "file://" + (os.path.join(self.prefix, key) if key else self.prefix)
        path = "/".join(p for p in (self.prefix, key) if p)
        return f"{self.scheme}://{self.bucket}/{path}" if path else f"{self.scheme}://{self.bucket}"


def check_key(key: str, root: str) -> str:
    """`key` itself when it names an object below the store root; a ConfigError when it could escape.

    Stores call this on every key (names can come from data: index.json, a remote listing), so a
    leading "/" or a ".." segment is refused rather than quietly rewritten.
    """
    if not isinstance(key, str) or "\x00" in key or key.startswith("/") or ".." in key.split("/"):
        raise ConfigError(f"key {key!r} escapes the store root {root}",
                          hint="keys are relative paths, without '..' segments or a leading '/'")
    return key


def folder_prefix(prefix: str) -> str:
    """A folder prefix for a one-level listing: "" for the root, else ending in exactly one "/"."""
    prefix = prefix.strip("/")
    return prefix + "/" if prefix else ""


def fold_listing(objects: Iterable[ObjectInfo], prefix: str) -> Listing:
    """A one-level Listing from a recursive listing of the folder `prefix` (keys start with it)."""
    prefixes: set[str] = set()
    direct: list[ObjectInfo] = []
    for info in objects:
        rest = info.key[len(prefix):]
        if "/" in rest:
            prefixes.add(prefix + rest.split("/", 1)[0] + "/")
        else:
            direct.append(info)
    return Listing(sorted(prefixes), sorted(direct, key=lambda o: o.key))


def list_one_level(store: "ObjectStore", prefix: str = "") -> Listing:
    """`store.list_dir(prefix)`, or the fold of its recursive listing for a third-party store that
    predates list_dir and does not derive from BaseObjectStore."""
    native = getattr(store, "list_dir", None)
    if native is not None:
        return native(prefix)
    return fold_listing(store.list(folder_prefix(prefix)), folder_prefix(prefix))


def join_key(prefix: str, key: str) -> str:
    """Join a root prefix and a relative key with exactly one "/" between them."""
    prefix, key = prefix.strip("/"), key.lstrip("/")
    return f"{prefix}/{key}" if prefix and key else prefix or key


def split_parent(url: str) -> tuple[str, str]:
    """Split `scheme://bucket/dir/name` into (`scheme://bucket/dir`, `name`)."""
    head, _, name = url.rstrip("/").rpartition("/")
    if not name or head.endswith(":/") or head.endswith(":"):
        raise ConfigError(f"{url!r} names no object", hint="give the URL of a file, e.g. s3://bucket/dir/file")
    return head, name


class BaseObjectStore:
    """Shared behaviour for stores: `exists` from `head`, atomic `get_file`, `child_url`.

    Subclasses implement get/get_range/put/put_file/list/delete/head and may override `get_file`
    with a parallel download that writes into the temporary path given by `atomic_destination`.
    """

    url: str

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
            return True
        except ObjectNotFoundError:
            return False

    @functools.cached_property
    def _root(self) -> StorageURL:
        return StorageURL.parse(self.url)  # parsed once: child_url runs per shard and per file

    def child_url(self, key: str) -> str:
        return self._root.join(key)

    def list_dir(self, prefix: str = "") -> Listing:
        """Fallback for stores without a delimiter listing: fold the recursive listing."""
        return fold_listing(self.list(folder_prefix(prefix)), folder_prefix(prefix))

    def get_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        with atomic_destination(path) as tmp:
            data = self.get(key)
            Path(tmp).write_bytes(data)
            if progress:
                progress(len(data))


# Kept under its old name for backends and third-party stores: the write-then-rename of a download.
atomic_destination = atomic_path
