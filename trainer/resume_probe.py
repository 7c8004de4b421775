"""The probe `foundry verify-resume` puts inside a user's training: on only when FOUNDRY_VERIFY_DIR is set.

The verifier compares a run stopped and resumed with one that ran straight. Losses come from
metrics.jsonl; this probe adds what names the cause when they differ: right before each training
step's first forward (after the batch was loaded, before any draw of the step), a digest of every
part of the state the step depends on: model, optimizer, schedulers, grad scaler, the batch (the data
position), each global RNG stream, and every random generator the checkpoint cannot hold (found once
at fit start: a torch.Generator, random.Random or NumPy generator held by a model's module or at a
user module's top level). At fit end it writes a digest of each final parameter.

It also places the stops where the verifier asks, so they do not depend on how fast the machine is:

    FOUNDRY_VERIFY_DIR    where each rank writes rank{R}.jsonl (one flushed JSON row per line)
    FOUNDRY_VERIFY_STEPS  stop training (trainer.stop(), final checkpoint included) after this batch
    FOUNDRY_VERIFY_STOP   "term:S": after batch S, wait for the verifier's SIGTERM (a pause);
                          "kill:S": after a checkpoint of batch S or later is published, wait to be
                          killed (kill -9). Rank 0 writes a {"kind": "waiting"} row for the verifier.

Digests are blake2b over raw bytes, so equal digests mean bit-for-bit equal state.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from foundry.plugins.errors import ConfigError

from .seeding import rng_state

WAIT_SECONDS = 600.0  # a stop the verifier never delivers (it died): give up rather than hang


def probes_from_env(environ: Mapping[str, str] | None = None) -> list["ResumeProbe"]:
    env = os.environ if environ is None else environ
    if not env.get("FOUNDRY_VERIFY_DIR"):
        return []
    steps = env.get("FOUNDRY_VERIFY_STEPS") or None
    kind, stop_at = None, None
    if env.get("FOUNDRY_VERIFY_STOP"):
        kind, _, at = env["FOUNDRY_VERIFY_STOP"].partition(":")
        if kind not in ("term", "kill") or not at.isdigit():
            raise ConfigError(f"FOUNDRY_VERIFY_STOP={env['FOUNDRY_VERIFY_STOP']!r} is not term:N or kill:N",
                              hint="it is set by `foundry verify-resume`; unset it to train normally")
        stop_at = int(at)
    return [ResumeProbe(Path(env["FOUNDRY_VERIFY_DIR"]), int(steps) if steps else None, kind, stop_at)]


class ResumeProbe:
    def __init__(self, out_dir: Path, steps: int | None, stop_kind: str | None, stop_at: int | None):
        self.out_dir, self.steps, self.stop_kind, self.stop_at = out_dir, steps, stop_kind, stop_at
        self._file = None
        self._trainer = None
        self._hook = None
        self._seen_step = -1
        self._generators: dict[str, Any] = {}
        self._stopped = False

    # -- trainer events ---------------------------------------------------------------------------
    def fit_start(self, trainer) -> None:
        self._trainer = trainer
        if self.steps is not None and trainer.timestamp.batch >= self.steps:
            trainer.stop()  # resumed from the last checkpoint: nothing left to train
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.out_dir / f"rank{trainer.env.rank}.jsonl", "a", buffering=1)
        self._generators = find_generators(trainer.raw_model)
        self._hook = trainer.raw_model.register_forward_pre_hook(self._before_forward, with_kwargs=True)
        self._write({"kind": "start", "batch": trainer.timestamp.batch, "resumed_from": trainer.checkpoints.resumed_from,
                     "world_size": trainer.env.world_size, "generators": sorted(self._generators),
                     "metrics_file": str(trainer.run_dir / "metrics.jsonl"),
                     "pid": os.getpid(), "pgid": os.getpgrp()})  # torchrun starts ranks in their own sessions

    def batch_end(self, trainer) -> None:
        batch = trainer.timestamp.batch
        if self.steps is not None and batch >= self.steps:
            trainer.stop()
            return
        if self.stop_kind == "term" and not self._stopped and batch >= self.stop_at:
            self._stopped = True
            self._wait(trainer, {"stop": "term", "batch": batch}, until=lambda: trainer.pause.requested)
        if self.stop_kind == "kill" and not self._stopped and _batch_of(trainer.checkpoints.last_saved) >= self.stop_at:
            # the checkpoint is uploading in the background: publish it now (every rank waits here at the
            # same batch), so the kill lands one batch after it instead of whenever the upload ends
            trainer.publish_pending()

    def checkpoint_published(self, trainer, name: str) -> None:
        self._write({"kind": "published", "checkpoint": name, "batch": trainer.timestamp.batch})
        if self.stop_kind == "kill" and not self._stopped and _batch_of(name) >= self.stop_at:
            self._stopped = True
            for logger in trainer.loggers:  # what a kill would lose from the buffer is the verifier's evidence
                if callable(getattr(logger, "flush", None)):
                    logger.flush()
            self._wait(trainer, {"stop": "kill", "batch": trainer.timestamp.batch, "checkpoint": name},
                       until=lambda: False)
            sys.stderr.write("foundry: verify-resume probe: no kill -9 came; exiting\n")
            os._exit(3)

    def fit_end(self, trainer) -> None:
        if self._hook is not None:
            self._hook.remove()
        if not trainer.paused:
            params = {name: digest(_local(t)) for name, t in trainer.raw_model.state_dict().items()}
            self._write({"kind": "final", "batch": trainer.timestamp.batch, "parameters": params})
        if self._file is not None:
            self._file.close()
            self._file = None

    # -- the digests ------------------------------------------------------------------------------
    def _before_forward(self, module, args, kwargs) -> None:
        trainer = self._trainer
        if not module.training or not torch.is_grad_enabled():
            return  # evaluation
        step = trainer.timestamp.batch + 1
        if step == self._seen_step:
            return  # the step's later microbatches
        self._seen_step = step
        parts = {
            "model": digest({k: _local(v) for k, v in trainer.raw_model.state_dict().items()}),
            "optimizer:state": digest([_plain(o.state_dict().get("state")) for o in trainer.optimizers]),
            "optimizer:hyperparameters": digest([_plain(o.state_dict().get("param_groups")) for o in trainer.optimizers]),
            "schedulers": digest([_plain(s.state_dict()) for s in trainer.schedulers]),
            "scaler": digest(trainer.scaler.state_dict() if trainer.scaler is not None else None),
            "data": digest([args, kwargs]),
        }
        for stream, state in rng_state().items():
            parts[f"rng:{stream}"] = digest(state)
        for name, gen in self._generators.items():
            parts[f"generator:{name}"] = digest(generator_state(gen))
        self._write({"kind": "state", "step": step, "parts": parts})

    # -- plumbing ---------------------------------------------------------------------------------
    def _write(self, row: dict[str, Any]) -> None:
        if self._file is not None:
            row["resumption"] = self._trainer.env.resumption_index if self._trainer else 0
            self._file.write(json.dumps(row) + "\n")

    def _wait(self, trainer, row: dict[str, Any], until) -> None:
        """Rank 0 says it is ready for the stop; every rank holds still until it comes."""
        if trainer.env.is_main:
            self._write({"kind": "waiting", **row})
        deadline = time.monotonic() + WAIT_SECONDS
        while not until() and time.monotonic() < deadline:
            time.sleep(0.02)  # a signal interrupts the sleep and its handler runs here


def _batch_of(checkpoint: str | None) -> int:
    found = re.search(r"ba(\d+)", checkpoint or "")
    return int(found.group(1)) if found else -1


def find_generators(model: torch.nn.Module) -> dict[str, Any]:
    """Random generators outside the global ones (which the checkpoint holds): attributes of the
    model's modules, and top-level names of modules that are not libraries (not under the Python
    installation, not Foundry's own)."""
    # the global instances behind random.* and np.random.*, reached through their public functions
    global_ones = {id(torch.default_generator), id(random.random.__self__), id(np.random.random.__self__)}
    found: dict[int, str] = {}
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if _is_generator(value) and id(value) not in global_ones:
                found.setdefault(id(value), f"model{'.' + path if path else ''}.{attr}")
    prefixes = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    objects = {}
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if not file or os.path.realpath(file).startswith(prefixes):
            continue
        if name.split(".")[0] == "foundry" and not name.startswith("foundry.examples"):
            continue
        for attr, value in list(vars(mod).items()):
            if _is_generator(value) and id(value) not in global_ones:
                found.setdefault(id(value), f"{name}.{attr}")
                objects[id(value)] = value
    for path, module in model.named_modules():
        for value in vars(module).values():
            if _is_generator(value):
                objects[id(value)] = value
    return {found[i]: objects[i] for i in found}


