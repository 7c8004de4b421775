"""`python -m foundry.trainer`: the job a run spec with `parameters` and no `command` runs.

FOUNDRY_PARAMETERS (YAML, set by the control plane) holds the Trainer settings plus factories:

    model: my_pkg.models:build_gpt          # "module:callable" returning the nn.Module
    model_args: {n_layer: 4}
    train_dataloader: my_pkg.data:train_loader   # called with train_dataloader_args
    train_dataloader_args: {remote: s3://bucket/data}
    eval_dataloader: my_pkg.data:val_loader      # optional, with eval_dataloader_args
    loss_fn: my_pkg.models:loss                  # optional: else model.loss(), else forward's loss
    optimizer: {name: AdamW, lr: 3.0e-4}         # any torch.optim class
    max_duration: 1000ba
    save_folder: s3://bucket/{run_name}/checkpoints
    autoresume: true

run_name defaults to RUN_NAME. Exits 75 (PAUSED_EXIT_CODE) after a graceful pause. Unknown keys are
named in one error (exit 2). What a resume restores, and in which order: docs/resume.md.
"""

from __future__ import annotations

import importlib
import os
import sys

from foundry.plugins.errors import ConfigError, FoundryError


def _resolve(ref: str):
    module, _, attr = str(ref).partition(":")
    if not attr:
        raise ConfigError(f"{ref!r} is not a 'module:callable' reference")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {ref!r}: {exc}") from None


def build_from_parameters(params: dict):
    import torch

    from .trainer import Trainer

    params = dict(params)
    try:
        model = _resolve(params.pop("model"))(**params.pop("model_args", {}))
        train = _resolve(params.pop("train_dataloader"))(**params.pop("train_dataloader_args", {}))
    except KeyError as exc:
        raise ConfigError(f"FOUNDRY_PARAMETERS needs {exc.args[0]!r}", hint="see `python -m foundry.trainer --help`")
    if "eval_dataloader" in params:
        params["eval_dataloader"] = _resolve(params.pop("eval_dataloader"))(**params.pop("eval_dataloader_args", {}))
    if "loss_fn" in params:
        params["loss_fn"] = _resolve(params["loss_fn"])
    opt = dict(params.pop("optimizer", {"name": "AdamW", "lr": 1e-3}))
    opt_cls = getattr(torch.optim, opt.pop("name", "AdamW"))
    params.setdefault("run_name", os.environ.get("RUN_NAME", "run"))
    return Trainer(model=model, train_dataloader=train, optimizers=lambda ps: opt_cls(ps, **opt), **params)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    from .signals import install_early

    install_early()  # before torch and the user's model and data: a stop while they load pauses the run
    import yaml

    text = os.environ.get("FOUNDRY_PARAMETERS")
    if not text:
        print("error: FOUNDRY_PARAMETERS is not set\n  hint: run through `foundry run`, or see --help", file=sys.stderr)
        return 2
    try:
        build_from_parameters(yaml.safe_load(text) or {}).fit()
    except FoundryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
