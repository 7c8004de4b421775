"""Batches handed from DataLoader workers through a ring of reused shared-memory slots.

torch's DataLoader hands every batch tensor over in a new shared-memory segment: the worker creates
it (and faults its pages in), sends its fd through the worker's resource-sharer socket, and the main
process fetches the fd, maps the segment and faults the pages in again; the segment is unmapped
when the batch dies. For 2 MiB batches that costs more than reading the samples (about 1.4 ms a
batch here against 0.4 ms for the samples, bench/streaming/README.md).

Here each worker owns one segment, split into a few slots. The segment's fd crosses once, with the
first batch; after that a batch is a slot number, an offset, a shape and a dtype. The main process
rebuilds each column as a tensor that views the slot directly (no copy), and the slot goes back to
the worker when the last tensor viewing it is freed. Bytes and str columns travel packed in the
slot too, and come out of it as the list of values they were (copied: nothing keeps the slot).
A worker that finds no free slot (a training loop that keeps many batches alive) hands the batch
over the usual way, so nothing ever waits for a slot.

Slot ownership is one byte per slot at the head of the segment: the worker sets it when it fills
the slot, the main process clears it when the slot's last tensor dies. Each side writes only the
transition it owns, and the main process clears a byte only after its last read of the slot.
"""

from __future__ import annotations

import multiprocessing.util
import os

import numpy as np
import torch

SLOTS = 4                  # per worker: one being filled, prefetch_factor (2) waiting, one in the loop
MAX_RING_BYTES = 256 << 20  # per worker; bigger batches go the usual way
_HEADER = 4096             # the slot bytes, then page-aligned slots
_ALIGN = 64


def _bytes_of(storage: torch.UntypedStorage, size: int | None = None) -> np.ndarray:
    """A uint8 numpy view of a shared storage (its first `size` bytes)."""
    view = torch.empty(0, dtype=torch.uint8)
    return (view.set_(storage) if size is None else view.set_(storage, 0, (size,))).numpy()


class _Ring:
    """A worker's segment: the slot bytes and SLOTS slots of `slot_bytes` each."""

    def __init__(self, slot_bytes: int):
        self.slot_bytes = slot_bytes
        self.storage = torch.UntypedStorage._new_shared(_HEADER + SLOTS * slot_bytes)
        self.bytes = _bytes_of(self.storage)
        self.key = (os.getpid(), id(self))
        self.announced = False  # the main process has the segment's fd
        self._next = 0

    def take(self) -> int | None:
        """A free slot, marked as the main process's until it frees it; None when all are out."""
        for k in range(SLOTS):
            slot = (self._next + k) % SLOTS
            if self.bytes[slot] == 0:
                self.bytes[slot] = 1
                self._next = (slot + 1) % SLOTS
                return slot
        return None


class _SlotRef:
    """Worker side: one filled slot; pickles into a _SlotLease in the main process. The columns of a
    batch share one _SlotRef object, so pickle's memo sends it once and they share one lease."""

    def __init__(self, ring: _Ring, slot: int):
        self.ring, self.slot = ring, slot

    def __reduce__(self):
        storage = None
        if not self.ring.announced:  # the segment's fd travels with the ring's first batch only
            storage, self.ring.announced = self.ring.storage, True
        return _SlotLease, (self.ring.key, self.slot, self.ring.slot_bytes, storage)


class _RingColumn:
    """Worker side: one stacked column in a slot; pickles into a tensor viewing that slot."""

    def __init__(self, ref: _SlotRef, offset: int, shape: tuple, dtype: np.dtype):
        self.ref, self.offset, self.shape, self.dtype = ref, offset, shape, dtype

    def __reduce__(self):
        return _column_tensor, (self.ref, self.offset, self.shape, self.dtype.str)


# main process: each worker ring's segment and its slot bytes, mapped once (forget_rings drops a
# finished loader's)
_RINGS: dict[tuple[int, int], tuple[torch.UntypedStorage, np.ndarray]] = {}


class _SlotLease:
    """Main process: a slot in use by one batch's tensors; frees the slot when they are all gone."""

    def __init__(self, key: tuple[int, int], slot: int, slot_bytes: int, storage: torch.UntypedStorage | None):
        if storage is not None:
            _RINGS[key] = (storage, _bytes_of(storage, SLOTS))
        self.storage, self.owners = _RINGS[key]  # the storage keeps the segment mapped
        self.slot = slot
        self.base = self.storage.data_ptr() + _HEADER + slot * slot_bytes

    def __del__(self) -> None:
        # the last tensor viewing the slot is gone: the worker may fill it again
        self.owners[self.slot] = 0


class _SlotView:
    """numpy's way in: an object exposing the slot's memory keeps the lease alive as the array's base."""

    def __init__(self, lease: _SlotLease, offset: int, shape: tuple, typestr: str):
        self.lease = lease
        self.__array_interface__ = {"data": (lease.base + offset, False), "shape": shape,
                                    "typestr": typestr, "version": 3}


