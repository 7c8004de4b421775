"""StreamingDataLoader: a torch DataLoader that counts what it really yielded, for exact resume.

Its parts beside it: the default collate (collate.py), whole batches made in workers
(worker_batches.py), the ring and hand-over that carry them to this process (ring.py,
handover.py), the worker process's settings (worker.py).

Workers prefetch ahead of the training loop, so the dataset cannot know what was consumed; the
loader does. `state_dict()` is the dataset's state after the samples yielded so far (all ranks),
and `load_state_dict()` makes the next iteration continue right after them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import weakref
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import DataLoader, default_collate, get_worker_info

from ..read import fork_gc
from ..topology import Topology
from .collate import collate_read_only
from .handover import hand_over
from .ring import forget_rings
from .worker import LIVE_WORKERS, IgnorePauseSignals, check_socket_dir
from .worker_batches import WorkerBatches


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
            kwargs["collate_fn"] = collate_read_only
        self.batch_transform = batch_transform
        kwargs["worker_init_fn"] = IgnorePauseSignals(kwargs.get("worker_init_fn"))
        self._worker_batches = None
        dataset = kwargs.get("dataset")
        if (batched and kwargs.get("num_workers", 0) > 0 and getattr(dataset, "can_batch_in_workers", bool)()
                and not any(kwargs.get(k) for k in ("sampler", "batch_sampler", "shuffle"))):
            # workers make whole batches (worker_batches.py): torch gets batch_size=None and passes
            # them through; batch_size and drop_last still read as the caller set them
            size, drop_last = kwargs.pop("batch_size", 1), kwargs.pop("drop_last", False)
            collate = kwargs["collate_fn"]
            default = collate is collate_read_only
            if default and batch_transform is not None:
                collate = functools.partial(collate_read_only, ring=False)
            self._worker_batches = WorkerBatches(size, drop_last, collate, default_collate=default,
                                                 transform=batch_transform)
            super().__init__(batch_size=None, **{**kwargs, "collate_fn": _batch_made_in_worker})
            object.__setattr__(self, "batch_size", size)  # DataLoader refuses a plain set after init
            object.__setattr__(self, "drop_last", drop_last)
        else:
            if batch_transform is not None:
                collate = kwargs.get("collate_fn") or default_collate
                if collate is collate_read_only:
                    collate = functools.partial(collate_read_only, ring=False)
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
            LIVE_WORKERS.add(batches)
            weakref.finalize(batches, forget_rings, [w.pid for w in batches._workers])
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
