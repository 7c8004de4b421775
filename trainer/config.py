"""The Trainer's settings as one dataclass: validated on construction, saved (resolved) in the run
directory and inside every checkpoint, so a checkpoint describes itself."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from foundry.plugins.errors import ConfigError

from .checkpoint.upload_priority import check_priority
from .time import Time, TimeUnit


# Settings that take a time, as in Composer: a string with a unit, or a bare int in the unit Composer
# reads it in (max_duration, save_interval and eval_interval count epochs; the log intervals batches),
# so a Composer script's `max_duration=2` trains two epochs here too.
INTERVALS = ("save_interval", "eval_interval", "log_interval", "console_log_interval")
BARE_INT_UNIT = {"max_duration": TimeUnit.EPOCH, "save_interval": TimeUnit.EPOCH, "eval_interval": TimeUnit.EPOCH,
                 "log_interval": TimeUnit.BATCH, "console_log_interval": TimeUnit.BATCH}


TRANSFER_KEYS = ("part_size", "concurrency", "multipart_threshold")
MIN_PART = 5 << 20  # S3's smallest part but the last


def check_transfer(options: dict[str, int] | None) -> None:
    if options is None:
        return
    if not isinstance(options, dict):
        raise ConfigError("checkpoint_transfer must be a dict", hint=f"keys: {', '.join(TRANSFER_KEYS)}")
    for key, value in options.items():
        if key not in TRANSFER_KEYS:
            raise ConfigError(f"checkpoint_transfer: unknown setting {key!r}",
                              hint=f"it takes {', '.join(TRANSFER_KEYS)}; credentials and endpoints come from "
                                   "the environment or `foundry create secret`, never from a checkpoint's config")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"checkpoint_transfer: {key} must be a positive int, not {value!r}")
    if options.get("part_size", MIN_PART) < MIN_PART:
        raise ConfigError(f"checkpoint_transfer: part_size {options['part_size']} is below 5 MiB",
                          hint="object stores reject smaller parts")


@dataclass
class TrainerConfig:
    run_name: str
    max_duration: str | None  # None until given to fit()
    save_folder: str | None = None
    save_interval: str = "1ep"
    save_num_checkpoints_to_keep: int = -1
    save_overwrite: bool = False
    load_path: str | None = None
    load_weights_only: bool = False
    autoresume: bool = False
    checkpoint_layout: str = "full"
    checkpoint_upload_priority: str = "low"  # CPU priority of the background save: checkpoint/upload_priority.py
    # part_size, concurrency, multipart_threshold of the checkpoint's own transfers (the store's
    # defaults otherwise: 8 MiB, 8, 8 MiB); transfer settings only, since the config is saved
    # inside every checkpoint: credentials come from the environment or a secret
    checkpoint_transfer: dict[str, int] | None = None
    eval_interval: str = "1ep"
    device: str = "auto"
    precision: str = "auto"  # bf16 on a capable GPU, fp32 on CPU (trainer/precision.py)
    parallelism: str = "auto"
    device_train_microbatch_size: Any = None
    grad_clip_norm: float | None = None
    seed: int = 42
    deterministic_mode: bool = False
    log_interval: int | str = 1  # a batch count, or a time ("20ba", "1ep", "0.1dur", "1000sp")
    console_log_interval: int | str = 10
    run_dir: str | None = None

    def __post_init__(self) -> None:
        if not self.run_name or not isinstance(self.run_name, str) or "/" in self.run_name:
            raise ConfigError(f"invalid run_name {self.run_name!r}", hint="a non-empty name without '/'")
        for name in INTERVALS:  # bad strings fail at construction, even before max_duration is known
            self._interval(name, resolve=False)
        if self.max_duration is not None:
            self.check_duration()
        if self.checkpoint_layout not in ("full", "sharded"):
            raise ConfigError(f"unknown checkpoint_layout {self.checkpoint_layout!r}", hint="use full or sharded")
        check_priority(self.checkpoint_upload_priority)
        check_transfer(self.checkpoint_transfer)
        if self.device_train_microbatch_size is not None:  # imported here: the config stays torch-free
            from .microbatch import check_microbatch_size

            check_microbatch_size(self.device_train_microbatch_size)
        if self.grad_clip_norm is not None and self.grad_clip_norm <= 0:
            raise ConfigError("grad_clip_norm must be positive")
        if self.autoresume and not self.save_folder:
            raise ConfigError("autoresume needs a save_folder", hint="set save_folder='s3://bucket/{run_name}/checkpoints'")

    def check_duration(self) -> None:
        try:
            self.max_time
        except ConfigError as exc:
            raise ConfigError(f"max_duration: {exc.message}", hint=exc.hint) from None
        if self.max_time.unit is TimeUnit.DURATION:
            raise ConfigError("max_duration cannot be in 'dur'", hint="use ba, ep, sp or tok")
        for name in INTERVALS:  # 'dur' intervals resolve against max_duration
            self._interval(name)

    @property
    def max_time(self) -> Time:
        if self.max_duration is None:
            raise ConfigError("max_duration is not set", hint="give it to Trainer(...) or to fit(max_duration=...)")
        return Time.parse(self.max_duration, default_unit=BARE_INT_UNIT["max_duration"])

    def _interval(self, name: str, resolve: bool = True) -> Time:
        value = getattr(self, name)
        if callable(value):
            raise ConfigError(f"{name}: a callable (Composer's event-driven interval) is not supported",
                              hint=f"give {name} a time such as '500ba', '1ep' or '0.1dur'")
        try:
            time = Time.parse(value, default_unit=BARE_INT_UNIT[name])
        except ConfigError as exc:
            raise ConfigError(f"{name}: {exc.message}", hint=exc.hint) from None
        return time.resolve(self.max_time) if resolve else time

    @property
    def save_time(self) -> Time:
        return self._interval("save_interval")

    @property
    def eval_time(self) -> Time:
        return self._interval("eval_interval")

    @property
    def log_time(self) -> Time:
        return self._interval("log_interval")

    @property
    def console_log_time(self) -> Time:
        return self._interval("console_log_interval")

    @property
    def save_url(self) -> str | None:
        return self.save_folder.format(run_name=self.run_name) if self.save_folder else None

    def resolved_run_dir(self) -> Path:
        """run_dir, else FOUNDRY_RUN_DIR (set by the control plane for its jobs), else
        FOUNDRY_HOME/runs/RUN_NAME (FOUNDRY_HOME defaults to the user data dir)."""
        if self.run_dir:
            return Path(self.run_dir)
        if os.environ.get("FOUNDRY_RUN_DIR"):
            return Path(os.environ["FOUNDRY_RUN_DIR"])
        return foundry_home() / "runs" / self.run_name

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["max_duration"] = str(self.max_duration)
        out["save_folder_resolved"] = self.save_url
        return out


def foundry_home() -> Path:
    home = os.environ.get("FOUNDRY_HOME")
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("foundry"))
