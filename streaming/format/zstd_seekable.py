"""zstd shards as independent frames with a seek table (zstd's "seekable format"), so a reader can
decompress only the part of a shard it needs.

A file is a series of standard zstd frames, each holding `FRAME_RAW_BYTES` of the raw shard (the
last one less), then one skippable frame with the table of their sizes:

    magic 0x184D2A5E | u32 size | per frame: u32 compressed, u32 raw | u32 frames | u8 0 | u32 0x8F92EAB1

Every zstd decoder reads such a file as the whole raw shard (several frames decode one after
another; skippable frames are skipped): mosaicml-streaming's `zstd.decompress` does, and so does
this package's `decompress_stream`. A file without the table (mosaicml-streaming writes one frame)
is read whole as before; `read_seek_table` returns None for it. A shard of one frame (at most
`FRAME_RAW_BYTES` raw) gets no table either: its file is then the same as mosaicml-streaming's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import zstandard

from foundry.plugins.errors import DataError

FRAME_RAW_BYTES = 1 << 20
_SKIPPABLE_MAGIC = 0x184D2A5E
_SEEKABLE_MAGIC = 0x8F92EAB1
_FOOTER = struct.Struct("<IBI")  # frames, descriptor, magic


def write_seekable(fin: BinaryIO, fout: BinaryIO, level: int, frame_bytes: int = FRAME_RAW_BYTES) -> None:
    """Compress `fin` into `fout` as independent frames of `frame_bytes` raw bytes plus the table."""
    cctx = zstandard.ZstdCompressor(level=level, write_content_size=True)
    sizes: list[tuple[int, int]] = []
    while chunk := fin.read(frame_bytes):
        frame = cctx.compress(chunk)
        fout.write(frame)
        sizes.append((len(frame), len(chunk)))
    if not sizes:  # an empty input is still one (empty) frame: every decoder expects one
        frame = cctx.compress(b"")
        fout.write(frame)
        sizes.append((len(frame), 0))
    if len(sizes) == 1:  # one frame is read whole anyway: the file stays byte for byte mosaic's
        return
    entries = np.asarray(sizes, "<u4").tobytes()
    footer = _FOOTER.pack(len(sizes), 0, _SEEKABLE_MAGIC)
    fout.write(struct.pack("<II", _SKIPPABLE_MAGIC, len(entries) + len(footer)) + entries + footer)


@dataclass(frozen=True)
class SeekTable:
    """Frame k holds raw bytes [raw[k], raw[k+1]) at compressed bytes [packed[k], packed[k+1])."""

    packed: np.ndarray
    raw: np.ndarray

    @property
    def frames(self) -> int:
        return len(self.raw) - 1

    @property
    def raw_size(self) -> int:
        return int(self.raw[-1])

    def frames_for(self, begin: int, end: int) -> range:
        """The frames that hold raw bytes [begin, end)."""
        first = int(np.searchsorted(self.raw, begin, side="right")) - 1
        last = int(np.searchsorted(self.raw, max(begin, end - 1), side="right")) - 1
        return range(max(0, first), min(self.frames, last + 1))


def read_seek_table(buf) -> SeekTable | None:
    """The table at the end of `buf` (bytes or a mapped file), or None when there is none or it
    does not describe this file exactly (then the file is read as one stream)."""
    size = len(buf)
    if size < _FOOTER.size + 8:
        return None
    frames, descriptor, magic = _FOOTER.unpack_from(buf, size - _FOOTER.size)
    if magic != _SEEKABLE_MAGIC or descriptor != 0:
        return None
    table_at = size - _FOOTER.size - 8 * frames - 8
    if frames == 0 or table_at < 0:
        return None
    skip_magic, skip_size = struct.unpack_from("<II", buf, table_at)
    if skip_magic != _SKIPPABLE_MAGIC or skip_size != 8 * frames + _FOOTER.size:
        return None
    entries = np.frombuffer(buf, "<u4", 2 * frames, table_at + 8).reshape(frames, 2).astype(np.int64)
    packed = np.concatenate([[0], np.cumsum(entries[:, 0])])
    if int(packed[-1]) != table_at:
        return None
    return SeekTable(packed=packed, raw=np.concatenate([[0], np.cumsum(entries[:, 1])]))


class FrameReader:
    """Raw byte ranges of a seekable file, decompressing only the frames they fall in; the last
    few frames are kept (a sample often shares its frame with the next ones read)."""

    def __init__(self, buf, table: SeekTable, keep: int = 4):
        self._buf = memoryview(buf)
        self._table = table
        self._dctx = zstandard.ZstdDecompressor()
        self._keep = keep
        self._frames: dict[int, bytes] = {}
        self.frames_decompressed = 0

    @property
    def frames(self) -> int:
        return self._table.frames

    def frame(self, k: int) -> bytes:
        data = self._frames.get(k)
        if data is None:
            t = self._table
            raw_size = int(t.raw[k + 1] - t.raw[k])
            try:
                data = self._dctx.decompress(self._buf[int(t.packed[k]):int(t.packed[k + 1])],
                                             max_output_size=raw_size)
            except zstandard.ZstdError as exc:
                raise DataError(f"frame {k} does not decompress: {exc}") from None
            if len(data) != raw_size:
                raise DataError(f"frame {k} decompresses to {len(data)} bytes, its table says {raw_size}")
            self.frames_decompressed += 1
            if len(self._frames) >= self._keep:
                self._frames.pop(next(iter(self._frames)))
            self._frames[k] = data
        return data

    def read(self, begin: int, end: int) -> bytes:
        """Raw bytes [begin, end)."""
        t = self._table
        parts = []
        for k in self._table.frames_for(begin, end):
            base = int(t.raw[k])
            parts.append(self.frame(k)[max(0, begin - base):end - base])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        self._frames.clear()
        self._buf.release()
