"""Whole batches made inside DataLoader workers, read straight into the batch's memory.

torch's DataLoader asks a worker for a batch one sample at a time (`next()` per sample), and the
collate then copies every sample into the batch. StreamingDataLoader instead lets the worker's
iterator make whole batches (`WorkerBatches`): the batch is the same consecutive samples of the
worker's stream that torch would have taken, collated by the same function.

For the default collate and shards whose columns all have a fixed size and a numeric type (token
arrays, labels), the batch skips the samples altogether: one `preadv` per sample scatters its
stored bytes into each column's row of the batch, in the worker's shared-memory ring
(batch_ring.py). No sample object, no decode, one copy from the page cache into the tensor the
training loop gets.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch.utils.data import default_collate

from . import batch_ring


@dataclass(frozen=True)
class FixedColumn:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]   # of one sample's value
    nbytes: int              # stored bytes of one sample's value


@dataclass(frozen=True)
class WorkerBatches:
    """How the loader batches: `size` samples per batch (the last one shorter unless `drop_last`),
    collated by `collate`; `reads_rows` when that collate is the loader's default one."""

    size: int
    drop_last: bool
    collate: Callable[[list], Any]
    reads_rows: bool

    def make(self, shards: list[int], indices: list[int], readers: dict[int, Any],
             get: Callable[[int, int], Any]) -> Any:
        """The batch of these samples (`get(shard, index)` makes one sample the usual way)."""
        if self.reads_rows:
            batch = read_rows(shards, indices, readers)
            if batch is not None:
                return batch
        return self.collate([get(s, j) for s, j in zip(shards, indices)])


def fixed_columns(reader: Any) -> list[FixedColumn] | None:
    """The shard's columns when one sample's stored bytes are its columns' values back to back,
    each a fixed-size numeric value that the default collate stacks as is; else None. Checked
    against a decoded sample and its collate, once per reader."""
    cached = getattr(reader, "_fixed_columns", False)
    if cached is not False:
        return cached
    reader._fixed_columns = columns = _find_fixed_columns(reader)
    return columns


def _find_fixed_columns(reader: Any) -> list[FixedColumn] | None:
    info = reader.info
    if (not hasattr(reader, "read_rows_into") or info.format != "mds" or sys.byteorder != "little"
            or any(size is None for size in info.column_sizes) or not len(reader)):
        return None
    sample = reader.get_sample(0)
    columns = []
    for name, size in zip(info.column_names, info.column_sizes):
        value = sample[name]
        if isinstance(value, np.ndarray):  # the default collate stacks these as they are
            dtype, shape = value.dtype, tuple(value.shape)
        elif isinstance(value, (np.generic, int)) and not isinstance(value, bool):
            # numbers go through torch's default_collate: keep the column only if it gives the
            # stored type (it does for Python ints and numpy scalars that torch has)
            dtype, shape = np.dtype(np.int64) if type(value) is int else value.dtype, ()
            collated = default_collate([value, value])
            if collated.dtype != _torch_dtype(dtype) or collated.shape != (2,):
                return None
        else:
            return None
        if dtype.kind not in "biuf" or not dtype.isnative or dtype.itemsize * int(np.prod(shape)) != size:
            return None
        columns.append(FixedColumn(name, dtype, shape, size))
    return columns


def read_rows(shards: list[int], indices: list[int], readers: dict[int, Any]) -> dict[str, Any] | None:
    """The default collate's batch of these samples, read straight into a ring slot (or, with none
    free, into new shared memory); None when a shard's columns are not all fixed-size numbers."""
    columns = None
    for shard in set(shards):
        found = fixed_columns(readers[shard])
        if found is None or (columns is not None and found != columns):
            return None
        columns = found
    n = len(indices)
    shapes = {c.name: ((n, *c.shape), c.dtype) for c in columns}
    reserved = batch_ring.reserve(shapes)
    if reserved is None:
        out = {name: _shared_tensor(shape, dtype) for name, (shape, dtype) in shapes.items()}
        targets = {name: t.numpy() for name, t in out.items()}
    else:
        targets, out = reserved
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
    return out


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


def _shared_tensor(shape: tuple, dtype: np.dtype) -> torch.Tensor:
    storage = torch.UntypedStorage._new_shared(int(np.prod(shape)) * dtype.itemsize)
    return torch.empty(0, dtype=_torch_dtype(dtype)).set_(storage, 0, shape)
