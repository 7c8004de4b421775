"""An uncompressed MDS shard read from its remote copy with ranged reads, before it is local.

For the first samples of a cold epoch: the whole shard downloads in the background meanwhile
(cache.prefetch), and read.early.reader.EarlyShardReader moves to the local file once it is there.
Reads are whole blocks (format.block_digests' size), each checked against its digest before a
sample is decoded from it when the shard is checked at all. `fetch_ahead(indices)` fetches the blocks
of samples the reader will soon be asked for, several requests at once: across a WAN each read
is a round trip, so a batch read one sample at a time would take longer than the whole shard.
The blocks read are kept, and compared with the local file when it takes over, so a shard
replaced in the store between the two reads is an error, not a silent mix of two versions of it.
"""

from __future__ import annotations

import math
import os
import struct
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable

from foundry.plugins.errors import DataError

from .block_digests import BLOCK_BYTES, BlockDigests
from .contract import EarlyReader
from .index import ShardInfo
from .reader import MDSShardReader

CONCURRENT_READS = 8  # ranged reads in flight at once, per process (the S3 client's pool holds 16)
_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def reads() -> ThreadPoolExecutor:
    """The process's pool for ranged reads (a forked child makes its own: the parent's threads
    are not in it)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(CONCURRENT_READS, thread_name_prefix="foundry-ranged"))
        return _pool[1]


class RangedMDSReader(MDSShardReader, EarlyReader):
    reads_ahead = True  # fetch_ahead() starts the blocks of samples asked for soon

    def __init__(self, info: ShardInfo, fetch: Callable[[int, int], bytes], size: int,
                 digests: BlockDigests | Future | None = None):
        """`digests`: the shard's block digests, or a Future of them (read at the same time as the
        header: across a WAN one round trip less before the first sample); None: nothing is checked."""
        super().__init__(info, info.raw_basename)
        self._fetch = fetch  # (start, end) -> the stored bytes in [start, end)
        self._size = size
        self._digests = digests
        self._block_bytes = BLOCK_BYTES if digests is None or isinstance(digests, Future) else digests.block_bytes
        self._kept: dict[int, bytes] = {}
        self._coming: dict[int, Future] = {}  # block -> the read that brings it (fetch_ahead)
        self.blocks_fetched = 0

    def __getstate__(self) -> dict:
        raise TypeError("a RangedMDSReader is not sent to other processes")

    @property
    def block_bytes(self) -> int:
        return self._block_bytes

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
        for b in range(first, last + 1):
            coming = self._coming.pop(b, None)
            if coming is not None:
                coming.result()  # its failure is this read's
        missing = [b for b in range(first, last + 1) if b not in self._kept]
        if missing:
            self.blocks_fetched += missing[-1] + 1 - missing[0]
            self._fetch_blocks(missing[0], missing[-1] + 1)
        if first == last:
            block = self._kept[first]
            return block[begin - first * size:end - first * size]
        joined = b"".join(self._kept[b] for b in range(first, last + 1))
        return joined[begin - first * size:end - first * size]

    def _fetch_blocks(self, first: int, stop_block: int) -> None:
        """Fetch blocks [first, stop_block) in one ranged read, check each, keep them."""
        size = self._block_bytes
        start, stop = first * size, min(self._size, stop_block * size)
        data = self._fetch(start, stop)
        if len(data) != stop - start:
            raise DataError(f"shard {self.path} in the store changed or is truncated "
                            f"(bytes {start}-{stop} gave {len(data)})")
        digests = self._checked_against()
        for b in range(first, stop_block):
            block = data[b * size - start:min(stop, (b + 1) * size) - start]
            if digests is not None and not digests.matches(b, block):
                raise DataError(f"block {b} of shard {self.path} in the store does not match its digest")
            self._kept[b] = block

    def _checked_against(self) -> BlockDigests | None:
        digests = self._digests
        if isinstance(digests, Future):
            digests = digests.result()
            if digests is None or digests.block_bytes != self._block_bytes:
                raise DataError(f"shard {self.path} has no usable block digests beside it")
            self._digests = digests
        return digests

    def holds(self, i: int) -> bool:
        """Sample `i`'s blocks are read, or being read."""
        if self._offsets is None or not 0 <= i < self.info.samples:
            return False
        size, offsets = self._block_bytes, self._offsets
        return all(b in self._kept or b in self._coming
                   for b in range(offsets[i] // size, max(offsets[i], offsets[i + 1] - 1) // size + 1))

    def spent(self) -> int:
        return self.blocks_fetched

    def fetch_ahead(self, indices: Iterable[int], limit: int) -> None:
        """Start reading the blocks of samples `indices` (at most `limit` blocks), several at once."""
        if self._offsets is None:
            self._ensure()
        size, offsets = self._block_bytes, self._offsets
        wanted: dict[int, None] = {}  # in the order the samples come, so the budget goes to the first
        for i in indices:
            for b in range(offsets[i] // size, max(offsets[i], offsets[i + 1] - 1) // size + 1):
                if b not in self._kept and b not in self._coming:
                    wanted[b] = None
        runs: list[list[int]] = []  # in the samples' order, the first needed first; adjacent blocks in one read
        for b in list(wanted)[:max(0, limit)]:
            if runs and runs[-1][-1] == b - 1:
                runs[-1].append(b)
            else:
                runs.append([b])
        for run in runs:
            future = reads().submit(self._fetch_blocks, run[0], run[-1] + 1)
            self.blocks_fetched += len(run)
            for b in run:
                self._coming[b] = future

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
            for b, block in sorted(list(self._kept.items())):  # blocks still on their way are never served
                if os.pread(f.fileno(), len(block), b * size) != block:
                    raise DataError(f"shard {self.path} changed in the store while it was being read "
                                    f"(block {b} differs from the copy downloaded after it)",
                                    hint="a dataset's shards and index.json must not be rewritten while it is read")

    def close(self) -> None:
        for coming in self._coming.values():
            coming.cancel()
        self._coming = {}
        self._kept = {}
        self._offsets = None
