"""Trainer settings a tool sets from outside a training script, through the environment.

`foundry verify-resume` runs a user's script unchanged, several times, each with its own save
folder; these variables let it do that without the script knowing. Each one, when set, wins over the
argument the script passes to `Trainer(...)`; when unset, nothing changes.

    FOUNDRY_RUN_NAME       run_name
    FOUNDRY_SAVE_FOLDER    save_folder ({run_name} is replaced as usual)
    FOUNDRY_SAVE_INTERVAL  save_interval ("10ba", "1ep", ...)
    FOUNDRY_AUTORESUME     autoresume (1/true/yes or 0/false/no)

What the trainer already read before these: FOUNDRY_RUN_DIR (run_dir when the script gives none:
metrics.jsonl and config.json go there), RUN_NAME and RESUMPTION_INDEX (plugins/launch_env.py).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from foundry.plugins.errors import ConfigError

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def apply_env(run_name: str, settings: dict[str, Any],
              environ: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """(run_name, settings) with the environment's overrides applied; `settings` is not modified."""
    env = os.environ if environ is None else environ
    out = dict(settings)
    run_name = env.get("FOUNDRY_RUN_NAME") or run_name
    if env.get("FOUNDRY_SAVE_FOLDER"):
        out["save_folder"] = env["FOUNDRY_SAVE_FOLDER"]
    if env.get("FOUNDRY_SAVE_INTERVAL"):
        out["save_interval"] = env["FOUNDRY_SAVE_INTERVAL"]
    flag = env.get("FOUNDRY_AUTORESUME", "").strip().lower()
    if flag:
        if flag not in _TRUE + _FALSE:
            raise ConfigError(f"FOUNDRY_AUTORESUME={flag!r} is not a yes/no value", hint="set it to 1 or 0")
        out["autoresume"] = flag in _TRUE
    return run_name, out
