"""A shard's reader that starts before the shard is local and whole.

Two kinds of early reader take a shard's first samples while the cache makes it whole in the
background, and this one moves to the whole file as soon as it is there:
- a compressed shard written by Foundry is seekable (format.zstd_seekable): samples come from its
  compressed file one frame at a time (format.framed_reader) while it is decompressed;
- an uncompressed shard of a remote store: samples come from ranged reads of its blocks
  (format.ranged_reader) while it downloads.
The first sample of an epoch then waits for one frame or one block, not for the whole shard.
Early reading is bounded: once the early reader has spent its budget (frames decompressed, blocks
fetched), this reader waits for the whole shard instead, so no shard costs much more than its
own decompression or download.
"""

from __future__ import annotations

from typing import Any, Callable

from foundry.plugins.errors import FoundryError

from ...format.contract import EarlyReader, SampleReader

# Frames decompressed early per shard: the offsets' frame and a first few samples'. Past them the
# reader waits for the whole shard and lends its core to the decompressions (cache.decompress_slot):
# a shuffle that mixes shards soon draws from every frame of every shard, so reading frames one by
# one costs about a shard's decompression each, on the core that could make a shard whole instead
# (a budget of two shards' worth of frames made the local zstd epoch ~1.3x slower).
EARLY_FRAMES = 4
# Blocks fetched early, at most a quarter of the shard and this many bytes: they are downloaded
# twice, on the link the whole shard is coming through. A shuffle that mixes shards (mosaic's)
# draws a first batch of 256 from every shard in its block: ~170 samples of up to 16 KiB a shard.
BLOCK_BUDGET = 0.25
BLOCK_BUDGET_BYTES = 4 << 20


class EarlyShardReader(SampleReader):
    def __init__(self, early: EarlyReader, ready: Callable[[], bool], open_whole: Callable[[], SampleReader], *,
                 budget: int, on_whole: Callable[[SampleReader], None] | None = None):
        self._early = early  # format.framed_reader.FramedMDSReader or format.ranged_reader.RangedMDSReader
        self.info = early.info
        self._ready = ready
        self._open_whole = open_whole
        self.budget = budget
        self._on_whole = on_whole  # called with the whole shard's reader before it takes over
        self._whole: SampleReader | None = None
        self.early_samples = 0

    def __len__(self) -> int:
        return len(self._early)

    @property
    def reads_ahead(self) -> bool:  # type: ignore[override]
        """The early reader can start on samples before they are asked for (`expect`)."""
        return self._early.reads_ahead

    @property
    def settled(self) -> bool:  # type: ignore[override]
        """Reading from the whole file now (the iterator then calls it directly)."""
        return self._whole is not None

    @property
    def get_sample(self) -> Callable[[int], Any]:
        return self._whole.get_sample if self._whole is not None else self._sample

    def expect(self, indices: list[int]) -> None:
        """Samples this reader will soon be asked for, in order: an early reader that can fetch
        several at once (ranged reads) starts on them, within the budget."""
        if self._early.reads_ahead and self._whole is None and not self._ready():
            try:
                self._early.fetch_ahead(indices, self.budget - self._early.spent())
            except FoundryError:
                self.budget = 0

    def _sample(self, i: int) -> Any:
        if self._whole is None:
            # a sample read already, or on its way, costs nothing more
            if (self._early.spent() < self.budget or self._early.holds(i)) and not self._ready():
                try:
                    sample = self._early.get_sample(i)
                except FoundryError:  # a read failed or a block is bad: the whole shard decides
                    self.budget = 0
                else:
                    self.early_samples += 1
                    return sample
            whole = self._open_whole()  # waits for the shard once the budget is spent
            try:
                if self._on_whole is not None:
                    self._on_whole(whole)
            except BaseException:
                whole.close()
                raise
            self._whole = whole
            self._early.close()
        return self._whole.get_sample(i)

    def get_sample_bytes(self, i: int) -> bytes:
        return self._whole.get_sample_bytes(i) if self._whole is not None else self._early.get_sample_bytes(i)

    def close(self) -> None:
        self._early.close()
        if self._whole is not None:
            self._whole.close()
