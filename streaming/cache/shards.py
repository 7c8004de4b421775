"""One stream's shards in one local directory: `ensure(i)` makes shard i's raw file local.

A shard file under its final name is always complete (temporary file, then rename). Downloads are
verified (size always; a hash when asked, or the fastest hash the index carries), re-downloaded
once on a mismatch, then refused with a DataError naming the shard.
"""

from __future__ import annotations

import os
import threading
import itertools
import time
from pathlib import Path
from typing import Any, Sequence

from filelock import FileLock

from foundry.plugins.errors import DataError, FoundryError, StorageError
from foundry.streaming.format.hashing import check_shard_file

FAST_HASHES = ("xxh3_64", "xxh64", "xxh3_128", "xxh128", "xxh32")
_STATE_DIR = ".foundry"
_seq = itertools.count()


def _safe(name: str) -> str:
    return name.replace("/", "__").replace("\\", "__")


class ShardCache:
    """Shards of one stream: `shards[i]` is a ShardInfo; files live in `local`, copies in `remote`."""

    def __init__(
        self,
        local: str | os.PathLike,
        remote: str | None,
        shards: Sequence[Any],
        *,
        validate_hash: str | bool | None = None,
        download_retry: int = 2,
        download_timeout: float | None = 60,
        keep_zip: bool = False,
        name: str = "",
    ):
        self.local = Path(local)
        self.remote = remote  # URL of the stream's remote split (any registered scheme), or None
        self.shards = list(shards)
        self.validate_hash = validate_hash
        self.download_retry = max(0, int(download_retry))
        self.download_timeout = download_timeout
        self.keep_zip = keep_zip
        self.name = name or str(self.local)
        self._ready: set[int] = set()
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()
        self.bytes_downloaded = 0
        self.state_dir = self.local / _STATE_DIR
        self._store_obj: Any = None
        self._store_pid = -1

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.update(_store_obj=None, _store_pid=-1, _locks={}, _guard=None, _ready=set())
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._guard = threading.Lock()

    def store(self) -> Any:
        """The remote ObjectStore, opened once per process (clients are not shared across fork)."""
        if self._store_obj is None or self._store_pid != os.getpid():
            from foundry.plugins.manager import open_store

            self._store_obj, self._store_pid = open_store(self.remote), os.getpid()
        return self._store_obj

    # ---- paths --------------------------------------------------------------------------------
    def raw_path(self, i: int) -> Path:
        return self.local / self.shards[i].raw_basename

    def files(self, i: int) -> list[Any]:
        """The stored files of shard i (data, and meta for csv/json shards)."""
        return list(getattr(self.shards[i], "files", None) or [_DataFile(self.shards[i])])

    def _paths(self, i: int) -> list[Path]:
        out = []
        for f in self.files(i):
            out.append(self.local / f.raw_basename)
            if f.zip_basename:
                out.append(self.local / f.zip_basename)
        return out

    @property
    def evictable(self) -> bool:
        """Only shards that can be downloaded again are ever deleted."""
        if self.remote is None:
            return False
        from foundry.plugins.storage import StorageURL

        url = StorageURL.parse(self.remote)
        return url.scheme != "file" or Path(url.prefix).resolve() != self.local.resolve()

    def present_bytes(self, i: int) -> int:
        total = 0
        for p in self._paths(i):
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                pass
        return total

    def last_used(self, i: int) -> float | None:
        try:
            return self.raw_path(i).stat().st_mtime
        except FileNotFoundError:
            return None

    def _lock(self, i: int) -> FileLock:
        locks = self.state_dir / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        return FileLock(str(locks / (_safe(self.shards[i].raw_basename) + ".lock")))

    def _thread_lock(self, i: int) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(i, threading.Lock())

    # ---- ensure -------------------------------------------------------------------------------
    def ensure(self, i: int, touch: bool = True) -> Path:
        """The raw shard file, downloading it if needed; safe from any thread or process."""
        path = self.raw_path(i)
        if i in self._ready:
            try:
                if touch:
                    os.utime(path)
                return path
            except FileNotFoundError:
                self._ready.discard(i)  # evicted by someone else
        with self._thread_lock(i):
            if i in self._ready and path.exists():
                return path
            if self._complete(i):
                for f in self.files(i):  # on disk already, so not checked on the way in (integrity)
                    check_shard_file(self.local / f.raw_basename, f.raw_hashes or {}, shard=f.raw_basename,
                                     dataset=self.name, requested=self.validate_hash,
                                     stamps=self.state_dir / "verified")
                self._ready.add(i)
                return path
            if self.remote is None:
                raise DataError(
                    f"shard {self.shards[i].raw_basename} is missing from {self.local} and there is no remote",
                    hint="pass remote= so the shard can be downloaded, or restore the local copy",
                )
            with self._lock(i):
                for f in self.files(i):
                    if not self._file_complete(f):
                        self._download(f, self.shards[i].compression)
            self._ready.add(i)
            return path

    def _complete(self, i: int) -> bool:
        return all(self._file_complete(f) for f in self.files(i))

    def _file_complete(self, f: Any) -> bool:
        try:
            size = (self.local / f.raw_basename).stat().st_size
        except FileNotFoundError:
            return False
        if f.raw_bytes is not None and size != f.raw_bytes:
            if self.remote is None:
                raise DataError(f"shard file {f.raw_basename} in {self.local} has {size} bytes, "
                                f"index.json says {f.raw_bytes}", hint="the local copy is corrupt; restore it")
            return False
        return True

    def _hash_algo(self, hashes: dict[str, str]) -> str | None:
        if self.validate_hash is False or not hashes:
            return None
        if isinstance(self.validate_hash, str):
            if self.validate_hash not in hashes:
                raise DataError(f"validate_hash={self.validate_hash!r} but index.json of {self.name} only has "
                                f"{sorted(hashes)}", hint="pick one of those, or validate_hash=None")
            return self.validate_hash
        return next((h for h in FAST_HASHES if h in hashes), None)

    def _download(self, f: Any, compression: str | None) -> None:
        from foundry.streaming.format import decompress_file, verify_file

        tmp_dir = self.state_dir / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        prefix = _safe(f.raw_basename) + "."
        for pattern in (prefix + "*", "." + prefix + "*"):  # left by a killed process; we hold the lock
            for stale in tmp_dir.glob(pattern):
                stale.unlink(missing_ok=True)
        compressed = bool(f.zip_basename)
        key = f.zip_basename or f.raw_basename
        expected_size = f.zip_bytes if compressed else f.raw_bytes
        hashes = dict((f.zip_hashes if compressed else f.raw_hashes) or {})
        algo = self._hash_algo(hashes)
        problem = ""
        for attempt in range(2):  # a corrupt download is fetched once more, then refused
            tmp = tmp_dir / f"{prefix}{os.getpid()}.{next(_seq)}.dl"
            self._fetch(key, tmp)
            size = tmp.stat().st_size
            if expected_size is not None and size != expected_size:
                problem = f"{size} bytes, index.json says {expected_size}"
            elif algo and not verify_file(str(tmp), {algo: hashes[algo]}):
                problem = f"{algo} hash mismatch"
            else:
                problem = ""
                break
            tmp.unlink(missing_ok=True)
        if problem:
            raise DataError(f"shard {key} of {self.name} is corrupt in the store ({problem}, downloaded twice)",
                            hint="rewrite or restore that shard in the remote dataset")
        self.bytes_downloaded += size
        final = self.local / f.raw_basename
        final.parent.mkdir(parents=True, exist_ok=True)
        if compressed:
            raw_tmp = tmp_dir / f"{prefix}{os.getpid()}.{next(_seq)}.raw"
            try:
                decompress_file(compression, str(tmp), str(raw_tmp))
            except FoundryError:
                raise
            except Exception as exc:
                raise DataError(f"shard {key} of {self.name} does not decompress: {exc}") from exc
            if self.keep_zip:
                zp = self.local / f.zip_basename
                zp.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, zp)
            else:
                tmp.unlink(missing_ok=True)
            os.replace(raw_tmp, final)
        else:
            os.replace(tmp, final)

    def _fetch(self, key: str, dest: Path) -> None:
        last: Exception | None = None
        for attempt in range(self.download_retry + 1):
            try:
                self._get_with_timeout(key, dest)
                return
            except (StorageError, OSError, TimeoutError) as exc:
                last = exc
                time.sleep(min(2.0, 0.1 * 2**attempt))
        raise DataError(f"could not download shard {key} of {self.name} after {self.download_retry + 1} attempts: {last}",
                        hint="check the remote URL and credentials, or raise download_retry/download_timeout")

    def _get_with_timeout(self, key: str, dest: Path) -> None:
        if not self.download_timeout:
            self.store().get_file(key, dest)
            return
        box: dict[str, BaseException] = {}

        def run() -> None:
            try:
                self.store().get_file(key, dest)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                box["error"] = exc

        t = threading.Thread(target=run, daemon=True, name=f"foundry-get-{key}")
        t.start()
        t.join(self.download_timeout)
        if t.is_alive():
            raise TimeoutError(f"download of {key} took more than {self.download_timeout}s")
        if "error" in box:
            raise box["error"]

    def evict(self, i: int) -> int:
        """Delete shard i's local files (only if it can be downloaded again); returns bytes freed."""
        if not self.evictable:
            return 0
        freed = 0
        with self._lock(i):
            for p in self._paths(i):
                try:
                    freed += p.stat().st_size
                    p.unlink()
                except FileNotFoundError:
                    pass
        self._ready.discard(i)
        return freed


class _DataFile:
    """A ShardInfo seen as its one data file (for infos without `files`)."""

    def __init__(self, info: Any):
        self.raw_basename, self.raw_bytes, self.raw_hashes = info.raw_basename, info.raw_bytes, info.raw_hashes
        compressed = bool(info.compression)
        self.zip_basename = info.remote_basename if compressed else None
        self.zip_bytes = info.zip_bytes if compressed else None
        self.zip_hashes = info.zip_hashes if compressed else None
