"""Open shard readers, kept per process (mmap'd by the format layer, or read with pread inside
DataLoader workers), least recently used closed. An iteration opens its readers through here with
its ReadPolicy's `mapped`; random access (`get`) decides it once per process."""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Any, Callable, Sequence

from foundry.plugins.errors import DataError

from ..format.contract import SampleReader


# How often kept readers' files are looked at (a stat each), as in read.iterator.DeletedShards.
RECHECK_S = 1.0


class ReaderPool:
    def __init__(self, infos: Sequence[Any], ensure: Callable[[int], os.PathLike], allow_unsafe_types: bool,
                 max_open: int = 64, refetch_deleted: bool = False):
        self._infos = infos
        # shards can be fetched again: a kept reader whose file was deleted is dropped, so the next
        # sample fetches the shard again, as mosaic's get_item does (looked at once a second at most)
        self._refetch_deleted = refetch_deleted
        self._next_look = 0.0
        self._ensure = ensure
        self._unsafe = allow_unsafe_types
        self._max_open = max_open
        self._open: OrderedDict[int, SampleReader] = OrderedDict()
        self._pid: int | None = None  # the process the kept readers belong to (get)
        self._mapped = True

    def get(self, shard: int) -> SampleReader:
        """The reader of global shard `shard`, downloading the shard if needed."""
        if self._pid != os.getpid():  # forked, or new: the parent's handles are not ours to use
            self._open = OrderedDict()
            self._pid = os.getpid()
            self._mapped = not _in_dataloader_worker()  # this process's role, decided once
        if self._refetch_deleted and self._open and time.monotonic() >= self._next_look:
            self._drop_deleted()
        reader = self._open.get(shard)
        if reader is not None:
            self._open.move_to_end(shard)
            return reader
        reader = self._open[shard] = self.open(shard, self._mapped)
        while len(self._open) > self._max_open:
            _, old = self._open.popitem(last=False)
            _close(old)
        return reader

    def open(self, shard: int, mapped: bool) -> SampleReader:
        """A new reader (not kept by the pool), its shard local and opened (`mapped`, or read with
        pread: ReadPolicy.mapped): the caller closes it."""
        from foundry.streaming.format import open_shard

        for attempt in range(3):
            path = self._ensure(shard)
            reader = open_shard(self._infos[shard], str(path), allow_unsafe_types=self._unsafe, mapped=mapped)
            try:
                if len(reader):
                    reader.get_sample_bytes(0)  # map or open it now: an eviction after this cannot hurt us
                return reader
            except (FileNotFoundError, DataError):  # evicted between ensure and open: fetch again
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    @property
    def infos(self) -> Sequence[Any]:
        """Every shard's format.index.ShardInfo, by global shard number."""
        return self._infos

    @property
    def allow_unsafe_types(self) -> bool:
        return self._unsafe

    def _drop_deleted(self) -> None:
        gone = [k for k, r in self._open.items() if r.path and not os.path.exists(r.path)]
        for shard in gone:
            self.drop(shard)
        self._next_look = time.monotonic() + RECHECK_S

    def drop(self, shard: int) -> None:
        """Close the pool's reader of `shard`, if any (its files were evicted: read them anew)."""
        reader = self._open.pop(shard, None)
        if reader is not None:
            _close(reader)

    def open_shards(self) -> set[int]:
        return set(self._open)

    def close(self) -> None:
        while self._open:
            _, r = self._open.popitem()
            _close(r)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_open"] = OrderedDict()
        return state


def _in_dataloader_worker() -> bool:
    """Workers read shards with pread, not maps: their collate copies every sample anyway, and
    maps would put each shard's pages in the RSS of every worker (format.reader.MDSShardFileReader)."""
    from torch.utils.data import get_worker_info

    return get_worker_info() is not None


def _close(reader: Any) -> None:
    try:
        reader.close()
    except Exception:  # noqa: BLE001 - a view into the mapping may still be alive; GC closes it
        pass
