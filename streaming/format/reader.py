"""Shard readers: random access to the samples of one local, uncompressed shard.

`open_shard(info, raw_path)` picks the reader from `info.format`. Files are memory-mapped once (or,
with `mapped=False`, read with one pread per sample); the offsets table is parsed once with numpy;
per-sample work is a slice and the column decoders. A reader is picklable (the map or file is
reopened lazily in the new process).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from typing import Any, Sequence

import sys

import numpy as np

from foundry.plugins.errors import DataError, DataFileNotFoundError

from .contract import FixedColumn, SampleReader
from .encodings import get_encoding
from .index import SPLIT_FORMATS, ShardInfo
from .mds_decoder import compile_sample_decoder


class ShardReader(SampleReader):
    """Common part: one mmap-ed data file and a table of n+1 absolute sample offsets."""

    def __init__(self, info: ShardInfo, raw_path: str | os.PathLike):
        self.info = info
        self.path = os.fspath(raw_path)
        self._map: mmap.mmap | None = None
        self._offsets: list[int] | None = None

    def __len__(self) -> int:
        return self.info.samples

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_map"] = None
        state["_offsets"] = None
        return state

    def _open_map(self, path: str) -> mmap.mmap:
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    raise DataError(f"shard file {path} is empty")
                # A private mapping (MAP_PRIVATE): read, it shares the page cache as a read-only one
                # does; written (torch.from_numpy(sample["x"]).mul_(2) writes through the array's
                # view), the page is copied for this process. A read-only map would kill the
                # process with SIGSEGV there, with no Python error; the file never changes.
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except FileNotFoundError:
            raise DataFileNotFoundError(f"shard file {path} does not exist") from None

    def _read_offsets(self, buf: Any, where: str, size: int | None = None) -> list[int]:
        if len(buf) < 4:
            raise DataError(f"{where} is truncated (no header)")
        (n,) = struct.unpack_from("<I", buf, 0)
        if n != self.info.samples:
            raise DataError(f"{where} holds {n} samples but index.json says {self.info.samples}")
        if len(buf) < 4 * (n + 2):
            raise DataError(f"{where} is truncated (offsets table)")
        offsets = np.frombuffer(buf, "<u4", n + 1, 4)
        if n and (np.any(np.diff(offsets.astype(np.int64)) < 0)):
            raise DataError(f"{where} has decreasing sample offsets")
        size = len(buf) if size is None else size
        if int(offsets[-1]) > size and self._map_is_data(buf):
            raise DataError(f"{where} is truncated ({size} bytes, samples end at {int(offsets[-1])})")
        return offsets.tolist()

    def _ensure(self) -> None:
        raise NotImplementedError

    def _map_is_data(self, buf) -> bool:
        return True

    def _check_index(self, i: int) -> int:
        n = self.info.samples
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sample {i} out of range for shard {self.info.raw_basename} ({n} samples)")
        return i

    def get_sample_bytes(self, i: int) -> bytes:
        """The sample's stored bytes (for MDS: the length header and column payloads)."""
        if self._offsets is None:
            self._ensure()
        i = self._check_index(i)
        return self._map[self._offsets[i]:self._offsets[i + 1]]

    def get_sample(self, i: int) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.get_sample(i)

    def __iter__(self):
        for i in range(len(self)):
            yield self.get_sample(i)

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a caller still holds a view; the map goes with it
                pass
        self._map = None
        self._offsets = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MDSShardReader(ShardReader):
    """`uint32 n, uint32 offsets[n+1], config JSON, samples` (see MDS_FORMAT.md)."""

    def __init__(self, info: ShardInfo, raw_path: str | os.PathLike):
        super().__init__(info, raw_path)
        self._decode = compile_sample_decoder(info.column_names, info.column_encodings, info.column_sizes)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        del state["_decode"]  # generated code: rebuilt from the info
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        info = self.info
        self._decode = compile_sample_decoder(info.column_names, info.column_encodings, info.column_sizes)

    def _ensure(self) -> None:
        self._map = self._open_map(self.path)
        self._offsets = self._read_offsets(self._map, f"shard {self.path}")

    def get_sample(self, i: int) -> dict[str, Any]:
        offsets = self._offsets
        if offsets is None:
            self._ensure()
            offsets = self._offsets
        if not 0 <= i < self.info.samples:
            i = self._check_index(i)
        return self._decode(self._map, offsets[i])


