"""Epoch bookkeeping shared by a dataset and its DataLoader workers, and the resumption state.

`EpochCounter` lives in an anonymous shared memory mapping created with the dataset, so forked
DataLoader workers (persistent or not) and the main process see the same numbers. Nothing is named:
nothing can leak or collide between jobs, and it vanishes with the processes. Each worker slot
counts the epochs it has started; `load_state_dict` publishes a resume point with a new generation
that every slot consumes exactly once.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

from foundry.plugins.errors import DataError, DataValueError

MAX_WORKERS = 64
_GROUPS = MAX_WORKERS * (MAX_WORKERS + 1) // 2  # one group of slots per DataLoader worker count
_HEADER = 4  # resume generation, resume epoch, resume sample, worker count of the latest iteration
_SLOT = 4  # next epoch, seen generation, start sample of the current iteration, current epoch


class EpochCounter:
    """Slots are grouped by worker count: a DataLoader with n workers uses slots of group n. An
    iteration's epoch is its slot's next epoch, or later if another group (an earlier plain
    iteration, a DataLoader with a different worker count) has already gone further."""

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, 8 * (_HEADER + _SLOT * _GROUPS))
        self._a = np.frombuffer(self._map, dtype=np.int64)
        self._a[:] = 0
        self._a[3] = 1
        self._a[_HEADER + 3::_SLOT] = -1

    def __getstate__(self) -> dict:  # spawn: a private copy (epochs then advance per worker)
        return {"values": self._a.copy()}

    def __setstate__(self, state: dict) -> None:
        self.__init__()
        self._a[:] = state["values"]

    @staticmethod
    def _group(num_workers: int) -> range:
        if not 1 <= num_workers <= MAX_WORKERS:
            raise DataError(f"at most {MAX_WORKERS} DataLoader workers per rank are supported")
        first = num_workers * (num_workers - 1) // 2
        return range(first, first + num_workers)

    def _slot(self, worker: int, num_workers: int) -> int:
        return _HEADER + _SLOT * self._group(num_workers)[worker]

    def peek(self, worker: int, num_workers: int) -> tuple[int, int]:
        """What `begin` would return now, changing nothing (a loader plans its workers' epoch ahead)."""
        a, base = self._a, self._slot(worker, num_workers)
        if a[base + 1] != a[0]:  # a resume point this slot has not consumed yet
            return int(a[1]), int(a[2])
        group = self._group(num_workers)
        nexts = a[_HEADER::_SLOT]
        others = np.concatenate([nexts[: group.start], nexts[group.stop:]])
        return max(int(a[base]), int(others.max()) if len(others) else 0), 0

    def begin(self, worker: int, num_workers: int) -> tuple[int, int]:
        """Start an iteration in this worker's slot: returns (epoch, first global sample)."""
        epoch, start = self.peek(worker, num_workers)
        a, base = self._a, self._slot(worker, num_workers)
        a[3] = num_workers
        a[base + 1] = a[0]
        a[base], a[base + 2], a[base + 3] = epoch + 1, start, epoch
        return epoch, start

    def resume(self, epoch: int, sample: int) -> None:
        a = self._a
        a[1], a[2] = epoch, sample
        a[_HEADER::_SLOT] = np.minimum(a[_HEADER::_SLOT], epoch)  # nobody is ahead of the resume
        a[0] += 1

    def position(self, num_workers: int | None = None) -> tuple[int, int, bool]:
        """(epoch, start sample, started) of the latest iteration's worker 0, or of the next one."""
        a = self._a
        base = self._slot(0, int(num_workers or a[3]))
        if a[base + 1] != a[0]:
            return int(a[1]), int(a[2]), False
        if a[base + 3] < 0:
            return int(a[_HEADER::_SLOT].max()), 0, False
        return int(a[base + 3]), int(a[base + 2]), True


def build_state(epoch: int, sample_in_epoch: int, epoch_length: int, **extra: Any) -> dict[str, Any]:
    """A state dict with the mosaicml-streaming keys; a finished epoch becomes the next one's start."""
    if epoch_length and sample_in_epoch >= epoch_length:
        epoch, sample_in_epoch = epoch + 1, 0
    return {"epoch": int(epoch), "sample_in_epoch": int(sample_in_epoch), **extra}


def check_state(state: dict[str, Any], *, shuffle_seed: int, fingerprint: str, num_canonical_nodes: int | None,
                global_batch: int | None) -> None:
    """Refuse a state that does not describe this dataset and configuration, with a clear reason."""
    missing = [k for k in ("epoch", "sample_in_epoch", "shuffle_seed") if k not in state]
    if missing:
        raise DataValueError(f"dataset state lacks {', '.join(missing)}", hint="pass a state from StreamingDataset.state_dict()")
    if int(state["shuffle_seed"]) != int(shuffle_seed):
        raise DataValueError(f"the saved data state used shuffle_seed={state['shuffle_seed']}, this dataset uses {shuffle_seed}",
                             hint="resume with the same shuffle_seed, or start a new run")
    saved_fp = state.get("fingerprint")
    if saved_fp is not None and saved_fp != fingerprint:
        raise DataValueError("the saved data state belongs to different data (index, streams or epoch size changed)",
                             hint="resume on the same dataset, or start a new run")
    saved_c = state.get("num_canonical_nodes")
    if num_canonical_nodes is not None and saved_c is not None and int(saved_c) != int(num_canonical_nodes):
        raise DataValueError(f"the saved data state used num_canonical_nodes={saved_c}, this dataset sets {num_canonical_nodes}",
                             hint="leave num_canonical_nodes unset (the saved value is used) or set it to the saved one")
    saved_g = state.get("global_batch_size")
    if global_batch is not None and saved_g is not None and int(saved_g) != int(global_batch):
        raise DataValueError(f"the saved data state used global batch {saved_g}, this run's is {global_batch} "
                             "(batch_size x world size)", hint="keep the global batch: per-device batch = global batch / ranks")
    if int(state["sample_in_epoch"]) < 0 or int(state["epoch"]) < 0:
        raise DataValueError("dataset state has a negative epoch or sample")
