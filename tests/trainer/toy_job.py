"""A tiny deterministic training job for the trainer's tests: run in-process (`run(...)`) or as a
fresh process (`python toy_job.py ARGS`, also under torchrun).

The loader is a stateful one (state_dict/load_state_dict, global position), split by rank with a
fixed global batch, so the same global batches reach training on any world size.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

import torch

N_SAMPLES, FEATURES, GLOBAL_BATCH = 64, 8, 8


class ToyLoader:
    def __init__(self, rank: int, world: int, seed: int = 0, width: int = FEATURES):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(N_SAMPLES, width, generator=g)
        self.y = torch.randn(N_SAMPLES, 1, generator=g)
        self.rank, self.world, self.seed = rank, world, seed
        self.epoch, self.batch_in_epoch = 0, 0
        self.seen: list[list[int]] = []

    def __len__(self) -> int:
        return N_SAMPLES // GLOBAL_BATCH

    def __iter__(self):
        order = torch.randperm(N_SAMPLES, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        per_rank = GLOBAL_BATCH // self.world
        while self.batch_in_epoch < len(self):
            start = self.batch_in_epoch * GLOBAL_BATCH + self.rank * per_rank
            idx = order[start:start + per_rank]
            self.batch_in_epoch += 1
            self.seen.append(idx.tolist())
            yield {"x": self.x[idx], "y": self.y[idx], "idx": idx}
        self.epoch += 1
        self.batch_in_epoch = 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.batch_in_epoch = state["epoch"], state["batch_in_epoch"]


def loader_after_a_stop(**kwargs) -> ToyLoader:
    """A data factory during which the provider's stop (SIGTERM) lands: before the Trainer exists."""
    os.kill(os.getpid(), signal.SIGTERM)
    return ToyLoader(**kwargs)


class ToyModel(torch.nn.Module):
    def __init__(self, dropout: float = 0.0, width: int = FEATURES, hidden: int = 32):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.ReLU(),
                                       torch.nn.Dropout(dropout), torch.nn.Linear(hidden, 1))

    def forward(self, batch):
        return self.net(batch["x"])

    def loss(self, outputs, batch):
        return torch.nn.functional.mse_loss(outputs, batch["y"])


class SignalAt:
    """Sends SIGTERM to this process after batch `step` (a provider's pause, delivered mid-run)."""

    def __init__(self, step: int, rank_only: int | None = 0):
        self.step, self.rank_only = step, rank_only

    def batch_end(self, trainer) -> None:
        if trainer.timestamp.batch == self.step and (self.rank_only is None or trainer.env.rank == self.rank_only):
            os.kill(os.getpid(), signal.SIGTERM)


def count_downloads(folder: str) -> None:
    """Record each checkpoint file this rank fetches from the store, one key per line, in
    FOLDER/gets-rankN.txt (the store that restore opens, wrapped)."""
    from foundry.trainer.checkpoint import loader
    from foundry.trainer.dist import DistEnv

    log = Path(folder) / f"gets-rank{DistEnv.detect().rank}.txt"
    log.parent.mkdir(parents=True, exist_ok=True)
    real_open = loader.open_store

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def get_file(self, key, dest, *args, **kwargs):
            with open(log, "a") as f:
                f.write(f"{key}\n")
            return self.inner.get_file(key, dest, *args, **kwargs)

    loader.open_store = lambda *args, **kwargs: Counting(real_open(*args, **kwargs))


def run(steps: int, save_folder: str | None, run_dir: str, out: str | None = None, pause_at: int | None = None,
        dropout: float = 0.1, layout: str = "full", save_interval: str = "1000ba", autoresume: bool = True,
        width: int = FEATURES, hidden: int = 32, microbatch=None, run_name: str = "toy", **extra):
    from foundry.trainer import Trainer, WarmupCosine
    from foundry.trainer.dist import DistEnv

    torch.set_num_threads(1)
    env = DistEnv.detect()
    torch.manual_seed(1234)
    model = ToyModel(dropout, width, hidden)
    loader = ToyLoader(env.rank, env.world_size, width=width)
    callbacks = [SignalAt(pause_at)] if pause_at else []
    trainer = None
    try:
        trainer = Trainer(run_name=run_name, model=model, train_dataloader=loader, max_duration=f"{steps}ba",
                          optimizers=torch.optim.AdamW(model.parameters(), lr=1e-2),
                          schedulers=WarmupCosine("2ba", alpha_f=0.1),
                          save_folder=save_folder, save_interval=save_interval, autoresume=autoresume,
                          run_dir=run_dir, checkpoint_layout=layout, callbacks=callbacks, progress_bar=False,
                          device="cpu", device_train_microbatch_size=microbatch, **extra)
        trainer.fit()
    finally:
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / f"seen-rank{env.rank}.json").write_text(json.dumps(loader.seen))
            if env.rank == 0:
                torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, Path(out) / "params.pt")
    return trainer


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--save-folder")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--out")
    p.add_argument("--pause-at", type=int)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--layout", default="full")
    p.add_argument("--save-interval", default="1000ba")
    p.add_argument("--width", type=int, default=FEATURES)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--count-downloads", help="a folder: each rank lists there the checkpoint files it fetched")
    a = p.parse_args()
    if a.count_downloads:
        count_downloads(a.count_downloads)
    run(a.steps, a.save_folder, a.run_dir, a.out, a.pause_at, a.dropout, a.layout, a.save_interval,
        width=a.width, hidden=a.hidden)


if __name__ == "__main__":
    sys.exit(main())
