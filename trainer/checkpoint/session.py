"""The Trainer's side of checkpoints: what goes in, when a run resumes from where, and saving.

Resume order: with autoresume, the newest loadable checkpoint in save_folder (keyed by run name);
otherwise (or when there is none yet) `load_path`. Without autoresume, a save_folder that already
holds checkpoints is an error unless save_overwrite=True (then they are deleted first).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundry.plugins.errors import CheckpointError
from foundry.plugins.launch_env import LaunchEnv
from foundry.plugins.manager import open_store

from .. import dist as fdist
from ..seeding import rng_state
from . import loader, store_ops
from .saver import CheckpointSaver
from .safe import to_safe
from .host_copy import StateSnapshot, sharded_params
from .node_staging import NodeStaging
from .data_state import EPOCH_USED_UP, NONE, load_data_state, save_data_state
from .state import to_host

log = logging.getLogger("foundry.trainer.checkpoint")


@dataclass(frozen=True)
class ResumePoint:
    """Where the loop picks up. RNG states to restore: `epoch_rng` right before the epoch's
    iter(), `rng` after it (and after skipping `fast_forward` batches of a loader without state)."""

    epoch_rng: dict | None
    rng: dict | None
    fast_forward: int
    epoch_used_up: bool = False  # stopped after the epoch's last batch: end it without reading more


class CheckpointSession:
    def __init__(self, cfg, env: fdist.DistEnv, run_dir: Path):
        self.cfg = cfg
        self.env = env
        self.staging = run_dir / "checkpoints"
        self.store = open_store(cfg.save_url, cfg.checkpoint_transfer) if cfg.save_url else None
        self.saver: CheckpointSaver | None = None
        self.resumed_from: str | None = None
        self.last_saved: str | None = None
        self.events: list[dict[str, Any]] = []  # structured records for metrics.jsonl (taken by the Trainer)
        self._published: list[str] = []  # published while a save waited for the previous upload
        self.snapshot = StateSnapshot(pin=_cuda_available())
        self._prepare_checked = False
        if self.store is not None:
            group = None
            if env.distributed:
                import torch.distributed as dist

                group = dist.new_group(backend="gloo")  # background thread's own collectives (DCP, gathers)
            self.saver = CheckpointSaver(
                self.store, cfg.run_name, cfg.checkpoint_layout, env.rank, env.world_size,
                cfg.save_num_checkpoints_to_keep, self.staging / f"rank{env.rank}",
                keep_staging=not self.store.url.startswith("file://"), ckpt_group=group,
                upload_priority=cfg.checkpoint_upload_priority)

    # -- resume --------------------------------------------------------------------------------
    def resume(self, trainer) -> ResumePoint | None:
        """Restore trainer state from the checkpoint this run should start from; None if fresh."""
        node = NodeStaging(self.staging / "_load", self.env)  # one download per node, read by its ranks
        restored = False
        try:
            found, weights_only = self._find(node)
            if found is None:
                return None
            manifest, folder, source_url = found
            extra = loader.restore(manifest, folder, trainer.model, trainer.optimizers, self.env.rank,
                                   self.env.world_size, weights_only=weights_only)
            restored = True
        finally:
            node.done(wait_for_all=restored)
        return self._apply(trainer, manifest, source_url, extra, weights_only)

    def _find(self, node: NodeStaging):
        """((manifest, local folder, URL) or None, weights_only): autoresume's, else load_path's."""
        found, weights_only = None, False
        if self.cfg.autoresume:
            found = node.fetch(lambda dest: loader.download(self.cfg.save_url, dest, self.cfg.checkpoint_transfer))
            if found and found[0].run_name != self.cfg.run_name:
                raise CheckpointError(f"{self.cfg.save_url} holds checkpoints of run {found[0].run_name!r}, "
                                      f"not {self.cfg.run_name!r}", hint="put {run_name} in save_folder")
            if found and self.env.is_main and LaunchEnv.detect().resumption_index == 0:
                # a new run (not a resumption) meets an earlier run's checkpoints under its name
                sys.stderr.write(f"foundry: {self.cfg.save_url} already holds checkpoints of a run named "
                                 f"{self.cfg.run_name!r} (latest {found[0].name}): resuming from them; "
                                 f"`foundry delete run NAME --delete-checkpoints` starts fresh\n")
        if found is None:
            self._check_overwrite()
            if self.cfg.load_path:
                found = node.fetch(lambda dest: loader.download(self.cfg.load_path, dest, self.cfg.checkpoint_transfer))
                if found is None:
                    raise CheckpointError(f"no checkpoint at load_path {self.cfg.load_path}")
                weights_only = self.cfg.load_weights_only or found[0].layout == loader.FILE_LAYOUT
        return found, weights_only

    def _apply(self, trainer, manifest, source_url: str, extra, weights_only: bool) -> ResumePoint | None:
        """Record the resume and put back what the checkpoint holds besides model and optimizer."""
        self.resumed_from = manifest.name
        log.info("resumed from checkpoint %s (batch %s)", manifest.name, manifest.timestamp.get("batch"))
        self.events.append({"event": "resumed", "checkpoint": manifest.name, "checkpoint_url": source_url,
                            "checkpoint_batch": manifest.timestamp.get("batch"),
                            "checkpoint_world_size": manifest.world_size,
                            "checkpoint_resumption": manifest.resumption_index, "weights_only": weights_only})
        if weights_only or extra is None:
            return None
        same_world = manifest.world_size == self.env.world_size
        for sched, state in zip(trainer.schedulers, extra["schedulers"]):
            sched.load_state_dict(state)
        if trainer.scaler is not None and extra.get("scaler"):
            trainer.scaler.load_state_dict(extra["scaler"])
        trainer.timestamp.load_state_dict(extra["timestamp"])
        data_state = loader.rank_entry(extra["dataloader"], self.env.rank, same_world)
        data = load_data_state(trainer.train_dataloader, data_state, trainer.timestamp)
        if same_world and extra.get("microbatch_size") and trainer.runner.auto:
            trainer.runner.size = int(extra["microbatch_size"])  # what 'auto' had settled on
        rng = loader.rank_entry(extra["rng"], self.env.rank, same_world)
        fast_forward = 0 if data != NONE else trainer.timestamp.batch_in_epoch
        if trainer.timestamp.batch_in_epoch == 0:  # taken at an epoch's end: before the next iter()
            return ResumePoint(epoch_rng=rng, rng=None, fast_forward=0)
        epoch_rng = loader.rank_entry(extra.get("epoch_rng") or [], self.env.rank, same_world)
        return ResumePoint(epoch_rng=epoch_rng, rng=rng, fast_forward=fast_forward, epoch_used_up=data == EPOCH_USED_UP)

    def take_events(self) -> list[dict[str, Any]]:
        events, self.events = self.events, []
        return events

    def _check_overwrite(self) -> None:
        if self.store is None:
            return
        existing = store_ops.list_checkpoints(self.store)
        if not existing:
            return
        if not self.cfg.save_overwrite:
            raise CheckpointError(f"{self.store.url} already holds checkpoints ({existing[-1].name}, ...)",
                                  hint="autoresume=True continues that run; save_overwrite=True replaces them")
        fdist.barrier(self.env)
        if self.env.is_main:
            self.store.delete(store_ops.LATEST)
            store_ops.prune(self.store, 0, protect="")
            for entry in store_ops.list_checkpoints(self.store):  # incomplete leftovers
                for info in list(self.store.list(entry.name + "/")):
                    self.store.delete(info.key)
        fdist.barrier(self.env)

    # -- save ----------------------------------------------------------------------------------
    def save(self, trainer) -> str | None:
        if self.saver is None:
            return None

        def collect():
            # this rank's part; the saver gathers every rank's in the background (lists by rank)
            mine = {"rng": rng_state(), "epoch_rng": trainer.epoch_start_rng,
                    "dataloader": save_data_state(trainer.train_dataloader, trainer.timestamp, trainer.data_epoch)}
            extra = {
                "timestamp": trainer.timestamp.state_dict(),
                "schedulers": [s.state_dict() for s in trainer.schedulers],
                "scaler": trainer.scaler.state_dict() if trainer.scaler is not None else None,
                "microbatch_size": trainer.runner.size,
                "run_name": self.cfg.run_name,
                "resumption_index": self.env.resumption_index,
                "world_size": self.env.world_size,
            }
            state = self.snapshot.take(trainer.model, trainer.optimizers) if self._keeps_state(trainer.model) else {}
            what, rank = "the checkpoint's extra state", self.env.rank
            return state, to_safe(to_host(extra), what), {
                key: to_safe(to_host(value), what, f"/{key}/{rank}") for key, value in mine.items()}  # its path once gathered

        meta = {"timestamp": trainer.timestamp.state_dict(), "resumption_index": self.env.resumption_index,
                "config": trainer.resolved_config}
        # The saver waits for the previous upload first; what that wait published is reported by
        # the next poll()/wait(), so checkpoint_published fires for every checkpoint.
        self._published += self.saver.wait()
        self.last_saved = self.saver.save(trainer.timestamp.state_dict(), collect, meta)
        return self.last_saved

    def _keeps_state(self, model) -> bool:
        """Every rank copies its shards (sharded layout, or FSDP); whole replicas only rank 0."""
        return self.env.is_main or self.cfg.checkpoint_layout != "full" or sharded_params(model)

    def _take_published(self, new: list[str]) -> list[str]:
        done, self._published = self._published + new, []
        return done

    def poll(self, trainer=None) -> list[str]:
        if trainer is not None and self.saver is not None and not self._prepare_checked:
            self._prepare_checked = True  # after a step: optimizer state exists
            if self._keeps_state(trainer.model) and not self.snapshot.prepared:
                self.snapshot.prepare(trainer.model, trainer.optimizers)  # the first save stalls no longer than the next
        return self._take_published(self.saver.poll() if self.saver else [])

    def wait(self) -> list[str]:
        """Block until the in-flight checkpoint is published on every rank."""
        done = self.saver.wait() if self.saver else []
        fdist.barrier(self.env)
        return self._take_published(done)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
