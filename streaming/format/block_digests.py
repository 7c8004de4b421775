"""Digests of an uncompressed shard's fixed-size blocks, in a file beside it (`<shard>.blocks.json`).

A cold reader of a remote shard can take its first samples from a few ranged reads instead of
waiting for the whole file (format.ranged_reader). The shard's own hash can only be checked once
the whole file is there, so each block read early is checked against its digest here before a
sample is decoded from it. The file names the whole shard's size and hashes, and is used only
when they match index.json: a digest file left from an older shard is ignored, not trusted.

mosaicml-streaming reads only index.json and the shards it names, so it ignores these files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import xxhash

# Small, as a cold reader fetches a block per sample it needs (a few KB each) while the whole shard
# downloads on the same link; a 64 MB shard has 4,096 (64 KB of digests).
BLOCK_BYTES = 16 << 10
ALGO = "xxh3_64"
_HEX = 16  # characters of one xxh3_64 hexdigest
SUFFIX = ".blocks.json"


def digests_basename(raw_basename: str) -> str:
    return raw_basename + SUFFIX


class BlockHasher:
    """Feeds a file's bytes in order (any chunking); `dump` gives the digest file's contents."""

    def __init__(self, block_bytes: int = BLOCK_BYTES):
        self.block_bytes = block_bytes
        self._hasher = xxhash.xxh3_64()
        self._filled = 0
        self._digests: list[str] = []

    def update(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            take = min(len(view), self.block_bytes - self._filled)
            self._hasher.update(view[:take])
            self._filled += take
            view = view[take:]
            if self._filled == self.block_bytes:
                self._digests.append(self._hasher.hexdigest())
                self._hasher.reset()
                self._filled = 0

    def dump(self, file_bytes: int, file_hashes: dict[str, str]) -> bytes:
        digests = self._digests + ([self._hasher.hexdigest()] if self._filled else [])
        return json.dumps({"version": 1, "algo": ALGO, "block_bytes": self.block_bytes, "bytes": file_bytes,
                           "hashes": file_hashes, "blocks": "".join(digests)}, sort_keys=True).encode()


@dataclass(frozen=True)
class BlockDigests:
    block_bytes: int
    file_bytes: int
    hashes: dict[str, str]
    blocks: str  # the blocks' hexdigests, concatenated

    @classmethod
    def parse(cls, data: bytes) -> "BlockDigests | None":
        """The digests, or None for a file this version cannot use (malformed, other algorithm)."""
        try:
            obj = json.loads(data)
            found = cls(int(obj["block_bytes"]), int(obj["bytes"]), dict(obj["hashes"]), str(obj["blocks"]))
            if obj.get("version") != 1 or obj.get("algo") != ALGO or found.block_bytes <= 0:
                return None
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        if len(found.blocks) != _HEX * math.ceil(found.file_bytes / found.block_bytes):
            return None
        return found

    def describes(self, raw_bytes: int | None, raw_hashes: dict[str, str] | None) -> bool:
        """These digests are of the file index.json names: same size, and the same digest under
        every hash both record (at least one)."""
        shared = set(self.hashes) & set(raw_hashes or {})
        return (raw_bytes == self.file_bytes and bool(shared)
                and all(self.hashes[a] == raw_hashes[a] for a in shared))

    def matches(self, block: int, data: Any) -> bool:
        """`data` is block `block` of the file as it was written."""
        end = min(self.file_bytes, (block + 1) * self.block_bytes)
        return (0 <= block and len(data) == end - block * self.block_bytes
                and xxhash.xxh3_64(data).hexdigest() == self.blocks[_HEX * block:_HEX * (block + 1)])
