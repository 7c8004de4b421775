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

from foundry.streaming import StreamingDataset

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
    loader: str = "streaming"         # see LOADERS
    workers: int = 0
    mode: str = "sigterm"             # max_duration (same process) | fresh | sigterm | kill (-9 after a checkpoint)
    drop_last: bool = False
    eval: bool = False                # an eval loader (a torch DataLoader, `workers` workers) beside the train loader
    steps: int = 9
    stop_at: int = 4                  # the last batch before the stop: mid-epoch unless said otherwise
    first_duration: str | None = None  # max_duration of a stopped first part (default: stop_at batches)


# Ways of feeding data (the `loader` of a Case):
#   streaming        Foundry's StreamingDataLoader over a StreamingDataset
#   torch_streaming  torch's DataLoader over a StreamingDataset given no batch_size (Composer's seeds)
#   torch_subclass   torch's DataLoader over a StreamingDataset subclass whose __getitem__ transforms
#   map_sampler      torch's DataLoader over a map-style dataset with a DistributedSampler (set_epoch)
#   list             a plain list of batches (no state: fast-forwarded)
#   toy              a loader with its own state_dict (toy_job.ToyLoader)
LOADERS = ("streaming", "torch_streaming", "torch_subclass", "map_sampler", "list", "toy")


def write_dataset(out: str, samples: int = SAMPLES) -> None:
    from foundry.streaming import MDSWriter

    with MDSWriter(out=out, columns={"id": "int", "x": "ndarray:float32"}, size_limit=400) as w:
        for i, x in enumerate(_features(samples)):
            w.write({"id": i, "x": x})


def _features(samples: int):
    import numpy as np

    rng = np.random.default_rng(0)
    return [rng.standard_normal(FEATURES).astype(np.float32) for _ in range(samples)]


class MapDataset(torch.utils.data.Dataset):
    """Map-style: sample i of the same features the MDS dataset holds."""

    def __init__(self, samples: int):
        self.x = _features(samples)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"id": i, "x": torch.from_numpy(self.x[i])}


class Model(torch.nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(), torch.nn.Dropout(dropout),
                                       torch.nn.Linear(16, 1))
        self.ids: list[int] = []  # sample ids of the current batch (all its microbatches)

    def forward(self, batch):
        if self.training:  # not the eval loader's
            self.ids += batch["id" if "id" in batch else "idx"].tolist()
        return self.net(batch["x"])

    def loss(self, outputs, batch):
        target = batch["x"].sum(dim=1, keepdim=True).sin()
        return torch.nn.functional.mse_loss(outputs, target)


class Recorder:
    """Sample ids of every trained batch (on this rank), the SIGTERM to the process group, and the
    kill -9 once a checkpoint of batch `kill_after` is published (the ids so far written first)."""

    def __init__(self, signal_at: int | None, kill_after: int | None = None, out: Path | None = None):
        self.signal_at, self.kill_after, self.out = signal_at, kill_after, out
        self.seen: list[list[int]] = []
        self.losses: list[float] = []  # every step's (all-reduced) loss
        self.evals: list[list] = []    # [batch, eval loss]

    def batch_end(self, trainer) -> None:
        self.seen.append(trainer.raw_model.ids)
        self.losses.append(trainer.last_loss)
        trainer.raw_model.ids = []
        if self.signal_at is not None and trainer.timestamp.batch == self.signal_at and trainer.env.rank == 0:
            if trainer.env.world_size == 1:  # the whole group, as scancel --signal does: workers get it too
                os.killpg(os.getpgrp(), signal.SIGTERM)
            else:  # under torchrun the group holds the agent, which would kill the ranks: rank 0 only
                os.kill(os.getpid(), signal.SIGTERM)
        if self.kill_after is not None and trainer.timestamp.batch > self.kill_after:
            trainer._published(trainer.checkpoints.wait())  # the checkpoint of batch kill_after is out
            self.write(self.out, trainer.env.rank)
            os.kill(os.getpid(), signal.SIGKILL)

    def eval_end(self, trainer, metrics) -> None:
        self.evals.append([trainer.timestamp.batch, metrics["eval/loss"]])

    def write(self, out: Path, rank: int) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"seen-rank{rank}.json").write_text(json.dumps(self.seen))
        (out / f"losses-rank{rank}.json").write_text(json.dumps({"losses": self.losses, "evals": self.evals}))


