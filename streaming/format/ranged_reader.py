"""An uncompressed MDS shard read from its remote copy with ranged reads, before it is local.

For the first samples of a cold epoch: the whole shard downloads in the background meanwhile
(cache.prefetch), and early_reader.EarlyShardReader moves to the local file once it is there.
Reads are whole blocks (format.block_digests' size), each checked against its digest before a
sample is decoded from it when the shard is checked at all. The blocks read are kept, and
compared with the local file when it takes over, so a shard replaced in the store between the
two reads is an error, not a silent mix of two versions of it.
"""

from __future__ import annotations

import math
import os
import struct
from typing import Any, Callable

from foundry.plugins.errors import DataError

from .block_digests import BLOCK_BYTES, BlockDigests
from .index import ShardInfo
from .reader import MDSShardReader


class RangedMDSReader(MDSShardReader):
    def __init__(self, info: ShardInfo, fetch: Callable[[int, int], bytes], size: int,
                 digests: BlockDigests | None = None):
        super().__init__(info, info.raw_basename)
        self._fetch = fetch  # (start, end) -> the stored bytes in [start, end)
        self._size = size
        self._digests = digests
        self._block_bytes = digests.block_bytes if digests is not None else BLOCK_BYTES
        self._kept: dict[int, bytes] = {}
        self.blocks_fetched = 0

    def __getstate__(self) -> dict:
        raise TypeError("a RangedMDSReader is not sent to other processes")

    @property
    def blocks(self) -> int:
        return math.ceil(self._size / self._block_bytes)

    def read_header(self) -> None:
        if self._offsets is None:
            self._ensure()

    def _ensure(self) -> None:
        where = f"shard {self.path} in the store"
        (n,) = struct.unpack("<I", self._read(0, 4))
        if n != self.info.samples:
            raise DataError(f"{where} holds {n} samples but index.json says {self.info.samples}")
        self._offsets = self._read_offsets(self._read(0, 4 * (n + 2)), where, self._size)

    def _read(self, begin: int, end: int) -> bytes:
        """Bytes [begin, end) of the shard, fetching the blocks not kept yet in one ranged read."""
        if not 0 <= begin <= end <= self._size:
            raise DataError(f"shard {self.path} in the store is truncated (read {begin}-{end} of {self._size} bytes)")
        if begin == end:
            return b""
        size = self._block_bytes
        first, last = begin // size, (end - 1) // size
        missing = [b for b in range(first, last + 1) if b not in self._kept]
        if missing:
            start, stop = missing[0] * size, min(self._size, (missing[-1] + 1) * size)
            data = self._fetch(start, stop)
            if len(data) != stop - start:
                raise DataError(f"shard {self.path} in the store changed or is truncated "
                                f"(bytes {start}-{stop} gave {len(data)})")
            for b in range(missing[0], missing[-1] + 1):
                block = data[b * size - start:min(stop, (b + 1) * size) - start]
                if self._digests is not None and not self._digests.matches(b, block):
                    raise DataError(f"block {b} of shard {self.path} in the store does not match its digest")
                self._kept[b] = block
            self.blocks_fetched += missing[-1] + 1 - missing[0]
        if first == last:
            block = self._kept[first]
            return block[begin - first * size:end - first * size]
        joined = b"".join(self._kept[b] for b in range(first, last + 1))
        return joined[begin - first * size:end - first * size]

    def get_sample_bytes(self, i: int) -> bytes:
        if self._offsets is None:
            self._ensure()
        i = self._check_index(i)
        return self._read(self._offsets[i], self._offsets[i + 1])

    def get_sample(self, i: int) -> dict[str, Any]:
        return self._decode(self.get_sample_bytes(i), 0)

    def check_against(self, path: str | os.PathLike) -> None:
        """Raise a DataError unless every block read here is the same in the local file."""
        size = self._block_bytes
        with open(path, "rb") as f:
            for b, block in sorted(self._kept.items()):
                if os.pread(f.fileno(), len(block), b * size) != block:
                    raise DataError(f"shard {self.path} changed in the store while it was being read "
                                    f"(block {b} differs from the copy downloaded after it)",
                                    hint="a dataset's shards and index.json must not be rewritten while it is read")

    def close(self) -> None:
        self._kept = {}
        self._offsets = None
