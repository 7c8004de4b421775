"""What the Trainer accepts beyond its own settings: Composer's argument names (a clear error for
the ones it does not take, instead of a TypeError) and the model-returns-its-loss contract."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from foundry.plugins.errors import ConfigError

from .config import TrainerConfig

# composer.Trainer arguments Foundry's Trainer does not take (it takes the others under the same name).
COMPOSER_ONLY = frozenset({
    "algorithms", "eval_subset_num_batches", "train_subset_num_batches", "spin_dataloaders", "step_schedulers_every_batch",
    "scale_schedule_ratio", "auto_log_hparams", "log_traces", "save_filename", "save_latest_filename",
    "save_weights_only", "save_ignore_keys", "load_object_store", "load_ignore_keys", "load_strict_model_weights",
    "load_progress_bar", "load_exclude_algorithms", "autoresume_num_retries", "fsdp_config", "fsdp_auto_wrap",
    "deepspeed_config", "parallelism_config", "dist_timeout", "ddp_sync_strategy", "profiler",
    "python_log_level", "console_stream", "log_to_console", "compile_config", "accumulate_train_batch_on_tokens",
    "train_dataloader_label", "eval_interval_unit", "precision_config", "device_eval_microbatch_size",
    "save_metrics", "save_latest_artifacts", "remote_ul2r_logger", "checkpoint_saver",
})


def check_settings(settings: dict[str, Any]) -> None:
    """One error naming every argument the Trainer does not know."""
    known = {f.name for f in fields(TrainerConfig)}
    unknown = sorted(set(settings) - known)
    if not unknown:
        return
    composer = [k for k in unknown if k in COMPOSER_ONLY]
    other = [k for k in unknown if k not in COMPOSER_ONLY]
    parts = []
    if composer:
        parts.append(f"Composer argument(s) Foundry's Trainer does not support: {', '.join(composer)}")
    if other:
        parts.append(f"unknown Trainer argument(s): {', '.join(other)}")
    raise ConfigError("; ".join(parts), hint="remove them; the accepted arguments are listed in "
                      "docs/resume.md and foundry.trainer.config.TrainerConfig")


def loss_from_output(output: Any):
    """The loss from a forward that returns it: a scalar tensor, {"loss": ...}, or `.loss`."""
    import torch

    if isinstance(output, torch.Tensor) and output.dim() == 0:
        return output
    if isinstance(output, dict) and isinstance(output.get("loss"), torch.Tensor):
        return output["loss"]
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    shape = f" of shape {tuple(output.shape)}" if isinstance(output, torch.Tensor) else ""
    raise ConfigError(f"the model has no loss(outputs, batch) method, no loss_fn was given, and forward returned "
                      f"a {type(output).__name__}{shape}, not a loss",
                      hint="pass loss_fn=..., add a loss method, or return a scalar loss (or {'loss': ...}) from forward")