class Doubled(StreamingDataset):
    """mosaic's usual subclass: __getitem__ transforms what super() reads."""

    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return {"id": sample["id"], "x": sample["x"] * 2}


def _loader(case: Case, job: dict, rank: int, world: int):
    per_rank = GLOBAL_BATCH // world
    local = str(Path(job["run_dir"]) / f"cache-{job['phase']}-{rank}")
    if case.loader == "streaming":
        from foundry.streaming import StreamingDataLoader

        ds = StreamingDataset(remote=job["data"], local=local, shuffle=True, shuffle_seed=7, batch_size=per_rank,
                              num_canonical_nodes=1)
        return StreamingDataLoader(ds, batch_size=per_rank, num_workers=case.workers, drop_last=case.drop_last)
    if case.loader in ("torch_streaming", "torch_subclass"):
        from torch.utils.data import DataLoader

        if case.loader == "torch_streaming":  # as the seeds write it: the dataset is not told the batch size
            ds = StreamingDataset(remote=job["data"], local=local, shuffle=True, shuffle_seed=7, num_canonical_nodes=1)
        else:
            ds = Doubled(remote=job["data"], local=local, shuffle=True, shuffle_seed=7, batch_size=per_rank,
                             num_canonical_nodes=1)
        return DataLoader(ds, batch_size=per_rank, num_workers=case.workers, drop_last=case.drop_last)
    if case.loader == "map_sampler":
        from torch.utils.data import DataLoader, DistributedSampler

        ds = MapDataset(job.get("samples", SAMPLES))
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=3, drop_last=case.drop_last)
        return DataLoader(ds, batch_size=per_rank, sampler=sampler, num_workers=case.workers, drop_last=case.drop_last)
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
    out = Path(job["out"])
    killed = phase == "first" and case.mode == "kill"
    recorder = Recorder(case.stop_at - 1 if phase == "first" and case.mode == "sigterm" else None,
                        kill_after=case.stop_at if killed else None, out=out)
    duration = f"{case.steps}ba"
    if phase == "first" and case.mode not in ("sigterm", "kill"):
        duration = case.first_duration or f"{case.stop_at}ba"
    eval_loader = None
    if case.eval:
        eval_loader = torch.utils.data.DataLoader(MapDataset(12), batch_size=4, num_workers=case.workers)
    schedulers = _scheduler(case)
    trainer = Trainer(run_name=f"m-{case.name}", model=model, train_dataloader=_loader(case, job, env.rank,
                      env.world_size), max_duration=duration, optimizers=_optimizer(case),
                      schedulers=schedulers, save_folder=job.get("save_url"),
                      save_interval=f"{case.stop_at}ba" if case.mode == "kill" else "1000ba",
                      eval_dataloader=eval_loader, eval_interval="4ba",
                      autoresume=phase == "second" and not job.get("load_path"), load_path=job.get("load_path"),
                      run_dir=job["run_dir"], device="cpu", progress_bar=False, grad_clip_norm=case.clip,
                      device_train_microbatch_size=case.microbatch, callbacks=[recorder], exit_on_pause=False,
                      seed=5)
    if case.scaler:  # fp16's scaler needs a GPU; its state round-trips the same on CPU
        trainer.scaler = trainer.runner.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
    trainer.fit()
    recorder.write(out, env.rank)
    if env.rank == 0:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, out / "params.pt")
        (out / "result.json").write_text(json.dumps({"paused": trainer.paused, "batch": trainer.timestamp.batch,
                                                     "scale": trainer.scaler.get_scale() if trainer.scaler else None}))
    return {"paused": trainer.paused}


def main() -> int:
    jobs = json.loads(Path(sys.argv[1]).read_text())
    for job in jobs:
        if job["phase"] == "first" and job["case"]["mode"] == "kill":
            _run_killed(job)
        else:
            run_job(job)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


def _run_killed(job: dict) -> None:
    """A job that ends in kill -9, in a forked child (this process has imported torch and run nothing
    yet), so one process runs several; its loader's workers are the test's to reap (process group)."""
    if torch.distributed.is_initialized():
        run_job(job)  # under torchrun: the kill ends this rank (one job per run)
        return
    pid = os.fork()
    if pid == 0:
        try:
            run_job(job)
        finally:
            os._exit(3)  # not killed: the test sees no seen-file cut at the checkpoint
    _, status = os.waitpid(pid, 0)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        raise SystemExit(f"job {job['case']['name']} was not killed (status {status})")


if __name__ == "__main__":
    sys.exit(main())
