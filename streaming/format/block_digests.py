"""Digests of an uncompressed shard's fixed-size blocks, in one file per dataset (`index.blocks`).

A cold reader of a remote shard can take its first samples from a few ranged reads instead of
waiting for the whole file (format.ranged_reader). The shard's own hash can only be checked once
the whole file is there, so each block read early is checked against its digest here before a
sample is decoded from it. The file names the whole shard's size and hashes, and is used only
when they match index.json: a digest file left from an older shard is ignored, not trusted.

Where they are: the writer puts every shard's digest record (a small JSON document) one after
another into `index.blocks` beside index.json, and index.json's top level says where each shard's
record is: `"foundry_block_digests": {"shard.00000.mds": ["index.blocks", offset, bytes], ...}`.
mosaicml-streaming reads only `version` and `shards` of index.json, and only the files the shards
name, so it ignores both (and its merge_index, which merges every `*.json` below a folder, does
not take `index.blocks` for an index). One extra file per dataset, none per shard.

Datasets written before (a `<shard>.blocks.json` beside each shard, no key in index.json) are
still read: without the key, a reader looks for that file.
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


DATASET_BASENAME = "index.blocks"
INDEX_KEY = "foundry_block_digests"


def digests_basename(raw_basename: str) -> str:
    """The digest file an older writer put beside the shard."""
    return raw_basename + SUFFIX


def pack_records(records: list[tuple[str, bytes]]) -> tuple[bytes, dict[str, list]]:
    """The dataset's digest file and index.json's map to it, from each shard's (raw basename, record)."""
    where: dict[str, list] = {}
    offset = 0
    for name, record in records:
        where[name] = [DATASET_BASENAME, offset, len(record)]
        offset += len(record)
    return b"".join(record for _, record in records), where


def record_location(found: Any, raw_basename: str) -> tuple[str, int, int] | None:
    """(file, offset, bytes) of a shard's record from index.json's map, or None (no usable entry)."""
    entry = found.get(raw_basename) if isinstance(found, dict) else None
    try:
        name, offset, size = entry
        if isinstance(name, str) and int(offset) >= 0 and int(size) > 0:
            return name, int(offset), int(size)
    except (TypeError, ValueError):
        pass
    return None


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
