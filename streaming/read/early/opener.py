"""Which early reader a shard gets, and when: every decision of early reading in one place.

An early reader (reader.EarlyShardReader) takes a shard's first samples while the cache makes it
whole, from one of two format-level readers:
- frames of its seekable compressed file (format.framed_reader), when the shard is compressed and
  on this machine: on with ReadPolicy.framed_early (not in DataLoader workers);
- ranged reads of its remote copy (format.ranged_reader), when it is uncompressed in a far store:
  on with ReadPolicy.ranged_early (the node's only reader, not a worker); the cache says per shard
  whether ranged reads apply (cache.shards.ShardCache.early_ranges: a far store, a big shard).
Not in DataLoader workers: their batch needs samples of every shard at once and the node's cores
are busy making those shards whole, so early reads only steal from that (measured with frames:
batch-256 epoch 23-26k vs 27-30k samples/s without).

Early reading stops for the rest of the iteration once some shard was read whole (`opened_whole`):
it is for a cold start; later early reads would only share the link or the core with the shards
being made whole. `ReadPolicy.decide(..., early=False)` switches all of it off.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any, Callable

from foundry.plugins.errors import DataError, FoundryError

from ...format import refuse_unsafe
from ...format.contract import SampleReader
from ...format.framed_reader import FramedMDSReader
from ...format.ranged_reader import RangedMDSReader
from ...format.ranged_reader import reads as ranged_reads
from ...plan.iteration import ReadPolicy
from . import reader as budgets
from .reader import EarlyShardReader

# Early readers opened in the background at once, at most: each waits in the ranged-read pool for
# its block digests, which must find a thread free there (format.ranged_reader.CONCURRENT_READS).
OPEN_AHEAD_MAX = 3


class EarlyOpener:
    """One iteration's early readers. `locator`: the streams' caches (read.source.ShardLocator);
    `open_whole(shard)`: the shard's whole reader, which an early reader moves to."""

    def __init__(self, locator: Any, infos: Any, allow_unsafe_types: bool, policy: ReadPolicy,
                 open_whole: Callable[[int], SampleReader]):
        self._locator = locator
        self._infos = infos
        self._unsafe = allow_unsafe_types
        self._policy = policy
        self._open_whole = open_whole
        self.opened_whole = False  # some shard of this iteration was read whole: no more early reads
        self._soon: dict[int, Future] = {}  # shard -> its early reader being opened (open_soon)

    def open_soon(self, shards: list[int]) -> None:
        """Start opening these shards' ranged early readers in the background (open takes them)."""
        if self.opened_whole or not self._policy.ranged_early:
            return
        for shard in shards:
            if shard not in self._soon and len(self._soon) < OPEN_AHEAD_MAX:
                self._soon[shard] = ranged_reads().submit(self._open_ranged, shard)

    def open(self, shard: int) -> EarlyShardReader | None:
        """An early reader of the shard, or None: it is whole, or early reads do not apply."""
        soon = self._soon.pop(shard, None)
        if soon is not None:  # its ranged reader, being opened: or none, and then maybe frames
            return soon.result() or (self._open_framed(shard) if self._policy.framed_early else None)
        if not (self._policy.framed_early or self._policy.ranged_early):  # e.g. in workers (ReadPolicy)
            return None
        zip_path = self._locator.unready_local_zip(shard)  # checks the compressed copy: once
        if zip_path is not None:
            return self._open_framed(shard, zip_path) if self._policy.framed_early else None
        return self._open_ranged(shard)

    def _open_framed(self, shard: int, zip_path: Any = None) -> EarlyShardReader | None:
        if zip_path is None:
            zip_path = self._locator.unready_local_zip(shard)
        framed = open_framed(self._infos[shard], zip_path, self._unsafe) if zip_path is not None else None
        if framed is None:
            return None
        return EarlyShardReader(framed, lambda: self._locator.is_ready(shard), lambda: self._open_whole(shard),
                                budget=budgets.EARLY_FRAMES)

    def _open_ranged(self, shard: int) -> EarlyShardReader | None:
        if self.opened_whole or not self._policy.ranged_early:  # for a cold start; later they would only share the link
            return None
        ranges = self._locator.early_ranges(shard)
        ranged = open_ranged(self._infos[shard], *ranges, self._unsafe) if ranges is not None else None
        if ranged is None:
            return None
        blocks = min(budgets.BLOCK_BUDGET * ranged.blocks, budgets.BLOCK_BUDGET_BYTES / ranged.block_bytes)
        return EarlyShardReader(ranged, lambda: self._locator.is_ready(shard), lambda: self._open_whole(shard),
                                budget=max(2, int(blocks)), on_whole=lambda w: ranged.check_against(w.path))


def open_framed(info: Any, zip_path: os.PathLike, allow_unsafe_types: bool) -> FramedMDSReader | None:
    """A reader of an MDS shard's samples from its seekable compressed file (format.framed_reader),
    or None when the file is not seekable (one zstd frame, as mosaicml-streaming writes)."""
    if info.format != "mds" or info.compression.partition(":")[0] != "zstd":
        return None
    refuse_unsafe(info, allow_unsafe_types)
    reader = FramedMDSReader(info, zip_path)
    try:
        reader.get_sample_bytes(0)  # table, header and first frame; no table or a bad file: read it whole
    except DataError:
        reader.close()
        return None
    return reader


def open_ranged(info: Any, fetch: Callable[[int, int], bytes], size: int, digests: Any,
                allow_unsafe_types: bool) -> RangedMDSReader | None:
    """A reader of an uncompressed MDS shard's samples from ranged reads of its remote copy
    (format.ranged_reader), its header read; None when the header cannot be read that way."""
    if info.format != "mds" or info.compression:
        return None
    refuse_unsafe(info, allow_unsafe_types)
    reader = RangedMDSReader(info, fetch, size, digests)
    try:
        reader.read_header()
    except FoundryError:  # unreadable that way: the whole download decides
        reader.close()
        return None
    return reader
