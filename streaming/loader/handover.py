"""A batch that the user's collate_fn or batch_transform made in a DataLoader worker, handed to the
main process through the worker's ring (ring.py) instead of torch's own pickling.

torch pickles every tensor of a worker's batch into a shared-memory segment of its own: the worker
creates the segment and copies the tensor in (in its queue's feeder thread, which takes the GIL
from the sample loop), sends the segment's fd through its resource-sharer socket, and the main
process fetches the fd and maps the segment, once per tensor and batch. A fine-tuning collate
makes three tensors a batch (input_ids, attention_mask, labels), so three segments. Here the
batch's tensors are copied into one slot of the worker's ring and cross as offsets; the main
process gets tensors that view the slot, as for the default collate's batches.

Only what the hand-over cannot change is moved: plain CPU tensors with a numpy dtype, no
autograd, each the only user of its storage (views of one storage keep sharing it the usual
way), inside plain dicts, lists and tuples. Everything else, and a batch that finds no free slot,
goes the usual way.
"""

from __future__ import annotations

from typing import Any

import torch

from . import ring as batch_ring


def _numpy_dtypes() -> dict[torch.dtype, Any]:
    found = {}
    for dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                  torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128):
        found[dtype] = torch.empty(0, dtype=dtype).numpy().dtype
    return found


_NUMPY_DTYPES = _numpy_dtypes()


def _movable(t: torch.Tensor) -> bool:
    return (type(t) is torch.Tensor and t.dtype in _NUMPY_DTYPES and t.layout == torch.strided
            and t.device.type == "cpu" and not t.requires_grad and not t.is_conj() and not t.is_neg())


def _tensors(batch: Any, found: dict[int, torch.Tensor]) -> None:
    if type(batch) is torch.Tensor:
        found[id(batch)] = batch
    elif type(batch) is dict:
        for value in batch.values():
            _tensors(value, found)
    elif type(batch) in (list, tuple):
        for value in batch:
            _tensors(value, found)


def _rebuilt(batch: Any, placed: dict[int, Any]) -> Any:
    if type(batch) is torch.Tensor:
        return placed.get(id(batch), batch)
    if type(batch) is dict:
        return {key: _rebuilt(value, placed) for key, value in batch.items()}
    if type(batch) in (list, tuple):
        return type(batch)(_rebuilt(value, placed) for value in batch)
    return batch


def hand_over(batch: Any) -> Any:
    """In a DataLoader worker: `batch` with its movable tensors copied into one ring slot (they
    arrive as tensors viewing it); `batch` itself when none is movable or no slot is free."""
    found: dict[int, torch.Tensor] = {}
    _tensors(batch, found)
    storages: dict[int, int] = {}
    for t in found.values():
        if t.numel():
            ptr = t.untyped_storage().data_ptr()
            storages[ptr] = storages.get(ptr, 0) + 1
    movable = {key: t for key, t in found.items()
               if _movable(t) and (not t.numel() or storages[t.untyped_storage().data_ptr()] == 1)}
    if not movable:
        return batch
    reserved = batch_ring.reserve({key: (tuple(t.shape), _NUMPY_DTYPES[t.dtype]) for key, t in movable.items()})
    if reserved is None:
        return batch
    targets, placed = reserved
    for key, t in movable.items():
        torch.from_numpy(targets[key]).copy_(t)
    return _rebuilt(batch, placed)