def _is_generator(value: Any) -> bool:
    return isinstance(value, (torch.Generator, random.Random, np.random.Generator, np.random.RandomState))


def generator_state(gen: Any) -> Any:
    if isinstance(gen, torch.Generator):
        return gen.get_state()
    if isinstance(gen, random.Random):
        return gen.getstate()
    if isinstance(gen, np.random.Generator):
        return gen.bit_generator.state
    return gen.get_state()


def _local(t: Any) -> Any:
    return t.to_local() if hasattr(t, "to_local") else t  # a DTensor (FSDP): this rank's shard


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return _local(value)


def digest(value: Any) -> str:
    h = hashlib.blake2b(digest_size=12)
    _feed(h, value)
    return h.hexdigest()


def _feed(h, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = _local(value).detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().data if t.numel() else b"")
    elif isinstance(value, np.ndarray):
        h.update(f"A{value.dtype}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value, key=str):
            h.update(repr(k).encode())
            _feed(h, value[k])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for v in value:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(value, float):
        h.update(b"nan" if math.isnan(value) else value.hex().encode())
    elif value is None or isinstance(value, (bool, int, str, bytes)):
        h.update(repr(value).encode())
    else:  # an object a state_dict should not hold (a function): its type only
        h.update(type(value).__qualname__.encode())
