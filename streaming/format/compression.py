"""Whole-file compression as mosaicml-streaming names it: `zstd`, `gz`, `bz2`, `br`, `snappy`.

A compression is `family` or `family:level` (`zstd:7`). File helpers stream in bounded memory
(zstd, gz, bz2, br; snappy's raw block format has no streaming form and is done in memory) and
write their destination atomically.
"""

from __future__ import annotations

import bz2
import gzip
import io
import os
import shutil
from dataclasses import dataclass
from typing import BinaryIO

from foundry.plugins.errors import ConfigError, DataError
from foundry.plugins.storage import atomic_destination

_CHUNK = 1 << 20

# family -> (default level, allowed levels or None when the family has no levels)
_FAMILIES: dict[str, tuple[int | None, range | None]] = {
    "br": (11, range(0, 12)),
    "bz2": (9, range(1, 10)),
    "gz": (9, range(0, 10)),
    "snappy": (None, None),
    "zstd": (3, range(1, 23)),
}


@dataclass(frozen=True)
class Compression:
    family: str
    level: int | None

    @property
    def extension(self) -> str:
        return self.family


def parse_compression(text: str) -> Compression:
    """Parse `family[:level]`; raises ConfigError for an unknown family or level."""
    family, _, level_text = text.partition(":")
    if family not in _FAMILIES:
        raise ConfigError(
            f"unknown compression {text!r}",
            hint=f"use one of {', '.join(sorted(_FAMILIES))}, optionally with :LEVEL (zstd:7)",
        )
    default, levels = _FAMILIES[family]
    if not level_text:
        return Compression(family, default)
    if levels is None or not level_text.isdigit() or int(level_text) not in levels:
        allowed = "none" if levels is None else f"{levels.start}..{levels.stop - 1}"
        raise ConfigError(f"invalid level in compression {text!r}", hint=f"levels for {family}: {allowed}")
    return Compression(family, int(level_text))


def is_compression(text: str | None) -> bool:
    try:
        parse_compression(text or "")
        return True
    except ConfigError:
        return False


def compression_extension(text: str) -> str:
    return parse_compression(text).extension


def _optional(module: str):
    try:
        return __import__(module)
    except ImportError:
        raise ConfigError(
            f"compression needs the {module!r} package, which is not installed",
            hint="pip install 'foundry-anywhere[compression]'",
        ) from None


def compress(compression: str, data: bytes) -> bytes:
    c = parse_compression(compression)
    if c.family == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=c.level).compress(data)
    if c.family == "gz":
        return gzip.compress(data, c.level, mtime=0)
    if c.family == "bz2":
        return bz2.compress(data, c.level)
    if c.family == "br":
        return _optional("brotli").compress(data, quality=c.level)
    return _optional("snappy").compress(data)


def decompress(compression: str, data: bytes) -> bytes:
    family = parse_compression(compression).family
    try:
        if family == "zstd":
            import zstandard

            # every frame: a seekable shard (format.zstd_seekable) is several
            return zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
        if family == "gz":
            return gzip.decompress(data)
        if family == "bz2":
            return bz2.decompress(data)
        if family == "br":
            return _optional("brotli").decompress(data)
        return _optional("snappy").decompress(data)
    except ConfigError:
        raise
    except Exception as exc:
        raise DataError(f"cannot decompress {family} data: {exc}") from exc


def compress_file(compression: str, src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Compress `src` into `dst` (atomically), streaming where the family allows; zstd as seekable
    frames (format.zstd_seekable)."""
    c = parse_compression(compression)
    with atomic_destination(dst) as tmp, open(src, "rb") as fin, open(tmp, "wb") as fout:
        if c.family == "zstd":  # frames a reader can decompress one by one, readable as one stream
            from .zstd_seekable import write_seekable

            write_seekable(fin, fout, c.level)
        elif c.family == "gz":
            with gzip.GzipFile(filename="", mode="wb", compresslevel=c.level, fileobj=fout, mtime=0) as gz:
                shutil.copyfileobj(fin, gz, _CHUNK)
        elif c.family == "bz2":
            comp = bz2.BZ2Compressor(c.level)
            while chunk := fin.read(_CHUNK):
                fout.write(comp.compress(chunk))
            fout.write(comp.flush())
        elif c.family == "br":
            comp = _optional("brotli").Compressor(quality=c.level)
            while chunk := fin.read(_CHUNK):
                fout.write(comp.process(chunk))
            fout.write(comp.finish())
        else:
            fout.write(_optional("snappy").compress(fin.read()))


def decompress_stream(compression: str, src: BinaryIO | bytes | memoryview, fout: BinaryIO) -> None:
    """Decompress `src` (a stream, or bytes already in memory: a download, a mapped file) into
    `fout` frame by frame, in bounded memory except for snappy. Nothing goes through a file."""
    family = parse_compression(compression).family
    fin = io.BytesIO(src) if isinstance(src, (bytes, bytearray, memoryview)) and family != "zstd" else src
    try:
        if family == "zstd":
            import zstandard

            dctx = zstandard.ZstdDecompressor()
            if isinstance(src, (bytes, bytearray, memoryview)):  # straight from the buffer, no input copies
                with dctx.stream_writer(fout, write_size=_CHUNK * 4, closefd=False) as writer:
                    writer.write(src)
            else:
                dctx.copy_stream(fin, fout, read_size=_CHUNK, write_size=_CHUNK)
        elif family == "gz":
            with gzip.GzipFile(fileobj=fin, mode="rb") as gz:
                shutil.copyfileobj(gz, fout, _CHUNK)
        elif family == "bz2":
            with bz2.BZ2File(fin, mode="rb") as bz:
                shutil.copyfileobj(bz, fout, _CHUNK)
        elif family == "br":
            dec = _optional("brotli").Decompressor()
            while chunk := fin.read(_CHUNK):
                fout.write(dec.process(chunk))
            if not dec.is_finished():
                raise DataError("truncated brotli stream")
        else:
            fout.write(_optional("snappy").decompress(fin.read()))
    except (ConfigError, DataError):
        raise
    except Exception as exc:
        raise DataError(f"cannot decompress {family} data: {exc}") from exc


def decompress_file(compression: str, src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Decompress `src` into `dst` (atomically), in bounded memory except for snappy."""
    try:
        with atomic_destination(dst) as tmp, open(src, "rb") as fin, open(tmp, "wb") as fout:
            decompress_stream(compression, fin, fout)
    except DataError as exc:
        raise DataError(f"cannot decompress {src}: {exc.message}") from exc