class MDSShardFileReader(MDSShardReader):
    """An MDS shard read with one `pread` per sample instead of a map: samples are small copies,
    and the process maps none of the file. For processes that copy every sample anyway (DataLoader
    workers, whose collate copies the batch): read through maps, a shard's pages would count in the
    RSS of every worker that reads it (the page cache maps them in large folios, so a few random
    samples map the whole file), where pread leaves one copy in the page cache per node."""

    def __init__(self, info: ShardInfo, raw_path: str | os.PathLike):
        super().__init__(info, raw_path)
        self._fd: int | None = None
        self._fixed: list[FixedColumn] | None | bool = False  # fixed_columns(), found once

    def fixed_columns(self) -> list[FixedColumn] | None:
        """Checked against a decoded sample (its values' types and shapes), once per reader."""
        if self._fixed is False:
            self._fixed = _find_fixed_columns(self)
        return self._fixed

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_fd"] = None
        return state

    def _ensure(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise DataFileNotFoundError(f"shard file {self.path} does not exist") from None
        try:
            size = os.fstat(fd).st_size
            head = os.pread(fd, 4 * (self.info.samples + 2), 0)
            self._offsets = self._read_offsets(head, f"shard {self.path}", size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _span(self, i: int) -> tuple[int, int]:
        """Where sample `i`'s bytes begin and end in the file (opened on first use)."""
        offsets = self._offsets
        if offsets is None:
            self._ensure()
            offsets = self._offsets
        if not 0 <= i < self.info.samples:
            i = self._check_index(i)
        return offsets[i], offsets[i + 1]

    def get_sample_bytes(self, i: int) -> bytes:
        begin, end = self._span(i)
        return os.pread(self._fd, end - begin, begin)

    def get_sample(self, i: int) -> dict[str, Any]:
        begin, end = self._span(i)
        return self._decode(os.pread(self._fd, end - begin, begin), 0)

    def read_rows_into(self, indices: list[int], rows: list[Sequence]) -> None:
        """Sample `indices[k]`'s stored bytes scattered into the buffers `rows[k]` (one read each;
        their sizes add up to the sample's): how a batch reads fixed-size columns straight into its
        tensors. One pread a sample and no Python call between them: a batch's 8 KiB token rows
        cost ~1.8 µs each here, where a call a row cost ~2.3 µs, against ~1.5 µs for the bare pread."""
        if self._offsets is None:
            self._ensure()
        offsets, fd, n, preadv = self._offsets, self._fd, self.info.samples, os.preadv
        for i, buffers in zip(indices, rows):
            if not 0 <= i < n:
                i = self._check_index(i)
            begin = offsets[i]
            got = preadv(fd, buffers, begin)
            if got != offsets[i + 1] - begin:
                raise DataError(f"shard {self.path} changed or is truncated: sample {i} is "
                                f"{offsets[i + 1] - begin} bytes, read {got}")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._offsets = None


def _find_fixed_columns(reader: MDSShardReader) -> list[FixedColumn] | None:
    info = reader.info
    if sys.byteorder != "little" or any(size is None for size in info.column_sizes) or not len(reader):
        return None
    sample = reader.get_sample(0)
    columns = []
    for name, size in zip(info.column_names, info.column_sizes):
        value = sample[name]
        if isinstance(value, np.ndarray):
            kind, dtype, shape = "array", value.dtype, tuple(value.shape)
        elif isinstance(value, (np.generic, int)) and not isinstance(value, bool):
            kind, dtype, shape = ("int", np.dtype(np.int64), ()) if type(value) is int else ("numpy", value.dtype, ())
        else:
            return None
        if dtype.kind not in "biuf" or not dtype.isnative or dtype.itemsize * int(np.prod(shape)) != size:
            return None
        columns.append(FixedColumn(name, dtype, shape, size, kind))
    return columns


class SplitShardReader(ShardReader):
    """csv/tsv/xsv/json: a data file plus a meta file holding n and the offsets into the data."""

    def __init__(self, info: ShardInfo, raw_path: str | os.PathLike, meta_path: str | os.PathLike | None):
        super().__init__(info, raw_path)
        if meta_path is None:  # the meta file sits beside the data file
            meta_path = os.path.join(os.path.dirname(self.path), os.path.basename(info.meta.raw_basename))
        self.meta_path = os.fspath(meta_path)
        entry = info.entry
        self.newline = entry.get("newline", "\n")
        self.separator = {"csv": ",", "tsv": "\t"}.get(info.format, entry.get("separator"))
        from .xsv import xsv_decoder

        self._xsv_decoders = [xsv_decoder(e) for e in info.column_encodings] if info.format != "json" else None

    def _ensure(self) -> None:
        meta = self._open_map(self.meta_path)
        try:
            self._offsets = self._read_offsets(meta, f"meta file {self.meta_path}")
        finally:
            meta.close()
        self._map = self._open_map(self.path)
        if self._offsets[-1] > len(self._map):
            raise DataError(f"data file {self.path} is truncated")

    def _map_is_data(self, buf) -> bool:
        return False

    def get_sample(self, i: int) -> dict[str, Any]:
        text = self.get_sample_bytes(i).decode("utf-8")
        if self._xsv_decoders is None:
            return json.loads(text)
        parts = text[: len(text) - len(self.newline)].split(self.separator)
        return {name: dec(part) for name, dec, part in zip(self.info.column_names, self._xsv_decoders, parts)}


def refuse_unsafe(info: ShardInfo, allow_unsafe_types: bool) -> None:
    """Columns with an unsafe encoding (pkl) are refused unless `allow_unsafe_types=True`."""
    if not allow_unsafe_types:
        for name, encoding in zip(info.column_names, info.column_encodings):
            if info.format == "mds" and not get_encoding(encoding).safe:
                raise DataError(
                    f"column {name!r} of shard {info.raw_basename} uses the unsafe encoding {encoding!r} "
                    "(unpickling can run arbitrary code)",
                    hint="pass allow_unsafe_types=True if you trust this dataset",
                )


def open_shard(
    info: ShardInfo,
    raw_path: str | os.PathLike,
    *,
    meta_path: str | os.PathLike | None = None,
    allow_unsafe_types: bool = False,
    mapped: bool = True,
) -> ShardReader:
    """A reader over a local uncompressed shard (`raw_path` is the file named `info.raw_basename`).

    `mapped=False` reads MDS samples with pread instead of a map (see MDSShardFileReader).

    For split formats the meta file is `meta_path`, by default beside `raw_path`. Columns with an
    unsafe encoding (pkl) are refused unless `allow_unsafe_types=True`.
    """
    refuse_unsafe(info, allow_unsafe_types)
    if info.format == "mds":
        return MDSShardReader(info, raw_path) if mapped else MDSShardFileReader(info, raw_path)
    if info.format in SPLIT_FORMATS:
        return SplitShardReader(info, raw_path, meta_path)
    raise DataError(f"unknown shard format {info.format!r}")
