"""Local folders as an object store: `file:///abs/path` or a plain path.

Writes go to a temporary name in the destination folder and are renamed into place, so readers
never see a partial object, exactly like the remote stores.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.atomic_files import is_temp_name
from foundry.plugins.errors import ObjectNotFoundError, StorageError
from foundry.plugins.storage import (
    BaseObjectStore,
    Listing,
    ObjectInfo,
    ProgressCallback,
    StorageURL,
    atomic_destination,
    check_key,
    folder_prefix,
)

_COPY_CHUNK = 8 << 20


class FileStore(BaseObjectStore):
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.url = "file://" + str(self.root)

    @classmethod
    def from_url(cls, url: str, options: dict[str, Any] | None = None) -> "FileStore":
        return cls(StorageURL.parse(url).prefix)

    def _path(self, key: str) -> Path:
        check_key(key, self.url)
        return (self.root / key) if key else self.root

    def _missing(self, key: str) -> ObjectNotFoundError:
        return ObjectNotFoundError(f"no such object: {self.child_url(key)}")

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise self._missing(key) from None

    def get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                f.seek(start)
                return f.read(max(0, end - start))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise self._missing(key) from None

    def put(self, key: str, data: bytes) -> None:
        with atomic_destination(self._path(key)) as tmp:
            Path(tmp).write_bytes(data)

    def put_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        self._copy(Path(path), self._path(key), progress)

    def get_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        source = self._path(key)
        if not source.is_file():
            raise self._missing(key)
        self._copy(source, Path(path), progress)

    @staticmethod
    def _copy(source: Path, dest: Path, progress: ProgressCallback | None) -> None:
        try:
            with atomic_destination(dest) as tmp, open(source, "rb") as src, open(tmp, "wb") as out:
                if progress is None:
                    shutil.copyfileobj(src, out, _COPY_CHUNK)
                else:
                    while chunk := src.read(_COPY_CHUNK):
                        out.write(chunk)
                        progress(len(chunk))
        except FileNotFoundError as exc:
            raise StorageError(f"cannot copy {source} to {dest}: {exc.strerror}") from None

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        if not self.root.is_dir():
            return iter(())
        check_key(prefix, self.url)
        found = []
        # Walk only below the deepest folder the prefix names.
        start = self.root / prefix.rpartition("/")[0] if "/" in prefix else self.root
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames.sort()
            for name in filenames:
                if is_temp_name(name):
                    continue  # an in-flight atomic write
                full = Path(dirpath, name)
                key = full.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    st = full.stat()
                    found.append(ObjectInfo(key, st.st_size, None, st.st_mtime))
        return iter(sorted(found, key=lambda o: o.key))

    def list_dir(self, prefix: str = "") -> Listing:
        folder = folder_prefix(prefix)
        prefixes: list[str] = []
        objects: list[ObjectInfo] = []
        try:
            entries = list(os.scandir(self._path(folder)))
        except (FileNotFoundError, NotADirectoryError):
            return Listing([], [])
        for entry in entries:
            if entry.is_dir():
                prefixes.append(f"{folder}{entry.name}/")
            elif entry.is_file() and not is_temp_name(entry.name):
                st = entry.stat()
                objects.append(ObjectInfo(folder + entry.name, st.st_size, None, st.st_mtime))
        return Listing(sorted(prefixes), sorted(objects, key=lambda o: o.key))

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass

    def head(self, key: str) -> ObjectInfo:
        try:
            st = self._path(key).stat()
        except (FileNotFoundError, NotADirectoryError):
            raise self._missing(key) from None
        if not os.path.isfile(self._path(key)):
            raise self._missing(key)
        return ObjectInfo(key, st.st_size, None, st.st_mtime)
