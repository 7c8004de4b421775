"""One stream's shards in one local directory: `ensure(i)` makes shard i's raw file local.

A shard file under its final name is always complete (temporary file, then rename). Downloads are
verified (size always; a hash when asked, or the fastest hash the index carries), re-downloaded
once on a mismatch, then refused with a DataError naming the shard.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import mmap
import os
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from filelock import FileLock, Timeout

from foundry.plugins.errors import (BucketNotFoundError, DataError, DataFileNotFoundError, DataRuntimeError, DataValueError,
                                    FoundryError, ObjectNotFoundError, StorageError)
from foundry.plugins.retry import RetryPolicy, call_with_retries
from foundry.streaming.format.block_digests import BlockDigests, digests_basename
from foundry.streaming.format.ranged_reader import reads as ranged_reads
from foundry.streaming.format.hashing import check_shard_file, hash_bytes, pick_hash, stamp_as_checked, verify_file

from . import decompress_slot
from .timed_call import call_with_timeout

_STATE_DIR = ".foundry"
_seq = itertools.count()
# How often a process waiting for another's shard looks again: a decompression takes tens of ms.
_LOCK_POLL_S = 0.005
# index.json taking this long (a connection and a GET) means a store across a WAN (40 ms RTT: ~85
# ms); on this machine's SeaweedFS it takes 3-10 ms. Measured on loopback with early reads: cold
# epoch 59k -> 23k samples/s (2 cores, shared with the downloads).
FAR_STORE_INDEX_S = 0.04
# A smaller shard comes in about the round trips its early reads would take: it is read whole.
MIN_EARLY_SHARD_BYTES = 8 << 20
# A shard's block digests are 16 bytes per 16 KiB: 4 MiB of them describe a 4 GiB shard.
_MAX_DIGESTS_BYTES = 8 << 20


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
        index_fetch_s: float | None = None,
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
        self._locks_pid = os.getpid()
        self.bytes_downloaded = 0
        self.state_dir = self.local / _STATE_DIR
        self._store_obj: Any = None
        self._store_pid = -1
        self._without_digests = False
        # ranged reads before a shard is whole pay off across a WAN, where index.json took round
        # trips of tens of ms; from a store a few ms away the shards come in a fraction of a second,
        # and many small reads beside their downloads cost more CPU and link than they give
        self._far_store = index_fetch_s is not None and index_fetch_s >= FAR_STORE_INDEX_S

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.update(_store_obj=None, _store_pid=-1, _locks={}, _guard=None, _ready=set())
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._guard = threading.Lock()
        self._locks_pid = os.getpid()

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

    @property
    def needs_work(self) -> bool:
        """Some shard may have to be downloaded or decompressed before it can be read."""
        return self.evictable or any(s.compression for s in self.shards)

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
        return FileLock(str(locks / (_safe(self.shards[i].raw_basename) + ".lock")), poll_interval=_LOCK_POLL_S)

    @contextlib.contextmanager
    def _claim(self, i: int) -> Iterator[None]:
        """Hold shard i's file lock. A shard to decompress from a local copy is claimed with this
        process's decompression slot held, and only if no other process has it: so the processes
        of a node (DataLoader workers, ranks) decompress different shards at once, instead of one
        taking every shard's lock and decompressing them in turn while the others wait."""
        lock = self._lock(i)
        if self._local_zips(i):
            with decompress_slot.SLOT:
                if _try_file_lock(lock):
                    try:
                        yield
                    finally:
                        lock.release()
                    return
            # another process makes it: wait below, without our slot
        _take(lock)
        try:
            yield
        finally:
            lock.release()

    def _local_zips(self, i: int) -> bool:
        files = [f for f in self.files(i) if f.zip_basename]
        return bool(files) and all((self.local / f.zip_basename).exists() for f in files)

    def _thread_lock(self, i: int) -> threading.Lock:
        if self._locks_pid != os.getpid():  # forked (a DataLoader worker): the parent's locks may be held
            self._guard, self._locks, self._locks_pid = threading.Lock(), {}, os.getpid()
        with self._guard:
            return self._locks.setdefault(i, threading.Lock())

    # ---- ensure -------------------------------------------------------------------------------
    def ensure(self, i: int, touch: bool = True) -> Path:
        """The raw shard file, downloading it if needed; safe from any thread or process."""
        path = self.raw_path(i)
        if i in self._ready:
            try:
                if touch and self.remote is not None:  # recency for eviction; never the user's own files
                    os.utime(path)
                return path
            except FileNotFoundError:
                self._ready.discard(i)  # evicted by someone else
        lock = self._thread_lock(i)
        _take(lock)
        try:
            if i in self._ready and path.exists():
                return path
            if self._complete(i):
                for f in self.files(i):  # on disk already, so not checked on the way in (integrity)
                    check_shard_file(self.local / f.raw_basename, f.raw_hashes or {}, shard=f.raw_basename,
                                     dataset=self.name, requested=self.validate_hash,
                                     stamps=self.state_dir / "verified")
                self._ready.add(i)
                return path
            with self._claim(i):
                for f in self.files(i):
                    if not self._file_complete(f):
                        self._make_local(f, self.shards[i].compression)
            self._ready.add(i)
            return path
        finally:
            lock.release()

    def unready_local_zip(self, i: int) -> Path | None:
        """Shard i's compressed copy in the local folder, checked, while the shard is not ready
        yet: an MDS shard's samples can be read from it (a seekable zstd file) before the whole
        shard is decompressed. None when the shard is ready, has no good local copy, or several files."""
        files = self.files(i)
        if i in self._ready or len(files) != 1 or not files[0].zip_basename:
            return None
        try:
            return None if self._file_complete(files[0]) else self._good_local_zip(files[0])
        except DataError:
            return None  # the reader's own ensure() raises it, with the shard's name

    def early_ranges(self, i: int) -> tuple[Callable[[int, int], bytes], int, Future | None] | None:
        """How to read shard i's blocks from a remote store while the shard is not local yet
        (format.ranged_reader): `(fetch(start, end), size, digests)`. The digests are a Future of
        the block digests written beside the shard (None in it when there are none that describe
        it), or None when the shard is not checked at all. None for a shard that is local or
        ready, compressed, of several files, small (under MIN_EARLY_SHARD_BYTES), or in a store a
        few ms away (index.json came from it at once, and so will the shard): it is read once
        whole and checked."""
        files = self.files(i)
        if (i in self._ready or not self._far_store or len(files) != 1 or files[0].zip_basename
                or self.shards[i].format != "mds" or (files[0].raw_bytes or 0) < MIN_EARLY_SHARD_BYTES):
            return None
        f = files[0]
        if self._file_complete(f):
            return None
        digests = None
        if self._hash_algo(dict(f.raw_hashes or {})) is not None:
            if self._without_digests:
                return None
            digests = ranged_reads().submit(self._block_digests, f, self.shards[i])  # while the header is read
        key = f.raw_basename

        def fetch(start: int, end: int) -> bytes:
            data = self.store().get_range(key, start, end)
            self.bytes_downloaded += len(data)  # not kept in the cache, but downloaded all the same
            return data

        return fetch, f.raw_bytes, digests

    @property
    def far_store(self) -> bool:
        """The remote is a store across a WAN (index.json came slowly from it)."""
        return self._far_store

    def _block_digests(self, f: Any, info: Any = None) -> BlockDigests | None:
        """f's block digests, if they describe f as index.json does: where index.json says they are
        (the dataset's digest file), or, for a dataset written before that, in a file beside f."""
        if self._without_digests:
            return None
        where = getattr(info, "digests", None)
        key, start, end = ((where[0], where[1], where[1] + where[2]) if where is not None
                           else (digests_basename(f.raw_basename), 0, _MAX_DIGESTS_BYTES))
        try:
            # a ranged read: not in line behind the downloads (`get` waits in the store's request gate)
            data = self.store().get_range(key, start, end)
        except ObjectNotFoundError:
            self._without_digests = True  # written by mosaic, or without them: so are its other shards
            return None
        except (StorageError, OSError):
            return None
        found = BlockDigests.parse(data) if len(data) < _MAX_DIGESTS_BYTES or where is not None else None
        return found if found is not None and found.describes(f.raw_bytes, f.raw_hashes) else None

    def is_ready(self, i: int) -> bool:
        """Shard i is known (to this process) to be whole under its final name."""
        return i in self._ready

    def _complete(self, i: int) -> bool:
        return all(self._file_complete(f) for f in self.files(i))

    def _file_complete(self, f: Any) -> bool:
        try:
            size = (self.local / f.raw_basename).stat().st_size
        except FileNotFoundError:
            return False
        if f.raw_bytes is not None and size != f.raw_bytes:
            if self.remote is None:
                raise DataValueError(f"shard file {f.raw_basename} in {self.local} has {size} bytes, "
                                f"index.json says {f.raw_bytes}", hint="the local copy is corrupt; restore it")
            return False
        return True

    def _hash_algo(self, hashes: dict[str, str]) -> str | None:
        try:
            return pick_hash(hashes, self.validate_hash)
        except DataError as exc:
            raise DataValueError(f"{exc.message} (dataset {self.name})", hint=exc.hint) from None

    def _make_local(self, f: Any, compression: str | None) -> None:
        """Write f's raw file under its final name (the caller holds the shard's lock).

        A compressed file is taken from the local folder when a good copy is there (a dataset
        opened with local= only), else downloaded into memory; either way it is decompressed frame
        by frame straight into a temporary file of the cache, then renamed into place."""
        tmp_dir = self.state_dir / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        prefix = _safe(f.raw_basename) + "."
        # Not plugins.atomic_files: its temp sits beside the target, where a SIGKILL would leave it for
        # good; the cache's temps live in one folder and are swept here, by name, under the shard lock.
        for pattern in (prefix + "*", "." + prefix + "*"):  # left by a killed process; we hold the lock
            for stale in tmp_dir.glob(pattern):
                stale.unlink(missing_ok=True)
        final = self.local / f.raw_basename
        final.parent.mkdir(parents=True, exist_ok=True)
        if f.zip_basename:
            local_zip = self._good_local_zip(f)
            if local_zip is not None:
                with open(local_zip, "rb") as fin, mmap.mmap(fin.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    self._decompress_into(final, f, compression, mapped, tmp_dir / f"{prefix}{os.getpid()}.{next(_seq)}.raw")
                return
        if self.remote is None:
            raise DataFileNotFoundError(f"shard file {f.raw_basename} is missing from {self.local} and there is no remote",
                            hint="pass remote= so the shard can be downloaded, or restore the local copy")
        if not f.zip_basename:
            tmp = tmp_dir / f"{prefix}{os.getpid()}.{next(_seq)}.dl"
            size = self._download_checked(f, lambda: self._fetch(f.raw_basename, tmp), lambda: tmp.stat().st_size,
                                          lambda algo, digest: verify_file(str(tmp), {algo: digest}),
                                          lambda: tmp.unlink(missing_ok=True))
            os.replace(tmp, final)
            self.bytes_downloaded += size  # after the rename: an eviction triggered by it sees the file
            return
        box: list[bytes] = []
        size = self._download_checked(f, lambda: box.append(self._fetch(f.zip_basename)), lambda: len(box[-1]),
                                      lambda algo, digest: hash_bytes(algo, box[-1]) == digest, box.clear)
        data = box[-1]
        if self.keep_zip:
            zp = self.local / f.zip_basename
            zp.parent.mkdir(parents=True, exist_ok=True)
            ztmp = tmp_dir / f"{prefix}{os.getpid()}.{next(_seq)}.zip"
            ztmp.write_bytes(data)
            os.replace(ztmp, zp)
        self._decompress_into(final, f, compression, data, tmp_dir / f"{prefix}{os.getpid()}.{next(_seq)}.raw")
        self.bytes_downloaded += size

    def _download_checked(self, f: Any, fetch: Callable[[], Any], size: Callable[[], int],
                          hash_ok: Callable[[str, str], bool], discard: Callable[[], Any]) -> int:
        """Fetch the stored file of `f`; a corrupt download is fetched once more, then refused.
        Returns the bytes downloaded."""
        compressed = bool(f.zip_basename)
        key = f.zip_basename or f.raw_basename
        expected_size = f.zip_bytes if compressed else f.raw_bytes
        hashes = dict((f.zip_hashes if compressed else f.raw_hashes) or {})
        algo = self._hash_algo(hashes)
        problem = ""
        for _attempt in range(2):
            fetch()
            got = size()
            if expected_size is not None and got != expected_size:
                problem = f"{got} bytes, index.json says {expected_size}"
            elif algo and not hash_ok(algo, hashes[algo]):
                problem = f"{algo} hash mismatch"
            else:
                return got
            discard()
        raise DataValueError(f"shard {key} of {self.name} is corrupt in the store ({problem}, downloaded twice)",
                        hint="rewrite or restore that shard in the remote dataset")

    def _good_local_zip(self, f: Any) -> Path | None:
        """The compressed copy in the local folder if it is whole, else None (or an error when it
        cannot be downloaded again)."""
        path = self.local / f.zip_basename
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return None
        algo = self._hash_algo(dict(f.zip_hashes or {}))
        if f.zip_bytes is not None and size != f.zip_bytes:
            problem = f"has {size} bytes, index.json says {f.zip_bytes}"
        elif algo and not verify_file(str(path), {algo: f.zip_hashes[algo]}):
            problem = f"fails its {algo} hash"
        else:
            return path
        if self.remote is None or not self.evictable:
            raise DataValueError(f"shard file {f.zip_basename} in {self.local} {problem}",
                            hint="the local copy is corrupt; restore it")
        return None

    def _decompress_into(self, final: Path, f: Any, compression: str | None, data: Any, tmp: Path) -> None:
        """Decompress `data` (bytes, or a mapped local file) into `tmp`, check it, rename it to `final`."""
        from foundry.streaming.format import decompress_stream

        try:
            try:
                with decompress_slot.SLOT, open(tmp, "wb") as fout:
                    if f.raw_bytes:
                        _reserve(fout.fileno(), f.raw_bytes)
                    decompress_stream(compression or "", memoryview(data), fout)
            except FoundryError as exc:
                raise DataError(f"shard {f.zip_basename} of {self.name} does not decompress: {exc.message}",
                                hint="rewrite or restore that shard") from exc
            size = tmp.stat().st_size
            if f.raw_bytes is not None and size != f.raw_bytes:
                raise DataError(f"shard {f.zip_basename} of {self.name} decompresses to {size} bytes, "
                                f"index.json says {f.raw_bytes}", hint="rewrite or restore that shard")
            # made from a checked compressed file: the node's other processes need not hash it again
            stamp_as_checked(tmp, f.raw_hashes or {}, shard=f.raw_basename, requested=self.validate_hash,
                             stamps=self.state_dir / "verified")
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

    def _fetch(self, key: str, dest: Path | None = None) -> Any:
        """Download `key` to `dest`, or into memory (returned) without one. The store retries its own
        transient errors; this adds mosaic's `download_retry` for what outlasts them (a timeout, a
        connection that kept failing), through the one shared policy. A missing object is not retried."""
        def give_up(exc: BaseException, attempts: int) -> BaseException:
            missing = isinstance(exc, (ObjectNotFoundError, FileNotFoundError))  # mosaic: FileNotFoundError
            return (DataFileNotFoundError if missing else DataRuntimeError)(f"could not download shard {key} of {self.name} after {attempts} attempts: {exc}",
                             hint="check the remote URL and credentials, or raise download_retry/download_timeout")

        policy = RetryPolicy(attempts=self.download_retry + 1, base_delay=0.1, max_delay=2.0, deadline=None)
        try:
            return call_with_retries(lambda: self._get_with_timeout(key, dest), policy=policy,
                                     is_transient=_worth_another_download, on_give_up=give_up)
        except (StorageError, OSError) as exc:   # not worth another try: missing, or not ours to read
            raise give_up(exc, 1) from exc

    def _get_with_timeout(self, key: str, dest: Path | None) -> bytes | None:
        def get() -> bytes | None:
            if dest is None:
                return self.store().get(key)
            self.store().get_file(key, dest)
            return None

        return call_with_timeout(get, self.download_timeout, f"download of {key}")

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


def _try_file_lock(lock: FileLock) -> bool:
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return False
    return True


def _take(lock: threading.Lock | FileLock) -> None:
    """Take a shard's thread or file lock. While another thread or process holds it (it makes the
    shard), this thread waits: a reader's core is lent to decompression meanwhile (decompress_slot)."""
    taken = _try_file_lock(lock) if isinstance(lock, FileLock) else lock.acquire(blocking=False)
    if not taken:
        with decompress_slot.SLOT.reader_blocked():
            lock.acquire()


def _reserve(fd: int, size: int) -> None:
    """Allocate a file's blocks before it is written, its size unchanged (Linux fallocate with
    FALLOC_FL_KEEP_SIZE). Written page by page, ext4 reserves blocks for each page as it comes
    (delayed allocation): 64 MB took 12.5 ms to write on this machine, 8.5 ms allocated first,
    and the local zstd epoch's median went 236-284k -> 309-315k samples/s (A/B, 3 rounds of 6-8
    epochs; its slow writes of 80-200 ms came less often). Not posix_fallocate: where the file
    system cannot allocate (NFSv3) glibc would write the whole size in zeros first. Any failure:
    written as before."""
    if _fallocate is not None:
        _fallocate(fd, _FALLOC_FL_KEEP_SIZE, 0, size)  # its result does not matter: the writes decide


def _libc_fallocate() -> Any:
    try:
        call = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):  # not Linux
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    call.restype = ctypes.c_int
    return call


_FALLOC_FL_KEEP_SIZE = 1
_fallocate = _libc_fallocate()


def _worth_another_download(exc: BaseException) -> bool:
    if isinstance(exc, (ObjectNotFoundError, BucketNotFoundError, FileNotFoundError, PermissionError)):
        return False
    return isinstance(exc, (StorageError, OSError, TimeoutError))
