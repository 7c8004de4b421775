"""An MDS shard read straight from its seekable zstd file (format.zstd_seekable), frame by frame.

For the moments before a compressed shard is decompressed whole: the first samples of an epoch,
or of a shard the reader reaches before its background decompression ends. Each sample costs a
frame's decompression (a few are kept), so it is no reader for a whole epoch.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Any

from foundry.plugins.errors import DataError

from .contract import EarlyReader
from .index import ShardInfo
from .reader import MDSShardReader
from .zstd_seekable import FrameReader, read_seek_table


class FramedMDSReader(MDSShardReader, EarlyReader):
    def __init__(self, info: ShardInfo, zip_path: str | os.PathLike):
        super().__init__(info, zip_path)
        self._frames: FrameReader | None = None

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_frames"] = None
        return state

    def _ensure(self) -> None:
        self._map = self._open_map(self.path)
        table = read_seek_table(self._map)
        if table is None:
            self.close()
            raise DataError(f"{self.path} has no zstd seek table")
        self._frames = FrameReader(self._map, table)
        where = f"shard {self.path}"
        try:
            (n,) = struct.unpack("<I", self._frames.read(0, 4))
            self._offsets = self._read_offsets(self._frames.read(0, 4 * (n + 2)), where, table.raw_size)
        except DataError as exc:
            self.close()
            raise DataError(f"{where} does not decompress: {exc.message}") from None

    @property
    def frames(self) -> int:
        if self._frames is None:
            self._ensure()
        return self._frames.frames

    @property
    def frames_decompressed(self) -> int:
        return self._frames.frames_decompressed if self._frames is not None else 0

    def spent(self) -> int:
        return self.frames_decompressed

    def get_sample_bytes(self, i: int) -> bytes:
        if self._offsets is None:
            self._ensure()
        i = self._check_index(i)
        return self._frames.read(self._offsets[i], self._offsets[i + 1])

    def get_sample(self, i: int) -> dict[str, Any]:
        return self._decode(self.get_sample_bytes(i), 0)

    def close(self) -> None:
        if self._frames is not None:
            self._frames.close()
            self._frames = None
        super().close()


def is_seekable(path: str | os.PathLike) -> bool:
    """The file ends in a zstd seek table (written by this package), not one frame (mosaic's)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return read_seek_table(m) is not None
    except (OSError, ValueError):
        return False
