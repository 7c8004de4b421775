"""Whole batches made inside DataLoader workers, read straight into the batch's memory.

torch's DataLoader asks a worker for a batch one sample at a time (`next()` per sample), and the
collate then copies every sample into the batch. StreamingDataLoader instead lets the worker's
iterator make whole batches (`WorkerBatches`): the batch is the same consecutive samples of the
worker's stream that torch would have taken, collated by the same function.

For the default collate and shards whose columns all have a fixed size and a numeric type (token
arrays, labels), the batch skips the samples altogether: one `preadv` per sample scatters its
stored bytes into each column's row of the batch, in the worker's shared-memory ring
(ring.py). No sample object, no decode, one copy from the page cache into the tensor the
training loop gets. A `batch_transform` gets that batch (in the worker's own memory) and makes
the batch the loop gets.

A user's collate_fn gets the samples it would get from the dataset; on such shards they are
views of rows read the same way (no decode). What the collate_fn or the batch_transform returns
crosses to the main process through the ring too (handover.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from ..read.rows import torch_dtype, columns_of, read_into, row_samples
from . import ring
from .handover import hand_over


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


def read_rows(shards: list[int], indices: list[int], readers: dict[int, Any],
              into_ring: bool = True) -> dict[str, Any] | None:
    """The default collate's batch of these samples, read straight into a ring slot (or, with none
    free, into new shared memory; with `into_ring=False`, into this process's memory, for a
    batch_transform to make the batch); None when a shard's columns are not all fixed-size numbers."""
    columns = columns_of(shards, readers)
    if columns is None:
        return None
    n = len(indices)
    shapes = {c.name: ((n, *c.shape), c.dtype) for c in columns}
    reserved = ring.reserve(shapes) if into_ring else None
    if not into_ring:
        targets = {name: np.empty(shape, dtype) for name, (shape, dtype) in shapes.items()}
        out = {name: torch.from_numpy(array) for name, array in targets.items()}
    elif reserved is None:
        out = {name: _shared_tensor(shape, dtype) for name, (shape, dtype) in shapes.items()}
        targets = {name: t.numpy() for name, t in out.items()}
    else:
        targets, out = reserved
    read_into(columns, targets, shards, indices, readers)
    return out


def _shared_tensor(shape: tuple, dtype: np.dtype) -> torch.Tensor:
    storage = torch.UntypedStorage._new_shared(int(np.prod(shape)) * dtype.itemsize)
    return torch.empty(0, dtype=torch_dtype(dtype)).set_(storage, 0, shape)
