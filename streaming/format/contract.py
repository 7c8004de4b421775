"""The reader contract: what every reader of one shard's samples does, declared once.

Every reader the read path holds is a `SampleReader`: the whole-file readers (format.reader), the
early readers that read a shard before it is whole (format.framed_reader, format.ranged_reader:
`EarlyReader`), and the switching reader the hot loop sees while a shard is made whole
(read.early.EarlyShardReader). Callers ask the contract, never `getattr`/`hasattr`: an ability a
reader lacks has a default here that says so (no fixed columns, nothing read ahead, settled).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Sequence

import numpy as np


@dataclass(frozen=True)
class FixedColumn:
    """A column whose every value is stored as `nbytes` bytes of one numeric type, back to back
    with the other fixed columns: a sample's rows can be read straight into a batch's buffers."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]   # of one sample's value
    nbytes: int              # stored bytes of one sample's value
    kind: str = "array"      # what the sample holds: "array" (ndarray), "int" (Python's), "numpy" (scalar)


class SampleReader(ABC):
    """Random access to one shard's samples."""

    info: Any                   # the shard's format.index.ShardInfo
    # The local file this reader reads: deleted under it, the shard must be fetched again. None for
    # a reader of no local file (an early reader: the file is not whole yet).
    path: str | None = None
    # Reading from the shard's whole local file: the hot loop may call get_sample directly.
    settled: ClassVar[bool] = True
    # Reads of samples can start before they are asked for (ranged early reads): `expect(indices)`,
    # and for an EarlyReader `fetch_ahead(indices, limit)`.
    reads_ahead: ClassVar[bool] = False

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def get_sample(self, i: int) -> Any:
        """Sample `i`, decoded (arrays may view the shard's memory)."""

    @abstractmethod
    def get_sample_bytes(self, i: int) -> bytes:
        """Sample `i`'s stored bytes (for MDS: its length header and column payloads)."""

    def fixed_columns(self) -> list[FixedColumn] | None:
        """The columns, when one sample's stored bytes are each a fixed-size numeric value back to
        back and `read_rows_into` reads them; else None (the reader's own answer, kept by it)."""
        return None

    def read_rows_into(self, indices: list[int], rows: list[Sequence]) -> None:
        """Sample `indices[k]`'s stored bytes scattered into the buffers `rows[k]`: only a reader
        whose `fixed_columns()` is not None does this."""
        raise NotImplementedError(f"{type(self).__name__} does not read rows")

    def expect(self, indices: list[int]) -> None:
        """Samples this reader will soon be asked for, in order (a reader that `reads_ahead`
        starts on them); others do nothing."""

    @abstractmethod
    def close(self) -> None: ...


class EarlyReader(SampleReader):
    """A reader of a shard that is not whole yet: its seekable compressed file frame by frame
    (format.framed_reader) or its remote copy by ranged reads (format.ranged_reader). Each read
    costs budget (`spent()`), which read.early bounds."""

    @abstractmethod
    def spent(self) -> int:
        """Units of the early budget used so far (frames decompressed, blocks fetched)."""

    def holds(self, i: int) -> bool:
        """Sample `i` is read already, or on its way: reading it costs nothing more."""
        return False

    def fetch_ahead(self, indices: Iterable[int], limit: int) -> None:
        """Start reading samples `indices` (at most `limit` budget units); a reader that does not
        `reads_ahead` does nothing."""
