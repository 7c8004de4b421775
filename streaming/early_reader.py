"""A shard's reader that starts before the shard is decompressed.

A compressed shard written by Foundry is seekable (format.zstd_seekable): while the prefetcher
decompresses it whole in the background, the reader takes its first samples straight from the
compressed file, one frame at a time, and moves to the decompressed file as soon as it is there.
The first sample of an epoch then waits for one frame, not for the whole shard. Reading from frames
is bounded: once its frames decompressed add up to `FRAME_BUDGET` times the shard, the reader waits
for the whole shard instead, so no shard costs much more than `1 + FRAME_BUDGET` decompressions.
"""

from __future__ import annotations

from typing import Any, Callable

FRAME_BUDGET = 2


class EarlyShardReader:
    def __init__(self, framed: Any, ready: Callable[[], bool], open_whole: Callable[[], Any]):
        self._framed = framed  # format.framed_reader.FramedMDSReader
        self._ready = ready
        self._open_whole = open_whole
        self.budget = int(FRAME_BUDGET * framed.frames)  # frames to decompress before waiting
        self._whole: Any = None
        self.early_samples = 0

    @property
    def settled(self) -> bool:
        """Reading from the decompressed file now (the iterator then calls it directly)."""
        return self._whole is not None

    @property
    def get_sample(self) -> Callable[[int], Any]:
        return self._whole.get_sample if self._whole is not None else self._sample

    def _sample(self, i: int) -> Any:
        if self._whole is None:
            if self._framed.frames_decompressed < self.budget and not self._ready():
                self.early_samples += 1
                return self._framed.get_sample(i)
            self._whole = self._open_whole()  # waits for the shard once the budget is spent
            self._framed.close()
        return self._whole.get_sample(i)

    def close(self) -> None:
        self._framed.close()
        if self._whole is not None:
            self._whole.close()
