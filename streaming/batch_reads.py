"""Whole batches made inside DataLoader workers, read straight into the batch's memory.

torch's DataLoader asks a worker for a batch one sample at a time (`next()` per sample), and the
collate then copies every sample into the batch. StreamingDataLoader instead lets the worker's
iterator make whole batches (`WorkerBatches`): the batch is the same consecutive samples of the
worker's stream that torch would have taken, collated by the same function.

For the default collate and shards whose columns all have a fixed size and a numeric type (token
arrays, labels), the batch skips the samples altogether: one `preadv` per sample scatters its
stored bytes into each column's row of the batch, in the worker's shared-memory ring
(batch_ring.py). No sample object, no decode, one copy from the page cache into the tensor the
training loop gets. A `batch_transform` gets that batch (in the worker's own memory) and makes
the batch the loop gets.

A user's collate_fn gets the samples it would get from the dataset; on such shards they are
views of rows read the same way (no decode). What the collate_fn or the batch_transform returns
crosses to the main process through the ring too (batch_handover.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch.utils.data import default_collate

from . import batch_ring
from .batch_handover import hand_over
from .format.contract import FixedColumn, SampleReader


@dataclass(frozen=True)
class WorkerBatches:
    """How the loader batches: `size` samples per batch (the last one shorter unless `drop_last`),
    collated by `collate`, then given to `transform` (the user's batch_transform) when set.
    `default_collate`: `collate` is the loader's default one (its batch is read straight into
    the ring, unless a transform follows)."""

    size: int
    drop_last: bool
    collate: Callable[[list], Any]
    default_collate: bool = True
    transform: Callable[[Any], Any] | None = None

    def make(self, shards: list[int], indices: list[int], readers: dict[int, Any],
             get: Callable[[int, int], Any], reads_rows: bool) -> Any:
        """The batch of these samples (`get(shard, index)` makes one sample the usual way).
        `reads_rows` (ReadPolicy.reads_rows): samples may be read as rows (the reader makes them;
        no dataset subclass does)."""
        if reads_rows and self.default_collate:
            batch = read_rows(shards, indices, readers, self.transform is None)
            if batch is not None:
                return batch if self.transform is None else hand_over(self.transform(batch))
        samples = row_samples(shards, indices, readers) if reads_rows and not self.default_collate else None
        if samples is None:
            samples = [get(s, j) for s, j in zip(shards, indices)]
        batch = self.collate(samples)
        if self.transform is not None:
            batch = self.transform(batch)
        # the default collate placed its batch in the ring already
        return batch if self.default_collate and self.transform is None else hand_over(batch)


def fixed_columns(reader: SampleReader) -> list[FixedColumn] | None:
    """The shard's fixed columns (the reader finds them once: `SampleReader.fixed_columns`) when
    the default collate stacks each as stored; else None."""
    columns = reader.fixed_columns()
    return columns if columns is not None and all(_collates_as_stored(c) for c in columns) else None


@functools.lru_cache(maxsize=None)
def _collates_as_stored(column: FixedColumn) -> bool:
    """Arrays are stacked as they are; numbers go through torch's default_collate, which keeps the
    stored type for Python ints and the numpy scalars torch has."""
    if column.kind == "array":
        return True
    value = 0 if column.kind == "int" else column.dtype.type(0)
    collated = default_collate([value, value])
    return collated.dtype == _torch_dtype(column.dtype) and collated.shape == (2,)


def _columns(shards: list[int], readers: dict[int, Any]) -> list[FixedColumn] | None:
    """The fixed columns every one of these shards has, or None."""
    columns = None
    for shard in set(shards):
        found = fixed_columns(readers[shard])
        if found is None or (columns is not None and found != columns):
            return None
        columns = found
    return columns


def read_rows(shards: list[int], indices: list[int], readers: dict[int, Any],
              ring: bool = True) -> dict[str, Any] | None:
    """The default collate's batch of these samples, read straight into a ring slot (or, with none
    free, into new shared memory; with `ring=False`, into this process's memory, for a
    batch_transform to make the batch); None when a shard's columns are not all fixed-size numbers."""
    columns = _columns(shards, readers)
    if columns is None:
        return None
    n = len(indices)
    shapes = {c.name: ((n, *c.shape), c.dtype) for c in columns}
    reserved = batch_ring.reserve(shapes) if ring else None
    if not ring:
        targets = {name: np.empty(shape, dtype) for name, (shape, dtype) in shapes.items()}
        out = {name: torch.from_numpy(array) for name, array in targets.items()}
    elif reserved is None:
        out = {name: _shared_tensor(shape, dtype) for name, (shape, dtype) in shapes.items()}
        targets = {name: t.numpy() for name, t in out.items()}
    else:
        targets, out = reserved
    _read_into(columns, targets, shards, indices, readers)
    return out


def row_samples(shards: list[int], indices: list[int], readers: dict[int, Any]) -> list[dict[str, Any]] | None:
    """The samples `get_sample` makes, for a user's collate_fn, read as rows of fixed columns (one
    `preadv` a sample, no decode): each array a row of a new array per column, each number the
    type the reader gives; None when a shard's columns are not all fixed-size numbers."""
    columns = _columns(shards, readers)
    if columns is None or any(c.kind == "array" and not c.shape for c in columns):  # 0-d arrays stay arrays
        return None
    n = len(indices)
    # new arrays every batch: a collate_fn may keep the samples' arrays (views) in its batch
    targets = {c.name: np.empty((n, *c.shape), c.dtype) for c in columns}
    _read_into(columns, targets, shards, indices, readers)
    if all(c.kind == "array" for c in columns):
        if len(columns) == 1:
            name = columns[0].name
            return [{name: row} for row in targets[name]]
        arrays = [targets[c.name] for c in columns]
        return [dict(zip(targets, rows)) for rows in zip(*arrays)]
    values = []
    for c in columns:
        column = targets[c.name]
        values.append(list(column) if c.kind != "int" else column.tolist())
    return [dict(zip(targets, rows)) for rows in zip(*values)]


def _read_into(columns: list[FixedColumn], targets: dict[str, np.ndarray], shards: list[int],
               indices: list[int], readers: dict[int, Any]) -> None:
    """Each sample's stored bytes scattered into its row of each column's array in `targets`."""
    n = len(indices)
    flat = [(memoryview(targets[c.name].reshape(-1).view(np.uint8)), c.nbytes) for c in columns]
    if len(flat) == 1:  # one column, the usual case: half the cost of the general form below
        view, nb = flat[0]
        rows = [(view[at:at + nb],) for at in range(0, n * nb, nb)]
    else:
        rows = [[view[row * nb:(row + 1) * nb] for view, nb in flat] for row in range(n)]
    # each shard reads its rows in one call (a batch draws from ~13 of them here)
    by_shard: dict[int, tuple[list[int], list]] = {}
    for shard, index, row in zip(shards, indices, rows):
        mine = by_shard.get(shard)
        if mine is None:
            by_shard[shard] = mine = ([], [])
        mine[0].append(index)
        mine[1].append(row)
    for shard, (mine_indices, mine_rows) in by_shard.items():
        readers[shard].read_rows_into(mine_indices, mine_rows)


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


def _shared_tensor(shape: tuple, dtype: np.dtype) -> torch.Tensor:
    storage = torch.UntypedStorage._new_shared(int(np.prod(shape)) * dtype.itemsize)
    return torch.empty(0, dtype=_torch_dtype(dtype)).set_(storage, 0, shape)
