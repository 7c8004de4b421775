"""The Trainer: a small entry point that wires the parts (time, distributed, precision,
microbatching, checkpoints, loggers, callbacks) around one training loop.

    trainer = Trainer(run_name="mpt-7b", model=model, train_dataloader=loader, max_duration="10ba",
                      save_folder="s3://my-bucket/{run_name}/checkpoints", save_interval="1000ba")
    trainer.fit()

The loss, in this order (Composer's ComposerModel contract, plus plain modules):
1. `loss_fn` given: batches that are (input, target) pairs call `loss_fn(model(input), target)`,
   other batches `loss_fn(model(batch), batch)`;
2. the model has a `loss` method: `model.loss(model(batch), batch)`;
3. otherwise `model(batch)` returns the loss: a scalar tensor, a dict with "loss", or an object
   with a `.loss` attribute (a Hugging Face ModelOutput).

`max_duration` may be given to the constructor or to `fit()`. Checkpoint restore (autoresume or
`load_path`) happens in `resume()`, which `fit()` calls first; call it yourself to inspect the
restored state before training.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Callable

import torch

from foundry.plugins.compute import PAUSED_EXIT_CODE
from foundry.plugins.errors import ConfigError

from . import dist as fdist
from .arguments import check_settings, loss_from_output
from .callbacks import CallbackList
from .checkpoint.data_state import align_batch_size
from .checkpoint.session import CheckpointSession, ResumePoint
from .config import TrainerConfig
from .env_settings import apply_env
from .loggers import ConsoleLogger, JSONLinesLogger, build_logger
from .microbatch import MicrobatchRunner, batch_size, to_device
from .notice_window import NoticeWindow, last_publish_s
from .precision import autocast, check_precision, describe_precision, make_grad_scaler
from .preemption import watch_preemption
from .resume_probe import probes_from_env
from .seeding import load_rng_state, rng_state, seed_everything, set_deterministic
from .signals import protect_workers, take_early
from . import workers
from .throughput import count_tokens, device_peak_flops, flops_per_token, mfu
from .time import TimeUnit, Timestamp, crossed
from .torch_compat import forget_iterator

log = logging.getLogger("foundry.trainer")


class Trainer:
    def __init__(self, *, run_name: str, model: torch.nn.Module, train_dataloader,
                 max_duration: str | int | None = None, optimizers=None, schedulers=None,
                 loss_fn: Callable | None = None, eval_dataloader=None, loggers: list | None = None,
                 callbacks: list | None = None, config: dict | None = None, progress_bar: bool | None = None,
                 exit_on_pause: bool = True, **settings: Any):
        run_name, settings = apply_env(run_name, settings)  # set from outside a script: env_settings.py
        check_settings(settings)
        self.cfg = TrainerConfig(run_name=run_name, max_duration=max_duration, **settings)
        self.env = fdist.DistEnv.detect()
        self.device = fdist.pick_device(self.cfg.device, self.env)
        requested_precision = self.cfg.precision
        self.cfg.precision = check_precision(self.cfg.precision, self.device)  # "auto" resolved for the device
        self.parallelism = fdist.choose_parallelism(self.cfg.parallelism, self.device.type, self.env.world_size)
        fdist.init_process_group(self.env, self.device, self.parallelism)
        set_deterministic(self.cfg.deterministic_mode)
        seed_everything(self.cfg.seed, self.env.rank)

        self.raw_model = model.to(self.device)
        self.loss_fn = loss_fn
        self.flops_per_token = flops_per_token(self.raw_model)  # before sharding: global parameter counts
        self.peak_flops = device_peak_flops(self.device, self.cfg.precision)
        self.model = fdist.wrap_model(self.raw_model, self.parallelism, self.device)
        self.optimizers = self._build_optimizers(optimizers)
        self.train_dataloader = train_dataloader
        told = align_batch_size(train_dataloader)  # before anything iterates it
        if told is not None and self.env.is_main:
            sys.stderr.write(f"foundry: StreamingDataset batch_size set to {told}, the DataLoader's, so that "
                             "training resumes at the exact batch\n")
        self.eval_dataloader = eval_dataloader
        self._scheduler_specs = schedulers
        self.schedulers: list = []
        self.scaler = make_grad_scaler(self.cfg.precision, self.device)
        self.timestamp = Timestamp()
        self.runner = MicrobatchRunner(self.cfg.device_train_microbatch_size, self._compute_loss, self.model,
                                       self.scaler, lambda v: fdist.all_reduce_sum(v, self.device, self.env),
                                       self.env.world_size)
        self.run_dir = self.cfg.resolved_run_dir()
        self._user_config = config
        self._logger_specs, self._progress_bar = loggers or [], progress_bar
        self.loggers: list = []
        self.resolved_config: dict[str, Any] = {}
        self.callbacks = CallbackList(list(callbacks or []) + probes_from_env())  # verify-resume's, when set
        self.checkpoints = CheckpointSession(self.cfg, self.env, self.run_dir)
        self.pause = take_early()  # a stop since the entry point started is not lost
        self.notice = NoticeWindow.from_env()  # the preemption notice window, when the control plane knows it
        self.exit_on_pause = exit_on_pause
        self.paused = False
        self.last_loss: float | None = None
        self._last_step: tuple[int, int, float] | None = None  # samples, tokens, seconds of the last step
        self._logged_batch = -1
        self._stop_requested = False
        self._resume_point: ResumePoint | None = None
        self._resumed = False
        self.epoch_start_rng: dict[str, Any] | None = None  # RNG state right before this epoch's iter()
        self.data_epoch: int | None = None  # the epoch of the train loader's latest iter()
        if self.cfg.max_duration is not None:
            self._setup_duration()
        if self.env.is_main:
            sys.stderr.write(f"foundry: training on {self.device}, precision "
                             f"{describe_precision(requested_precision, self.cfg.precision, self.device)}, "
                             f"parallelism {self.parallelism}, world size {self.env.world_size}\n")

    def _setup_duration(self) -> None:
        """What depends on the run length: schedulers, the progress total, the resolved config."""
        self.max_time = self.cfg.max_time
        self.schedulers = self._build_schedulers(self._scheduler_specs)
        for lg in self.loggers:
            lg.close()
        self.loggers = self._build_loggers(self._logger_specs, self._progress_bar)
        self.resolved_config = self._resolve_config(self._user_config)

    def resume(self) -> str | None:
        """Restore model, optimizer, schedulers, scaler, time and data position from the checkpoint
        this run starts from (autoresume, else load_path); the RNG state is restored by fit() at the
        point of the loop where the checkpoint was taken. Returns the checkpoint's name, or None
        for a fresh start. Runs once; fit() calls it."""
        if self.cfg.max_duration is None:
            raise ConfigError("max_duration is not set", hint="give it to Trainer(...) or to fit(max_duration=...)")
        if not self._resumed:
            self._resumed = True
            self._resume_point = self.checkpoints.resume(self)
        return self.checkpoints.resumed_from

    # -- setup helpers --------------------------------------------------------------------------
    def _build_optimizers(self, optimizers) -> list:
        if optimizers is None:
            return [torch.optim.AdamW(self.model.parameters(), lr=1e-3)]
        if callable(optimizers) and not isinstance(optimizers, torch.optim.Optimizer):
            optimizers = optimizers(self.model.parameters())  # a factory (needed with FSDP)
        return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]

    def _build_schedulers(self, schedulers) -> list:
        if schedulers is None:
            return []
        schedulers = list(schedulers) if isinstance(schedulers, (list, tuple)) else [schedulers]
        try:
            per_epoch = len(self.train_dataloader)
        except TypeError:
            per_epoch = None
        return [s.build(self.optimizers[0], self.max_time, per_epoch) if hasattr(s, "build") else s
                for s in schedulers]

    def _build_loggers(self, extra: list, progress_bar: bool | None) -> list:
        if not self.env.is_main:
            return []
        total = self.max_time.value if self.max_time.unit is TimeUnit.BATCH else None
        console = self.cfg.console_log_time  # plain lines come by wall time; the batch count is a lower bound
        built = [JSONLinesLogger(self.run_dir / "metrics.jsonl"),
                 ConsoleLogger(total, int(console.value) if console.unit is TimeUnit.BATCH else 1, rich=progress_bar)]
        return built + [lg for lg in (build_logger(s, self.cfg.run_name, self.run_dir) for s in extra) if lg]

    def _resolve_config(self, user: dict | None) -> dict[str, Any]:
        resolved = {
            "trainer": self.cfg.to_dict(),
            "model": {"class": type(self.raw_model).__name__,
                      "parameters": sum(p.numel() for p in self.raw_model.parameters())},
            "optimizers": [type(o).__name__ for o in self.optimizers],
            "schedulers": [type(s).__name__ for s in self.schedulers],
            "world_size": self.env.world_size, "device": str(self.device), "parallelism": self.parallelism,
            "user": user or {},
        }
        if self.env.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "config.json").write_text(json.dumps(resolved, indent=1, default=str))
        return resolved

    # -- the loop -------------------------------------------------------------------------------
    def _compute_loss(self, batch: Any) -> torch.Tensor:
        with autocast(self.cfg.precision, self.device):
            if self.loss_fn is not None:
                if isinstance(batch, (list, tuple)) and len(batch) == 2:
                    return self.loss_fn(self.model(batch[0]), batch[1])
                return self.loss_fn(self.model(batch), batch)
            if callable(getattr(self.raw_model, "loss", None)):
                return self.raw_model.loss(self.model(batch), batch)
            return loss_from_output(self.model(batch))

    def stop(self) -> None:
        """End training after the current step as if max_duration were reached (final checkpoint
        included). Call it on every rank at the same step (e.g. from a batch_end callback)."""
        self._stop_requested = True

    def _done(self) -> bool:
        return self._stop_requested or self.timestamp.reached(self.max_time)

    def fit(self, max_duration: str | int | None = None) -> "Trainer":
        """Train until max_duration (given here or to the constructor), a stop() or a pause."""
        if max_duration is not None:
            self.cfg.max_duration = max_duration
            self.cfg.check_duration()
            if self._resumed:  # training again: schedules already built keep the length they were built for
                self.max_time = self.cfg.max_time
            else:
                self._setup_duration()
        if not self.loggers and self.cfg.max_duration is not None:  # closed by a previous fit()
            self.loggers = self._build_loggers(self._logger_specs, self._progress_bar)
        self.resume()
        point, self._resume_point = self._resume_point, None
        self.pause.install()
        preemption = watch_preemption(self.pause)   # spot instances: the cloud's notice pauses like a SIGTERM
        protect_workers(self.train_dataloader)
        if self.eval_dataloader is not None:
            protect_workers(self.eval_dataloader)
        self.model.train()
        for event in self.checkpoints.take_events():
            self._record(event)
        self._warn_window(last_publish_s(self.run_dir / "metrics.jsonl"), "the run's last checkpoint")
        self.callbacks.fire("fit_start", self)
        skip = point.fast_forward if point else 0
        batches = None
        try:
            while not self._done() and not self.paused:
                self._set_epoch(self.timestamp.epoch)
                batches = self._epoch_iterator(point, skip)
                point, skip = None, 0
                ended = True
                for batch in batches:
                    self._train_batch(batch)
                    if self.paused or self._done():
                        ended = False
                        break
                if ended:
                    self._end_epoch()
            if not self.paused:
                self._finish()
        except BaseException:
            self._stop_workers(self.train_dataloader, batches)  # else they may outlive the process's exit
            raise
        finally:
            if preemption is not None:
                preemption.stop()
            # multinode (issue 14): a stop after the last step must not fail a completed run (exit 143)
            self.pause.settle() if self._done() and not self.paused else self.pause.uninstall()
        return self

    def _epoch_iterator(self, point: ResumePoint | None, skip: int):
        """iter() on the train loader with every RNG draw in the uninterrupted run's order.

        The uninterrupted run draws, per epoch: iter() (DataLoader worker base seed, sampler
        permutation), then per batch the data loading and the forward (dropout ...). A checkpoint
        holds the RNG state after its batch and the state right before its epoch's iter(); a
        resumed process replays the epoch start from the latter, fast-forwards (loaders without
        state), then continues from the former."""
        if point is not None and point.epoch_used_up:  # its data ran out before the stop: the epoch ends now
            load_rng_state(point.rng)
            return iter(())
        if point is not None and point.epoch_rng is not None:
            load_rng_state(point.epoch_rng)
        self.epoch_start_rng = rng_state()
        self.data_epoch = self.timestamp.epoch
        batches = workers.track(iter(self.train_dataloader))
        for _ in range(skip):
            next(batches, None)
        if point is not None and point.rng is not None:
            load_rng_state(point.rng)
        return batches

    @staticmethod
    def _stop_workers(loader, batches) -> None:
        """Stop an iterator's workers now (they ignore SIGTERM: see workers.py); a loader with
        persistent workers then starts new ones at its next iter()."""
        workers.stop(batches)
        forget_iterator(loader, batches)

    def _set_epoch(self, epoch: int) -> None:
        for obj in (getattr(self.train_dataloader, "sampler", None),
                    getattr(getattr(self.train_dataloader, "batch_sampler", None), "sampler", None)):
            if obj is not None and callable(getattr(obj, "set_epoch", None)):
                obj.set_epoch(epoch)

    def _train_batch(self, batch: Any) -> None:
        start = time.perf_counter()
        before = self.timestamp.copy()
        batch = to_device(batch, self.device)
        samples = batch_size(batch) * self.env.world_size
        tokens = count_tokens(self.raw_model, batch) * self.env.world_size
        self._zero_grad()
        loss = self.runner.run(batch, self._zero_grad)
        for opt in self.optimizers:
            if self.scaler is not None:
                self.scaler.unscale_(opt)
        if self.cfg.grad_clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip_norm)
        for opt in self.optimizers:
            (self.scaler.step(opt) if self.scaler is not None else opt.step())
        if self.scaler is not None:
            self.scaler.update()
        for sched in self.schedulers:
            sched.step()
        loss_sum, stop = fdist.all_reduce_sum([loss.item(), float(self.pause.requested)], self.device, self.env)
        self.last_loss = loss_sum / self.env.world_size
        seconds = time.perf_counter() - start
        self.timestamp.after_batch(samples, tokens, seconds)
        self._last_step = (samples, tokens, seconds)
        if crossed(self.cfg.log_time, before, self.timestamp) or self._done():
            self._log_step()
        self.callbacks.fire("batch_end", self)
        self._published(self.checkpoints.poll(self))
        if self.eval_dataloader is not None and crossed(self.cfg.eval_time, before, self.timestamp):
            self.evaluate()
        if stop:
            self._pause()
        elif crossed(self.cfg.save_time, before, self.timestamp) and not self._done():
            self._save()

    def _log_step(self) -> None:
        """The metrics row of the last step (once per step)."""
        if self._last_step is None or self._logged_batch == self.timestamp.batch:
            return
        samples, tokens, seconds = self._last_step
        self._logged_batch = self.timestamp.batch
        row = {"epoch": self.timestamp.epoch, "loss": self.last_loss,
               "lr": self.optimizers[0].param_groups[0]["lr"], "throughput": 1.0 / seconds,
               "samples_per_sec": samples / seconds, "tokens_per_sec": tokens / seconds,
               "wall_time": round(self.timestamp.wall_time, 4)}
        utilisation = mfu(tokens / seconds, self.flops_per_token, self.peak_flops, self.env.world_size)
        if utilisation is not None:  # only where the device's peak is known
            row["mfu"] = utilisation
        self._log(row)

    def _end_epoch(self) -> None:
        before = self.timestamp.copy()
        self.timestamp.after_epoch()
        if crossed(self.cfg.log_time, before, self.timestamp, epoch_ended=True):  # log_interval in epochs
            self._log_step()
        self.callbacks.fire("epoch_end", self)
        if self.eval_dataloader is not None and crossed(self.cfg.eval_time, before, self.timestamp, epoch_ended=True):
            self.evaluate()
        if crossed(self.cfg.save_time, before, self.timestamp, epoch_ended=True) and not self._done():
            self._save()

    def _zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        self.model.eval()
        total, count = 0.0, 0.0
        batches = workers.track(iter(self.eval_dataloader))
        try:
            for batch in batches:
                batch = to_device(batch, self.device)
                n = batch_size(batch)
                total += self._compute_loss(batch).item() * n
                count += n
        except BaseException:
            self._stop_workers(self.eval_dataloader, batches)
            raise
        total, count = fdist.all_reduce_sum([total, count], self.device, self.env)
        self.model.train()
        metrics = {"eval/loss": total / max(count, 1.0)}
        self._log(dict(metrics, epoch=self.timestamp.epoch))
        self.callbacks.fire("eval_end", self, metrics)
        return metrics

    def _log(self, metrics: dict[str, Any]) -> None:
        metrics["resumption"] = self.env.resumption_index
        for lg in self.loggers:
            lg.log_metrics(metrics, self.timestamp.batch)

    def _record(self, event: dict[str, Any]) -> None:
        """A fact for the control plane (resumed, checkpoint_published): metrics.jsonl only."""
        event["resumption"] = self.env.resumption_index
        for lg in self.loggers:
            if isinstance(lg, JSONLinesLogger):
                lg.log_metrics(event, self.timestamp.batch)

    def publish_pending(self) -> None:
        """Wait for the checkpoint uploading in the background and announce it now (checkpoint_published),
        instead of at the next step: a stop that must land right after a checkpoint (verify-resume's kill)."""
        self._published(self.checkpoints.wait())

    def _save(self) -> None:
        started = time.monotonic()
        self.notice.saving(self.checkpoints.save(self), started)

    def _published(self, names: list[str]) -> None:
        for name in names:
            publish_s = self.notice.published(name)
            self._record({"event": "checkpoint_published", "checkpoint": name, "publish_s": publish_s})
            self.callbacks.fire("checkpoint_published", self, name)
            self._warn_window(publish_s, f"checkpoint {name}")

    def _warn_window(self, publish_s: float | None, source: str) -> None:
        warning = self.notice.check(publish_s, source) if self.env.is_main else None
        if warning:
            sys.stderr.write(warning + "\n")
            self._record({"event": "notice_window_short", "grace_s": self.notice.grace_s, "publish_s": publish_s})

    def _close(self) -> None:
        for lg in self.loggers:
            lg.close()
        self.loggers = []

    def _finish(self) -> None:
        """End of training: a final checkpoint (unless one already covers this batch), published."""
        if self.checkpoints.saver is not None:
            from .checkpoint.format import checkpoint_name

            name = checkpoint_name(self.timestamp.epoch, self.timestamp.batch)
            if name not in (self.checkpoints.last_saved, self.checkpoints.resumed_from):
                self._save()
            self._published(self.checkpoints.wait())
        self.callbacks.fire("fit_end", self)
        self._close()

    def _pause(self) -> None:
        """Every rank agreed to stop: checkpoint, wait until it is published, exit 'paused'."""
        self.paused = True
        if self.checkpoints.saver is None:
            log.warning("paused without a save_folder: no checkpoint written")
        else:
            self._save()
            self._published(self.checkpoints.wait())
        notice_s = None if self.pause.at is None else round(time.monotonic() - self.pause.at, 3)
        self._record({"event": "paused", "checkpoint": self.checkpoints.last_saved if self.checkpoints.saver else None,
                      "notice_s": notice_s})  # from this rank's SIGTERM to the published checkpoint
        self._warn_window(notice_s, "the stop's checkpoint (from the notice)")
        self.callbacks.fire("fit_end", self)
        self._close()
        if self.env.is_main:
            sys.stderr.write(f"foundry: paused at batch {self.timestamp.batch}; exit {PAUSED_EXIT_CODE}\n")
        if self.exit_on_pause:
            if fdist.torch_dist_initialized():
                import torch.distributed as dist

                dist.destroy_process_group()
            sys.stdout.flush()
            sys.stderr.flush()
            raise SystemExit(PAUSED_EXIT_CODE)