def _column_tensor(lease: _SlotLease, offset: int, shape: tuple, typestr: str) -> torch.Tensor:
    return torch.from_numpy(np.asarray(_SlotView(lease, offset, shape, typestr)))


class _RingValues:
    """Worker side: a column of bytes or str values packed back to back in a slot; pickles into the
    list of values (copied out of the slot, so the slot is free again once the batch arrives)."""

    def __init__(self, ref: _SlotRef, offset: int, ends: list[int], text: bool):
        self.ref, self.offset, self.ends, self.text = ref, offset, ends, text

    def __reduce__(self):
        return _column_values, (self.ref, self.offset, self.ends, self.text)


def _column_values(lease: _SlotLease, offset: int, ends: list[int], text: bool) -> list:
    packed = memoryview(np.asarray(_SlotView(lease, offset, (ends[-1] if ends else 0,), "|u1")))
    starts = [0, *ends[:-1]]
    if text:
        return [str(packed[a:b], "utf-8") for a, b in zip(starts, ends)]
    return [packed[a:b].tobytes() for a, b in zip(starts, ends)]


def forget_rings(worker_pids: list[int]) -> None:
    """A loader's workers are gone: drop their segments (tensors still viewing one keep it mapped)."""
    for key in [k for k in _RINGS if k[0] in worker_pids]:
        del _RINGS[key]


_worker_ring: _Ring | None = None  # this worker's ring (one per worker process)


def _drop_worker_ring() -> None:
    global _worker_ring
    _worker_ring = None


def place(columns: dict[str, list[np.ndarray] | np.ndarray],
          values: dict[str, tuple[bytes, list[int], bool]] | None = None) -> dict[str, object] | None:
    """In a DataLoader worker: put a batch's columns into one free slot of this worker's ring:
    `columns` are arrays (or lists of equal-shape arrays, stacked), handed over as tensors;
    `values` are bytes or str columns as (their values packed back to back, each value's end, str
    or not), handed over as the list of values. None when the batch is too big for a ring or no
    slot is free (the caller hands the batch over the usual way)."""
    values = values or {}
    shapes = {key: (arrays.shape, arrays.dtype) if isinstance(arrays, np.ndarray)
              else ((len(arrays), *arrays[0].shape), arrays[0].dtype) for key, arrays in columns.items()}
    shapes.update({key: ((len(packed),), np.dtype(np.uint8)) for key, (packed, _, _) in values.items()})
    reserved = reserve(shapes)
    if reserved is None:
        return None
    targets, out = reserved
    for key, arrays in columns.items():
        if isinstance(arrays, np.ndarray):
            targets[key][...] = arrays
        else:
            np.stack(arrays, out=targets[key])
    for key, (packed, ends, text) in values.items():
        targets[key][...] = np.frombuffer(packed, np.uint8)
        column = out[key]
        out[key] = _RingValues(column.ref, column.offset, ends, text)
    return out


def reserve(columns: dict[str, tuple[tuple, np.dtype]]) -> tuple[dict[str, np.ndarray], dict[str, _RingColumn]] | None:
    """In a DataLoader worker: room in one free slot for columns of these (shape, dtype): numpy
    views to fill, and what to hand over once they are filled. None when the batch is too big for
    a ring or no slot is free (the caller hands the batch over the usual way)."""
    global _worker_ring
    layout, size = {}, 0
    for key, (shape, dtype) in columns.items():
        nbytes = int(np.prod(shape)) * dtype.itemsize
        layout[key] = (size, nbytes, shape, dtype)
        size += -(-nbytes // _ALIGN) * _ALIGN
    ring = _worker_ring if _worker_ring is not None and _worker_ring.key[0] == os.getpid() else None
    if ring is None or size > ring.slot_bytes:
        # the first batch sizes the ring; a bigger batch later gets a new one, twice the size (the
        # main process keeps the old one mapped while its tensors live)
        slot_bytes = -(-max(size, 2 * ring.slot_bytes if ring else 0) // 4096) * 4096
        if size == 0 or _HEADER + SLOTS * slot_bytes > MAX_RING_BYTES:
            return None
        if ring is None:  # this process's first ring
            # multiprocessing runs this as the worker exits: under the file_system sharing strategy
            # a segment is a file in /dev/shm, removed once no process holds it
            multiprocessing.util.Finalize(None, _drop_worker_ring, exitpriority=0)
        ring = _worker_ring = _Ring(slot_bytes)
    slot = ring.take()
    if slot is None:
        return None
    ref = _SlotRef(ring, slot)
    base = _HEADER + slot * ring.slot_bytes
    targets, out = {}, {}
    for key, (offset, nbytes, shape, dtype) in layout.items():
        targets[key] = ring.bytes[base + offset: base + offset + nbytes].view(dtype).reshape(shape)
        out[key] = _RingColumn(ref, offset, shape, dtype)
    return targets, out
