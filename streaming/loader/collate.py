"""The loader's default collate: torch's default_collate, with numpy columns (read-only views of
mapped shards) stacked in one copy, and in a DataLoader worker a batch's columns placed in a slot
of the worker's ring (ring.py) instead of a shared-memory segment per tensor."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from .ring import place


def _stack(arrays: list) -> Any:
    """Equal-shape numpy arrays -> one tensor, copied once (straight into shared memory inside a
    DataLoader worker, so the batch reaches the main process without another copy)."""
    first = arrays[0]
    shape = (len(arrays), *first.shape)
    dtype = torch.from_numpy(np.empty(0, first.dtype)).dtype
    if get_worker_info() is not None:
        storage = torch.UntypedStorage._new_shared(len(arrays) * first.nbytes)
        out = torch.empty(0, dtype=dtype).set_(storage, 0, shape)
    else:
        out = torch.empty(shape, dtype=dtype)
    np.stack(arrays, out=out.numpy())
    return out


def collate_read_only(batch: list, ring: bool = True) -> Any:
    """default_collate, with numpy columns (read-only views of mapped shards) stacked in one copy
    (in a worker, into its ring unless `ring=False`: a batch_transform gets tensors, not slots).

    Collating copies the samples into a new tensor, so the read-only source is never written
    through; torch's warning about non-writable arrays does not apply here.
    """
    first = batch[0] if batch else None
    if isinstance(first, dict):
        out, stackable = {}, {}
        for key, value in first.items():
            values = [sample[key] for sample in batch]
            if (isinstance(value, np.ndarray) and value.dtype.kind in _NUMERIC
                    and all(type(v) is np.ndarray and v.shape == value.shape and v.dtype == value.dtype for v in values)):
                stackable[key] = values
            out[key] = values
        in_ring = (_place_in_ring(first, out, stackable) if ring and get_worker_info() is not None else None) or {}
        for key, values in out.items():
            out[key] = in_ring.get(key) or (_stack(values) if key in stackable else collate_read_only(values))
        return out
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return default_collate(batch)


_NUMERIC = "biuf"
# what default_collate makes of a column of Python numbers
_NUMBER_DTYPES = {int: np.dtype(np.int64), float: np.dtype(np.float64), bool: np.dtype(np.bool_)}


def _place_in_ring(first: dict, columns: dict[str, list], stackable: dict[str, list]) -> dict | None:
    """In a worker: a batch's columns in a slot of the worker's ring (ring.py), each as
    default_collate makes it: arrays stacked, numbers (Python's or numpy's) as a tensor of their
    type, bytes and str as the list of values. A pipe would carry every value of a bytes column
    through the worker's and the main process's pickling (images: ~0.6 ms a batch of 256 in the
    main process), and a number column would get a shared-memory segment of its own a batch."""
    arrays: dict[str, Any] = dict(stackable)
    values: dict[str, tuple[bytes, list[int], bool]] = {}
    for key, value in first.items():
        if key in stackable:
            continue
        kind, column = type(value), columns[key]
        if not all(type(v) is kind for v in column):
            continue
        dtype = _NUMBER_DTYPES.get(kind)
        if dtype is None and isinstance(value, np.generic) and value.dtype.kind in _NUMERIC:
            dtype = value.dtype
        if dtype is not None:
            try:
                arrays[key] = np.array(column, dtype=dtype)
            except OverflowError:  # an int beyond int64: default_collate says so
                pass
        elif kind is bytes or kind is str:
            try:
                encoded = column if kind is bytes else [v.encode("utf-8") for v in column]
            except UnicodeEncodeError:  # a lone surrogate: pickle carries it
                continue
            values[key] = (b"".join(encoded), np.cumsum([len(v) for v in encoded]).tolist(), kind is str)
    return place(arrays, values) if arrays or values else None
