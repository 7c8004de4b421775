"""The Trainer's settings as one dataclass: validated on construction, saved (resolved) in the run
directory and inside every checkpoint, so a checkpoint describes itself."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from foundry.plugins.errors import ConfigError

from .microbatch import check_microbatch_size
from .time import Time, TimeUnit


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
    eval_interval: str = "1ep"
    device: str = "auto"
    precision: str = "fp32"
    parallelism: str = "auto"
    device_train_microbatch_size: Any = None
    grad_clip_norm: float | None = None
    seed: int = 42
    deterministic_mode: bool = False
    log_interval: int = 1
    console_log_interval: int = 10
    run_dir: str | None = None

    def __post_init__(self) -> None:
        if not self.run_name or not isinstance(self.run_name, str) or "/" in self.run_name:
            raise ConfigError(f"invalid run_name {self.run_name!r}", hint="a non-empty name without '/'")
        if self.max_duration is not None:
            self.check_duration()
        if self.checkpoint_layout not in ("full", "sharded"):
            raise ConfigError(f"unknown checkpoint_layout {self.checkpoint_layout!r}", hint="use full or sharded")
        check_microbatch_size(self.device_train_microbatch_size)
        if self.grad_clip_norm is not None and self.grad_clip_norm <= 0:
            raise ConfigError("grad_clip_norm must be positive")
        if self.autoresume and not self.save_folder:
            raise ConfigError("autoresume needs a save_folder", hint="set save_folder='s3://bucket/{run_name}/checkpoints'")

    def check_duration(self) -> None:
        if self.max_time.unit is TimeUnit.DURATION:
            raise ConfigError("max_duration cannot be in 'dur'", hint="use ba, ep, sp or tok")
        self.save_time, self.eval_time  # parse now: bad strings fail at construction

    @property
    def max_time(self) -> Time:
        if self.max_duration is None:
            raise ConfigError("max_duration is not set", hint="give it to Trainer(...) or to fit(max_duration=...)")
        return Time.parse(self.max_duration, default_unit=TimeUnit.BATCH)

    @property
    def save_time(self) -> Time:
        return Time.parse(self.save_interval, default_unit=TimeUnit.BATCH).resolve(self.max_time)

    @property
    def eval_time(self) -> Time:
        return Time.parse(self.eval_interval, default_unit=TimeUnit.BATCH).resolve(self.max_time)

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
