"""The exact-resume matrix's training job: one small Trainer per case, run in the test process or
in a fresh process (`python matrix_job.py JOBS.json`, also under torchrun) that runs a list of
jobs one after the other, so a handful of processes cover every case.

A job: {"case": Case fields, "phase": "straight" | "first" | "second", "save_url", "run_dir",
"data": MDS folder, "out": result folder, optional "load_path"}. "first" stops at batch `stop_at`:
by max_duration (mode "max_duration" / "fresh") or by a SIGTERM to the whole process group after
that batch (mode "sigterm": the trainer pauses, checkpoints and returns paused). "second" runs to
`steps` with autoresume (or from load_path). Results: final parameters (rank 0) and the sample ids
of every batch each rank trained on.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

FEATURES, SAMPLES, GLOBAL_BATCH = 6, 48, 8  # 6 batches per epoch


@dataclass(frozen=True)
class Case:
    name: str
    optimizer: str = "adamw"          # sgd | sgd_momentum | adamw | rmsprop
    scheduler: str | None = None      # warmup_cosine | warmup_constant | torch_step | torch_onecycle
    clip: float | None = None
    microbatch: int | str | None = None
    scaler: bool = False              # a GradScaler (torch.amp, on CPU) whose state must round-trip
    dropout: float = 0.1
    loader: str = "streaming"         # streaming | list (no state: fast-forwarded) | toy (stateful)
    workers: int = 0
    mode: str = "sigterm"             # max_duration (same process) | fresh | sigterm
    steps: int = 9
    stop_at: int = 4                  # the last batch before the stop: mid-epoch unless said otherwise
    first_duration: str | None = None  # max_duration of a stopped first part (default: stop_at batches)


def write_dataset(out: str) -> None:
    import numpy as np

    from foundry.streaming import MDSWriter

    rng = np.random.default_rng(0)
    with MDSWriter(out=out, columns={"id": "int", "x": "ndarray:float32"}, size_limit=400) as w:
        for i in range(SAMPLES):
            w.write({"id": i, "x": rng.standard_normal(FEATURES).astype(np.float32)})


class Model(torch.nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(), torch.nn.Dropout(dropout),
                                       torch.nn.Linear(16, 1))
        self.ids: list[int] = []  # sample ids of the current batch (all its microbatches)

    def forward(self, batch):
        self.ids += batch["id" if "id" in batch else "idx"].tolist()
        return self.net(batch["x"])

    def loss(self, outputs, batch):
        target = batch["x"].sum(dim=1, keepdim=True).sin()
        return torch.nn.functional.mse_loss(outputs, target)


class Recorder:
    """Sample ids of every trained batch (on this rank), and the SIGTERM to the process group."""

    def __init__(self, signal_at: int | None):
        self.signal_at = signal_at
        self.seen: list[list[int]] = []

    def batch_end(self, trainer) -> None:
        self.seen.append(trainer.raw_model.ids)
        trainer.raw_model.ids = []
        if self.signal_at is not None and trainer.timestamp.batch == self.signal_at and trainer.env.rank == 0:
            if trainer.env.world_size == 1:  # the whole group, as scancel --signal does: workers get it too
                os.killpg(os.getpgrp(), signal.SIGTERM)
            else:  # under torchrun the group holds the agent, which would kill the ranks: rank 0 only
                os.kill(os.getpid(), signal.SIGTERM)


def _loader(case: Case, job: dict, rank: int, world: int):
    per_rank = GLOBAL_BATCH // world
    if case.loader == "streaming":
        from foundry.streaming import StreamingDataLoader, StreamingDataset

        ds = StreamingDataset(remote=job["data"], local=str(Path(job["run_dir"]) / f"cache-{job['phase']}-{rank}"),
                              shuffle=True, shuffle_seed=7, batch_size=per_rank, num_canonical_nodes=1)
        return StreamingDataLoader(ds, batch_size=per_rank, num_workers=case.workers)
    import numpy as np

    rng = np.random.default_rng(0)
    xs = torch.from_numpy(rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32))
    if case.loader == "toy":
        sys.path.insert(0, str(Path(__file__).parent))
        from toy_job import ToyLoader

        return ToyLoader(rank, world, width=FEATURES)  # 64 samples: 8 batches per epoch
    # a plain list: no state_dict, so the trainer fast-forwards; the same batches every epoch
    return [{"x": xs[i:i + per_rank], "id": torch.arange(i, i + per_rank)} for i in range(0, SAMPLES, GLOBAL_BATCH)]


def _optimizer(case: Case):
    return {"sgd": lambda ps: torch.optim.SGD(ps, lr=0.05),
            "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
            "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
            "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-3, momentum=0.5)}[case.optimizer]


def _scheduler(case: Case):
    from foundry.trainer import WarmupConstant, WarmupCosine

    if case.scheduler is None:
        return None
    if case.scheduler == "warmup_cosine":
        return WarmupCosine("2ba", alpha_f=0.1)
    if case.scheduler == "warmup_constant":
        return WarmupConstant("3ba")
    return TorchScheduler(case.scheduler, case.steps)


class TorchScheduler:
    """PyTorch's own schedulers, built on the Trainer's optimizer (the `build` hook)."""

    def __init__(self, kind: str, steps: int):
        self.kind, self.steps = kind, steps

    def build(self, optimizer, max_duration, batches_per_epoch):
        if self.kind == "torch_step":
            return torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.7)
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.02, total_steps=self.steps + 1)


def run_job(job: dict) -> dict:
    from foundry.trainer import Trainer
    from foundry.trainer.dist import DistEnv

    case = Case(**job["case"])
    env = DistEnv.detect()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    model = Model(case.dropout)
    phase = job["phase"]
    # the pause is agreed at the next step's loss all-reduce: a signal after batch k-1 stops after batch k
    recorder = Recorder(case.stop_at - 1 if phase == "first" and case.mode == "sigterm" else None)
    duration = f"{case.steps}ba"
    if phase == "first" and case.mode != "sigterm":
        duration = case.first_duration or f"{case.stop_at}ba"
    schedulers = _scheduler(case)
    trainer = Trainer(run_name=f"m-{case.name}", model=model, train_dataloader=_loader(case, job, env.rank,
                      env.world_size), max_duration=duration, optimizers=_optimizer(case),
                      schedulers=schedulers, save_folder=job.get("save_url"), save_interval="1000ba",
                      autoresume=phase == "second" and not job.get("load_path"), load_path=job.get("load_path"),
                      run_dir=job["run_dir"], device="cpu", progress_bar=False, grad_clip_norm=case.clip,
                      device_train_microbatch_size=case.microbatch, callbacks=[recorder], exit_on_pause=False,
                      seed=5)
    if case.scaler:  # fp16's scaler needs a GPU; its state round-trips the same on CPU
        trainer.scaler = trainer.runner.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
    trainer.fit()
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"seen-rank{env.rank}.json").write_text(json.dumps(recorder.seen))
    if env.rank == 0:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, out / "params.pt")
        (out / "result.json").write_text(json.dumps({"paused": trainer.paused, "batch": trainer.timestamp.batch,
                                                     "scale": trainer.scaler.get_scale() if trainer.scaler else None}))
    return {"paused": trainer.paused}


def main() -> int:
    jobs = json.loads(Path(sys.argv[1]).read_text())
    for job in jobs:
        run_job(job)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
