"""Shard hashes: hashlib's algorithms and xxhash's, as hexdigests (mosaicml-streaming's names)."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable

from foundry.plugins.errors import ConfigError

_CHUNK = 1 << 20
XXHASH_ALGOS = ("xxh32", "xxh64", "xxh3_64", "xxh3_128", "xxh128")


def _constructor(algo: str) -> Callable[[], Any]:
    if algo in XXHASH_ALGOS:
        import xxhash

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
    hashers = new_hashers(algos)
    if hashers:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                for h in hashers.values():
                    h.update(chunk)
    return {algo: h.hexdigest() for algo, h in hashers.items()}


def verify_file(path: str | os.PathLike, expected: dict[str, str]) -> bool:
    """True when every expected digest matches the file (vacuously true for no digests)."""
    known = {a: d for a, d in expected.items() if is_hash(a)}
    if not known:
        return True
    return hash_file(path, list(known)) == known
