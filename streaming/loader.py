"""StreamingDataLoader: a torch DataLoader that counts what it really yielded, for exact resume.

Workers prefetch ahead of the training loop, so the dataset cannot know what was consumed; the
loader does. `state_dict()` is the dataset's state after the samples yielded so far (all ranks),
and `load_state_dict()` makes the next iteration continue right after them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import signal
import sys
import warnings
import weakref
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, default_collate, get_worker_info

from . import batch_ring, fork_gc
from .batch_handover import hand_over
from .batch_reads import WorkerBatches
from .topology import Topology


def _batch_len(batch: Any) -> int | None:
    if hasattr(batch, "shape") and len(getattr(batch, "shape", ())) > 0:
        return int(batch.shape[0])
    if isinstance(batch, dict):
        for v in batch.values():
            n = _batch_len(v)
            if n is not None:
                return n
        return None
    if isinstance(batch, (list, tuple)) and batch:
        first = _batch_len(batch[0])
        return first if first is not None and not isinstance(batch[0], (str, bytes)) else len(batch)
    return None


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


def _collate_read_only(batch: list, ring: bool = True) -> Any:
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
            out[key] = in_ring.get(key) or (_stack(values) if key in stackable else _collate_read_only(values))
        return out
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return default_collate(batch)


_NUMERIC = "biuf"
# what default_collate makes of a column of Python numbers
_NUMBER_DTYPES = {int: np.dtype(np.int64), float: np.dtype(np.float64), bool: np.dtype(np.bool_)}


def _place_in_ring(first: dict, columns: dict[str, list], stackable: dict[str, list]) -> dict | None:
    """In a worker: a batch's columns in a slot of the worker's ring (batch_ring.py), each as
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
    return batch_ring.place(arrays, values) if arrays or values else None


UNIX_SOCKET_PATH_MAX = 107        # sun_path is 108 bytes with its NUL


def check_socket_dir() -> None:
    """Workers hand each batch over as a file descriptor passed through a unix socket that
    multiprocessing creates under the temp folder (.../pymp-XXXXXXXX/listener-XXXXXXXX). A temp
    folder too long for a socket path kills the worker's sending thread, and the loop would wait
    forever: say so in one line instead."""
    import multiprocessing.process
    import os
    import tempfile

    if torch.multiprocessing.get_sharing_strategy() != "file_descriptor":
        return
    made = multiprocessing.process.current_process()._config.get("tempdir")
    longest = len(os.fsencode(made)) + 18 if made else len(os.fsencode(tempfile.gettempdir())) + 32
    if longest > UNIX_SOCKET_PATH_MAX:
        from foundry.plugins.errors import ConfigError

        raise ConfigError(f"the temp folder {tempfile.gettempdir()} is too long for the unix sockets DataLoader "
                          f"workers pass batches through ({longest} > {UNIX_SOCKET_PATH_MAX} bytes)",
                          hint="set TMPDIR to a shorter folder (export TMPDIR=/tmp), or use num_workers=0")
WORKER_SWITCH_INTERVAL_S = 0.0005


class _IgnorePauseSignals:
    """worker_init_fn wrapper: workers ignore SIGTERM/SIGINT (and switch threads often, below). A pause signal sent to the whole
    process group (scancel --signal, Ctrl-C, many supervisors) is the main process's to handle:
    it finishes the step and checkpoints, then shuts the workers down itself. A picklable class,
    not a closure, so it also works with the spawn and forkserver start methods."""

    def __init__(self, inner: Callable[[int], None] | None):
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        # Every batch reaches the main process as a shared-memory fd, which it fetches from this
        # worker's resource-sharer thread; with the default 5 ms GIL switch interval that thread
        # waits behind the sample loop, and the main process waits for it (batch 32: 16k -> 26k
        # samples/s with 0.5 ms).
        sys.setswitchinterval(WORKER_SWITCH_INTERVAL_S)
        if self.inner is not None:
            self.inner(worker_id)


# DataLoader iterators whose workers may still be running (see _stop_workers_at_exit).
_LIVE_WORKERS: weakref.WeakSet = weakref.WeakSet()


def _stop_workers_at_exit() -> None:
    """At exit, multiprocessing stops daemonic children with SIGTERM and joins them without a
    timeout; our workers ignore SIGTERM, so live ones (persistent workers, a loop left early) would
    hang the exit forever. Registered after torch's and multiprocessing's exit hooks, this runs
    first, while the DataLoader's own shutdown (done event, join) still works."""
    for batches in list(_LIVE_WORKERS):
        try:
            batches._shutdown_workers()  # what the iterator's __del__ does
        except Exception:  # noqa: BLE001 - exiting anyway: kill what is left below
            pass
        for worker in getattr(batches, "_workers", ()):
            if worker.is_alive():
                worker.kill()


atexit.register(_stop_workers_at_exit)


def _batch_made_in_worker(batch: Any) -> Any:
    """The collate torch applies to what a worker's dataset yields: a batch, collated already."""
    return batch


class _ThenTransform:
    """collate_fn for batches torch makes from samples (no workers, or a sampler): the collate,
    then the user's batch_transform; in a worker the result crosses through the ring. A class,
    not a closure, so it pickles for the spawn and forkserver start methods."""

    def __init__(self, collate: Callable[[list], Any], transform: Callable[[Any], Any]):
        self.collate, self.transform = collate, transform

    def __call__(self, samples: list) -> Any:
        batch = self.transform(self.collate(samples))
        return hand_over(batch) if get_worker_info() is not None else batch


