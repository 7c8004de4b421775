"""Shard hashes: hashlib's algorithms and xxhash's, as hexdigests (mosaicml-streaming's names)."""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
from contextlib import contextmanager
from typing import Any, BinaryIO, Callable, Iterator

import xxhash  # with the module, not on the first shard check (~1 ms of a fresh process's first sample)

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.errors import ConfigError, DataError

_WINDOW = 16 << 20  # hashed straight from the page cache, one mapped window at a time
XXHASH_ALGOS = ("xxh32", "xxh64", "xxh3_64", "xxh3_128", "xxh128")


def _constructor(algo: str) -> Callable[[], Any]:
    if algo in XXHASH_ALGOS:
        return getattr(xxhash, algo)
    if algo in hashlib.algorithms_available and hasattr(hashlib, algo) and not algo.startswith("shake_"):
        return getattr(hashlib, algo)
    raise ConfigError(f"unknown hash algorithm {algo!r}", hint="use e.g. sha1, md5, xxh64, xxh3_64")


def is_hash(algo: str) -> bool:
    try:
        _constructor(algo)
        return True
    except ConfigError:
        return False


def hash_algorithms() -> list[str]:
    names = {a for a in hashlib.algorithms_available if hasattr(hashlib, a) and not a.startswith("shake_")}
    return sorted(names | set(XXHASH_ALGOS))


def new_hashers(algos: list[str] | tuple[str, ...]) -> dict[str, Any]:
    return {algo: _constructor(algo)() for algo in algos}


def hash_bytes(algo: str, data: bytes) -> str:
    return _constructor(algo)(data).hexdigest()


def hash_file(path: str | os.PathLike, algos: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Hexdigests of the file for each algorithm, in one streaming pass."""
    if not algos:
        return {}
    with open(path, "rb") as f:
        return hash_open_file(f, algos)


def hash_open_file(f: BinaryIO, algos: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`hash_file` of an open file."""
    hashers = new_hashers(algos)
    size = os.fstat(f.fileno()).st_size
    if hashers and size:  # mapped, not read: no copy of the file through Python buffers (2-4x faster)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            for begin in range(0, size, _WINDOW):
                with memoryview(mapped)[begin:begin + _WINDOW] as window:
                    for h in hashers.values():
                        h.update(window)
                if hasattr(mapped, "madvise"):  # RSS stays one window
                    mapped.madvise(mmap.MADV_DONTNEED, begin, min(_WINDOW, size - begin))
    return {algo: h.hexdigest() for algo, h in hashers.items()}


def verify_file(path: str | os.PathLike, expected: dict[str, str]) -> bool:
    """True when every expected digest matches the file (vacuously true for no digests)."""
    known = {a: d for a, d in expected.items() if is_hash(a)}
    if not known:
        return True
    return hash_file(path, list(known)) == known


# Fastest first: what a reader checks when the caller did not name an algorithm.
FAST_HASHES = ("xxh3_64", "xxh64", "xxh3_128", "xxh128", "xxh32")


def pick_hash(hashes: dict[str, str], requested: str | bool | None = None) -> str | None:
    """The algorithm to check: `requested` if a name, none if False, else the fastest recorded."""
    if requested is False or not hashes:
        return None
    if isinstance(requested, str):
        if requested not in hashes:
            raise DataError(f"validate_hash={requested!r} but index.json only records {sorted(hashes)}",
                            hint="pick one of those, or validate_hash=None")
        return requested
    return next((h for h in FAST_HASHES if h in hashes), None)


def check_shard_file(path: str | os.PathLike, hashes: dict[str, str], *, shard: str, dataset: str,
                     requested: str | bool | None = None, stamps: str | os.PathLike | None = None) -> None:
    """Raise a DataError naming the shard unless the local file matches its recorded hash.

    Called where a shard becomes visible to readers without having been checked on the way in (a
    file already on disk). With `stamps` (a folder), a match is remembered per file, keyed by inode,
    size and mtime, so the other processes of a node skip the work; a rewritten or replaced file is
    checked again (bit rot under an unchanged mtime is left to `foundry dataset verify`).
    """
    algo = pick_hash(hashes, requested)
    if algo is None:
        return
    stamp_path = _stamp_path(stamps, shard) if stamps is not None else None
    with open(path, "rb") as f:
        stamp = _stamp(algo, hashes[algo], os.fstat(f.fileno()))
        if _stamped(stamp_path, stamp):
            return
        with _one_checker(f, stamp_path is not None):
            if _stamped(stamp_path, stamp):  # checked by another process while we waited
                return
            got = hash_open_file(f, [algo])[algo]
            if got != hashes[algo]:
                raise DataError(f"shard {shard} of {dataset} is corrupt ({algo} {got}, index.json says {hashes[algo]})",
                                hint="restore that file (or delete it so it is downloaded again); "
                                     "`foundry dataset verify` checks every shard")
            if stamp_path is not None:
                try:
                    atomic_write(stamp_path, stamp)
                except OSError:
                    pass  # a read-only dataset folder: every process checks, nothing is remembered


def stamp_as_checked(path: str | os.PathLike, hashes: dict[str, str], *, shard: str,
                     requested: str | bool | None = None, stamps: str | os.PathLike) -> None:
    """Remember `path` as matching its recorded hash without hashing it, for a file made from a
    checked source (a shard decompressed from a compressed file whose hash and size matched). The
    node's other processes then take it as `check_shard_file` would after hashing it."""
    algo = pick_hash(hashes, requested)
    if algo is None:
        return
    try:
        atomic_write(_stamp_path(stamps, shard), _stamp(algo, hashes[algo], os.stat(path)))
    except OSError:
        pass  # a read-only dataset folder: every process checks, nothing is remembered


def _stamp_path(stamps: str | os.PathLike, shard: str) -> str:
    return os.path.join(stamps, shard.replace("/", "__") + ".ok")


def _stamp(algo: str, digest: str, st: os.stat_result) -> str:
    """What a stamp records: the digest, and the file it was checked on (inode, size, mtime)."""
    return f"{algo}:{digest}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _stamped(stamp_path: str | None, stamp: str) -> bool:
    if stamp_path is None:
        return False
    try:
        with open(stamp_path) as f:
            return f.read() == stamp
    except OSError:
        return False


@contextmanager
def _one_checker(f: BinaryIO, shared: bool) -> Iterator[None]:
    """An exclusive flock on the shard file while it is hashed: the processes of a node that need
    it at once (DataLoader workers, ranks) hash it once, the others take the stamp it leaves,
    instead of all hashing it side by side. Nothing else locks shard files; where flock is not
    supported, every process checks for itself."""
    locked = False
    if shared:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            locked = True
        except OSError:
            pass
    try:
        yield
    finally:
        if locked:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
