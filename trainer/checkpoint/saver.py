"""Saving without stalling: the main thread copies the state into reusable host buffers
(host_copy.StateSnapshot: pinned on a GPU, reserved and planned in the background after the first
step, so the first save stalls no longer than the next ones) and hands it to a background thread
started ahead (a queue put, not a thread start), which does everything else: gathers the ranks'
RNG/data state and, for the full layout, the FSDP shards (over its own gloo group), serializes
(torch.save / DCP), uploads (hashing each file in the upload's own pass), verifies and publishes.

Memory is bounded: at most one checkpoint is in flight. When the next one is due while the
previous is still uploading, `save` first waits for the previous one to be published (training
stalls for the remainder of that upload: `last_wait_s`; the copy and hand-off are `last_stall_s`), then reuses
the same host buffers, so memory holds one host copy of the state (plus, for the full layout under
FSDP, the gathered tensors on rank 0 while it writes). A failure in the background is raised on the
main thread at the next `poll`/`save`/`wait`.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable

import torch

from foundry.plugins.errors import CheckpointError

from . import store_ops
from .format import Manifest, checkpoint_name
from .state import gather_full
from .upload_priority import lower_this_thread


class CheckpointSaver:
    def __init__(self, store, run_name: str, layout: str, rank: int, world_size: int, keep: int,
                 staging_root: Path, keep_staging: bool, ckpt_group=None, upload_priority: str = "low"):
        self.store = store
        self.run_name = run_name
        self.layout = layout
        self.rank = rank
        self.world_size = world_size
        self.keep = keep
        self.staging_root = Path(staging_root)
        self.keep_staging = keep_staging
        self.ckpt_group = ckpt_group
        self._done: threading.Event | None = None  # set when the in-flight checkpoint is finished
        self._jobs: queue.Queue = queue.Queue()
        self._worker = threading.Thread(target=_work, args=(self._jobs, upload_priority), name="foundry-checkpoint",
                                        daemon=True)
        self._worker.start()
        weakref.finalize(self, _stop, self._jobs, self._worker)  # the worker ends with its saver, or at exit
        self._error: BaseException | None = None
        self._published: list[str] = []
        self._lock = threading.Lock()
        self.last_stall_s = 0.0
        self.last_wait_s = 0.0
        self.in_flight: str | None = None

    # -- main thread ---------------------------------------------------------------------------
    def save(self, timestamp: dict[str, Any], collect: Callable[[], tuple[dict, dict, dict]],
             meta: dict[str, Any]) -> str:
        """Wait for any previous checkpoint, copy the state to host memory, hand it to the thread.

        `collect()` returns (model_optim_state, extra_state, this rank's state), already copied to
        host memory; the background thread gathers every rank's into extra_state, as lists by rank.
        """
        waited = time.perf_counter()
        self.wait()
        start = time.perf_counter()
        self.last_wait_s = start - waited  # > 0 only when the previous checkpoint was still in flight
        name = checkpoint_name(timestamp["epoch"], timestamp["batch"])
        state, extra, mine = collect()
        self.in_flight = name
        self._done = threading.Event()
        self._jobs.put((self._run, (name, state, extra, mine, meta), self._done))
        self.last_stall_s = time.perf_counter() - start
        return name

    def poll(self) -> list[str]:
        """Names published since the last poll; raises a background failure."""
        self._raise()
        if self._done is not None and self._done.is_set():
            self._done = None
            self.in_flight = None
            self._raise()
        with self._lock:
            done, self._published = self._published, []
        return done

    def wait(self) -> list[str]:
        if self._done is not None:
            self._done.wait()
        return self.poll()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, CheckpointError):
                raise error
            raise CheckpointError(f"saving a checkpoint failed: {type(error).__name__}: {error}") from error

    # -- background thread ---------------------------------------------------------------------
    def _run(self, name: str, state: dict, extra: dict, mine: dict, meta: dict) -> None:
        try:
            extra = {**extra, **self._gather_ranks(mine)}
            staging = self.staging_root / name
            if self.layout == "full":  # FSDP shards are gathered here, off the training thread
                state = gather_full(state, self.ckpt_group, keep=self.rank == 0)
                files = self._write_full(staging, state, extra) if self.rank == 0 else []
            else:
                files = self._write_sharded(staging, state, extra)
            if self.rank != 0:
                self._prune_staging(name)
                return
            manifest = Manifest(name=name, run_name=self.run_name, layout=self.layout,
                                world_size=self.world_size, timestamp=meta["timestamp"],
                                resumption_index=meta["resumption_index"], config=meta["config"],
                                files=[entry for _, entry in files])
            # every file went through upload_files on the rank that wrote it, which verified it
            store_ops.publish(self.store, manifest, verified=[entry.key for _, entry in files])
            store_ops.prune(self.store, self.keep, protect=name)
            self._prune_staging(name)
            with self._lock:
                self._published.append(name)
        except BaseException as exc:  # surfaced on the main thread
            self._error = exc

    def _gather_ranks(self, mine: dict) -> dict[str, list]:
        """Every rank's `mine`, as {key: [rank 0's value, rank 1's, ...]} (a collective: all ranks)."""
        import torch.distributed as dist

        per_rank = [mine]
        if self.world_size > 1 and dist.is_initialized():
            per_rank = [None] * self.world_size
            dist.all_gather_object(per_rank, mine, group=self.ckpt_group)
        return {key: [r[key] for r in per_rank] for key in mine}

    def _write_full(self, staging: Path, state: dict, extra: dict):
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True, exist_ok=True)
        files = []
        for fname, obj in (("state.pt", state), ("extra.pt", extra)):
            torch.save(obj, staging / fname)
            files.append((staging / fname, fname))
        return store_ops.upload_files(self.store, staging.name, files)  # hashed as they are sent

    def _write_sharded(self, staging: Path, state: dict, extra: dict):
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp

        rank_dir = staging / f"rank{self.rank}"
        shutil.rmtree(rank_dir, ignore_errors=True)
        rank_dir.mkdir(parents=True, exist_ok=True)
        alone = self.world_size == 1 or not (dist.is_available() and dist.is_initialized())
        # Alone, DCP warns "torch.distributed is disabled": expected. The filter is scoped to the call,
        # and set only then (catch_warnings swaps the process-wide list, from this background thread).
        with warnings.catch_warnings() if alone else contextlib.nullcontext():
            if alone:
                warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.save(state, checkpoint_id=str(rank_dir), process_group=self.ckpt_group, no_dist=alone)
        local = [(p, p.name) for p in sorted(rank_dir.iterdir()) if p.is_file()]
        if self.rank == 0:
            torch.save(extra, staging / "extra.pt")
            local.append((staging / "extra.pt", "extra.pt"))
        files = store_ops.upload_files(self.store, staging.name, local)  # hashed as they are sent
        if self.world_size > 1 and dist.is_initialized():
            gathered: list = [None] * self.world_size
            dist.all_gather_object(gathered, files, group=self.ckpt_group)
            files = [f for per_rank in gathered for f in per_rank]
        keys = [entry.key for _, entry in files]
        if len(keys) != len(set(keys)):
            raise CheckpointError(f"sharded checkpoint {staging.name}: two ranks wrote the same file name")
        return files

    def _prune_staging(self, newest: str) -> None:
        if not self.staging_root.is_dir():  # e.g. ranks > 0 with the full layout write nothing
            return
        if not self.keep_staging:
            shutil.rmtree(self.staging_root / newest, ignore_errors=True)
            return
        # Local copies: as many as the store keeps, only the newest when the store keeps all.
        keep = self.keep if self.keep is not None and self.keep > 0 else 1
        local = sorted((p for p in self.staging_root.iterdir() if p.is_dir() and not p.name.startswith("_")),
                       key=lambda p: p.stat().st_mtime)
        for path in local[: max(0, len(local) - keep)]:
            if path.name != newest:
                shutil.rmtree(path, ignore_errors=True)


def _stop(jobs: queue.Queue, worker: threading.Thread) -> None:
    """End the worker and join it (at exit too: a thread that used torch and is still alive, or still
    ending, while the interpreter shuts down can abort the process in torch's static destructors)."""
    jobs.put(None)
    if worker is not threading.current_thread():
        worker.join()


def _work(jobs: queue.Queue, priority: str) -> None:
    """The background thread: runs each handed-off save; ends at None (its saver is gone). Its CPU
    priority (and its transfer threads', which inherit it) is lowered first: upload_priority.py."""
    lower_this_thread(priority)
    while (job := jobs.get()) is not None:
        run, args, done = job
        try:
            run(*args)
        finally:
            done.set()
            del job, run, args  # drop the saver and the host copy while idle