def _as_keywords(args: tuple, kwargs: dict) -> dict[str, Any]:
    """DataLoader's arguments, positional ones included (`StreamingDataLoader(ds, 32)`), by name."""
    names = list(inspect.signature(DataLoader.__init__).parameters)[1:]
    if len(args) > len(names):
        raise TypeError(f"StreamingDataLoader takes at most {len(names)} positional arguments ({len(args)} given)")
    clash = [name for name in names[:len(args)] if name in kwargs]
    if clash:
        raise TypeError(f"StreamingDataLoader got multiple values for argument {clash[0]!r}")
    return {**dict(zip(names, args)), **kwargs}


class StreamingDataLoader(DataLoader):
    """torch's DataLoader, plus `batch_transform`: a function of one batch, as the collate made it
    (with the default collate, a dict of stacked tensors), that returns the batch the loop gets.
    Unlike a collate_fn, it keeps the batch the workers read whole, and what it returns crosses
    to the main process through the workers' shared-memory ring, as default batches do."""

    def __init__(self, *args: Any, batch_transform: Callable[[Any], Any] | None = None, **kwargs: Any) -> None:
        kwargs = _as_keywords(args, kwargs)
        batched = kwargs.get("batch_size", 1) is not None or kwargs.get("batch_sampler") is not None
        if batch_transform is not None and (not callable(batch_transform) or not batched):
            raise ValueError("batch_transform takes a function of one batch, and needs batches: "
                             "pass a callable and a batch_size (or a batch_sampler)")
        if batched and kwargs.get("collate_fn") is None and not kwargs.get("batch_sampler"):
            kwargs["collate_fn"] = _collate_read_only
        self.batch_transform = batch_transform
        kwargs["worker_init_fn"] = _IgnorePauseSignals(kwargs.get("worker_init_fn"))
        self._worker_batches = None
        dataset = kwargs.get("dataset")
        if (batched and kwargs.get("num_workers", 0) > 0 and getattr(dataset, "can_batch_in_workers", bool)()
                and not any(kwargs.get(k) for k in ("sampler", "batch_sampler", "shuffle"))):
            # workers make whole batches (batch_reads.py): torch gets batch_size=None and passes
            # them through; batch_size and drop_last still read as the caller set them
            size, drop_last = kwargs.pop("batch_size", 1), kwargs.pop("drop_last", False)
            collate = kwargs["collate_fn"]
            default = collate is _collate_read_only
            if default and batch_transform is not None:
                collate = functools.partial(_collate_read_only, ring=False)
            self._worker_batches = WorkerBatches(size, drop_last, collate, default_collate=default,
                                                 transform=batch_transform)
            super().__init__(batch_size=None, **{**kwargs, "collate_fn": _batch_made_in_worker})
            object.__setattr__(self, "batch_size", size)  # DataLoader refuses a plain set after init
            object.__setattr__(self, "drop_last", drop_last)
        else:
            if batch_transform is not None:
                collate = kwargs.get("collate_fn") or default_collate
                if collate is _collate_read_only:
                    collate = functools.partial(_collate_read_only, ring=False)
                kwargs["collate_fn"] = _ThenTransform(collate, batch_transform)
            super().__init__(**kwargs)
        self.num_samples_yielded = 0  # on this rank, since the current iteration (re)started

    def __iter__(self) -> Iterator[Any]:
        # Not a generator: the DataLoader iterator (which draws the workers' base seed from the
        # global torch RNG) is made here, at iter() time, so a trainer can restore its RNG state
        # right after iter() and every later draw matches the uninterrupted run.
        self.num_samples_yielded = 0
        if self.num_workers > 0:
            check_socket_dir()
        starts_workers = self.num_workers > 0 and (not self.persistent_workers or self._iterator is None)
        planned = starts_workers and hasattr(self.dataset, "planned_for_workers")
        # the epoch's plan, built once here for all the workers started now
        with contextlib.ExitStack() as starting:
            if planned:
                starting.enter_context(self.dataset.planned_for_workers(self.num_workers))
            if starts_workers and self._worker_batches is not None:
                starting.enter_context(self.dataset.batched_in_workers(self._worker_batches))
            frozen = self.num_workers > 0 and self._forks_workers()
            if frozen:
                fork_gc.hold()
            try:
                batches = super().__iter__()
            except BaseException:
                if frozen:
                    fork_gc.release()
                raise
        if starts_workers:
            _LIVE_WORKERS.add(batches)
            weakref.finalize(batches, batch_ring.forget_rings, [w.pid for w in batches._workers])
        counted = self._counted(batches)
        if frozen:  # this epoch's iteration is finished or dropped, started or not: thaw
            weakref.finalize(counted, fork_gc.release)
        return counted

    def _forks_workers(self) -> bool:
        context = self.multiprocessing_context or torch.multiprocessing.get_context()
        return context.get_start_method() == "fork"

    def _counted(self, batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            n = _batch_len(batch)
            self.num_samples_yielded += n if n is not None else (self.batch_size or 1)
            yield batch

    def state_dict(self) -> dict[str, Any] | None:
        if not hasattr(self.dataset, "state_dict"):
            return None
        world = Topology.detect().world_size
        return self.dataset.state_dict(self.num_samples_yielded * world, from_beginning=False)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if hasattr(self.dataset, "load_state_dict"):
            self.dataset.load_state_dict(state)
        self.num_samples_yielded = 0
