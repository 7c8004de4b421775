"""Samples read as rows of fixed columns: one sample's stored bytes are its columns' values back to
back (`SampleReader.fixed_columns`), so one `preadv` a sample scatters them into each column's row
of a batch's arrays (`read_into`), with no sample object and no decode. The loader reads the
default collate's batch this way (loader.worker_batches.read_rows) and a user's collate_fn gets
samples that view such rows (`row_samples`). On with ReadPolicy.reads_rows."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate

from ..format.contract import FixedColumn, SampleReader


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
    return collated.dtype == torch_dtype(column.dtype) and collated.shape == (2,)


def columns_of(shards: list[int], readers: dict[int, Any]) -> list[FixedColumn] | None:
    """The fixed columns every one of these shards has, or None."""
    columns = None
    for shard in set(shards):
        found = fixed_columns(readers[shard])
        if found is None or (columns is not None and found != columns):
            return None
        columns = found
    return columns


def row_samples(shards: list[int], indices: list[int], readers: dict[int, Any]) -> list[dict[str, Any]] | None:
    """The samples `get_sample` makes, for a user's collate_fn, read as rows of fixed columns (one
    `preadv` a sample, no decode): each array a row of a new array per column, each number the
    type the reader gives; None when a shard's columns are not all fixed-size numbers."""
    columns = columns_of(shards, readers)
    if columns is None or any(c.kind == "array" and not c.shape for c in columns):  # 0-d arrays stay arrays
        return None
    n = len(indices)
    # new arrays every batch: a collate_fn may keep the samples' arrays (views) in its batch
    targets = {c.name: np.empty((n, *c.shape), c.dtype) for c in columns}
    read_into(columns, targets, shards, indices, readers)
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


def read_into(columns: list[FixedColumn], targets: dict[str, np.ndarray], shards: list[int],
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


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype
