"""Checks on a run's `parameters` (what `python -m foundry.trainer` builds a Trainer from) that
need no torch and import nothing of the user's: `foundry run --dry-run` and the control plane run
them before a job is planned, so a typo is a one-line error now, not a failed job later.

Checked: the required keys, the `module:callable` references, unknown keys (the Trainer's settings,
its keyword arguments and the factory keys of trainer/__main__.py), the time strings, and the types
of the mappings. Importing the references is left to the job (the code may exist only there).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from foundry.plugins.errors import ConfigError

from .config import BARE_INT_UNIT, TrainerConfig
from .time import Time

# Keys trainer/__main__.build_from_parameters takes out before calling Trainer(...)
FACTORY_KEYS = ("model", "model_args", "train_dataloader", "train_dataloader_args", "eval_dataloader",
                "eval_dataloader_args", "loss_fn", "optimizer")
# Trainer(...) keyword arguments that are not TrainerConfig fields and can come from YAML
TRAINER_KWARGS = ("progress_bar", "exit_on_pause", "config")
REQUIRED = ("model", "train_dataloader", "max_duration")
TIME_KEYS = ("max_duration", "save_interval", "eval_interval", "log_interval", "console_log_interval")
_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def known_keys() -> set[str]:
    return {f.name for f in dataclasses.fields(TrainerConfig)} | set(FACTORY_KEYS) | set(TRAINER_KWARGS)


def check_parameters(params: Any) -> None:
    """Raise a one-line ConfigError (naming the key) for parameters the built-in trainer would refuse."""
    if not isinstance(params, dict):
        raise ConfigError(f"parameters: must be a mapping (got {type(params).__name__})")
    unknown = sorted(str(k) for k in params if k not in known_keys())
    if unknown:
        raise ConfigError(f"parameters: unknown key(s) {', '.join(unknown)} for the built-in trainer",
                          hint="see `python -m foundry.trainer --help`, or give a `command` of your own")
    missing = [k for k in REQUIRED if params.get(k) in (None, "")]
    if missing:
        raise ConfigError(f"parameters: the built-in trainer needs {', '.join(missing)}",
                          hint="e.g. model: my_pkg.models:build, train_dataloader: my_pkg.data:loader, max_duration: 1000ba")
    for key in ("model", "train_dataloader", "eval_dataloader", "loss_fn"):
        if key in params and not (isinstance(params[key], str) and _REF.match(params[key])):
            raise ConfigError(f"parameters.{key}: {params[key]!r} is not a 'module:callable' reference",
                              hint="e.g. my_pkg.models:build_gpt")
    for key in ("model_args", "train_dataloader_args", "eval_dataloader_args", "optimizer"):
        if key in params and not isinstance(params[key], dict):
            raise ConfigError(f"parameters.{key}: must be a mapping (got {type(params[key]).__name__})")
    if not isinstance(params.get("optimizer", {}).get("name", "AdamW"), str):
        raise ConfigError("parameters.optimizer.name: must be a torch.optim class name, e.g. AdamW")
    for key in TIME_KEYS:
        if key in params:
            try:
                Time.parse(params[key], default_unit=BARE_INT_UNIT[key])
            except ConfigError as exc:
                raise ConfigError(f"parameters.{key}: {exc.message}", hint=exc.hint) from None
    settings = {k: v for k, v in params.items() if k not in FACTORY_KEYS and k not in TRAINER_KWARGS}
    settings.setdefault("run_name", "dry-run")
    settings.pop("device_train_microbatch_size", None)   # its check needs torch; the job makes it
    try:
        TrainerConfig(**settings)
    except ConfigError as exc:
        raise ConfigError(f"parameters: {exc.message}", hint=exc.hint) from None
    except TypeError as exc:
        raise ConfigError(f"parameters: {exc}") from None
