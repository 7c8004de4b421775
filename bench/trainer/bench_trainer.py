"""Trainer benchmarks (CPU): interleaved repetitions, medians, ratios.

    .venv/bin/python bench/trainer/bench_trainer.py [--reps 5] [--steps 40] [--s3]

1. step time: the Trainer vs a hand-written PyTorch loop on the same model, data and optimizer
   (both call loss.item() every step, as any loop that logs does); median of per-step times,
   which resists bursts from other processes on a shared machine.
2. stall per checkpoint: main-thread time the Trainer spends in a save (copy to host memory)
   vs a blocking torch.save + upload (put_file) of the same state to the same store.
3. process start -> first resumed step (fresh process, checkpoint downloaded, verified, restored),
   next to process start -> first step of a fresh run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_models import data, mlp

HERE = Path(__file__).resolve().parent


def plain_loop(width, depth, batches, warmup) -> list[float]:
    """Per-step wall times of a hand-written loop (after `warmup` steps)."""
    model = mlp(width, depth)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times, last = [], time.perf_counter()
    for i, (x, y) in enumerate(batches):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        now = time.perf_counter()
        if i >= warmup:
            times.append(now - last)
        last = now
    return times


class StepClock:
    """Per-step wall times of the Trainer: from one batch_end to the next (the whole loop)."""

    def __init__(self, warmup):
        self.warmup, self.last, self.n, self.times = warmup, None, 0, []

    def batch_end(self, trainer):
        now = time.perf_counter()
        if self.n >= self.warmup:
            self.times.append(now - self.last)
        self.n += 1
        self.last = now


def trainer_loop(width, depth, batches, warmup, tmp: Path) -> list[float]:
    from foundry.trainer import Trainer

    model = mlp(width, depth)
    clock = StepClock(warmup)
    Trainer(run_name="bench", model=model, train_dataloader=batches, max_duration=f"{len(batches)}ba",
            optimizers=torch.optim.AdamW(model.parameters(), lr=1e-3), loss_fn=torch.nn.functional.mse_loss,
            device="cpu", run_dir=str(tmp / "run-step"), progress_bar=False, callbacks=[clock]).fit()
    return clock.times


def stall_trainer(width, depth, tmp: Path, folder: str, saves: int = 4) -> list[float]:
    """Main-thread stall of each save (saves far enough apart that none waits for the previous).
    The first save of a run uses host buffers reserved in the background after step 1; it is reported apart."""
    from foundry.trainer import Trainer

    model = mlp(width, depth)
    stalls = []

    class Record:
        def batch_end(self, trainer):
            if trainer.checkpoints.saver.in_flight and trainer.timestamp.batch % 10 == 0:
                stalls.append(trainer.checkpoints.saver.last_stall_s)
                trainer.checkpoints.saver.wait()  # keep saves independent

    t = Trainer(run_name="bench", model=model, train_dataloader=data(width, saves * 10 + 1, 8),
                max_duration=f"{saves * 10 + 1}ba", loss_fn=torch.nn.functional.mse_loss, save_folder=str(folder),
                save_interval="10ba", device="cpu", run_dir=str(tmp / "run-stall"), progress_bar=False,
                callbacks=[Record()], save_overwrite=True)
    t.fit()
    return stalls, t


def stall_blocking(trainer, tmp: Path, url: str) -> float:
    from foundry.plugins.manager import open_store

    store = open_store(url)
    start = time.perf_counter()
    state = {"model": trainer.raw_model.state_dict(), "optim": [o.state_dict() for o in trainer.optimizers]}
    path = tmp / "blocking.pt"
    torch.save(state, path)
    store.put_file("blocking/state.pt", path)
    return time.perf_counter() - start


def resume_probe(tmp: Path, fresh: bool) -> dict:
    folder, run_dir = tmp / "ckpt-probe", tmp / "run-probe"
    if fresh:
        shutil.rmtree(folder, ignore_errors=True)
    out = subprocess.run([sys.executable, str(HERE / "resume_probe.py"), str(folder), str(run_dir), "4" if fresh else "8", "1024"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--s3", action="store_true", help="also checkpoint to SeaweedFS (S3), started here")
    p.add_argument("--only-step", action="store_true", help="measure the step time only")
    a = p.parse_args()
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="foundry-bench-"))
    batches = data(a.width, a.steps)
    warm = 5
    stores = {"file://": f"file://{tmp}/stores"}
    if a.s3:
        sys.path.insert(0, str(HERE.parents[1] / "tests"))
        import os

        from support.storage_servers import start_seaweedfs

        weed, server = start_seaweedfs(tmp / "weed")
        os.environ.update(server.env())
        stores["s3 (SeaweedFS)"] = f"s3://{server.create_bucket('bench')}"
    plain, trainer, probes = [], [], []
    t_stall = {k: [] for k in stores}
    first_stall = {k: [] for k in stores}
    b_stall = {k: [] for k in stores}
    for rep in range(a.reps):  # interleaved
        plain += plain_loop(a.width, a.depth, batches, warm)
        trainer += trainer_loop(a.width, a.depth, batches, warm, tmp)
        if a.only_step:
            continue
        for kind, url in stores.items():
            stalls, t = stall_trainer(a.width * 2, a.depth, tmp, f"{url}/stall/r{rep}")
            first_stall[kind].append(stalls[0])
            t_stall[kind] += stalls[1:]
            b_stall[kind].append(stall_blocking(t, tmp, f"{url}/blocking/r{rep}"))
        fresh = resume_probe(tmp, fresh=True)
        resumed = resume_probe(tmp, fresh=False)
        assert resumed["resumed_from"], resumed
        probes.append((fresh, resumed))
    med = statistics.median
    if a.only_step:
        print(f"step time over {len(plain)} steps each: plain {med(plain) * 1e3:.2f} ms, "
              f"Trainer {med(trainer) * 1e3:.2f} ms, ratio {med(trainer) / med(plain):.3f}")
        return
    params_step = sum(p.numel() for p in mlp(a.width, a.depth).parameters())
    params_ckpt = sum(p.numel() for p in mlp(a.width * 2, a.depth).parameters())
    rows = [
        ("step time, hand-written loop", f"{med(plain) * 1e3:.2f} ms", ""),
        ("step time, Trainer", f"{med(trainer) * 1e3:.2f} ms", f"{med(trainer) / med(plain):.3f}x of plain"),
    ]
    for kind in stores:
        rows += [
            (f"stall per checkpoint, Trainer, {kind}", f"{med(t_stall[kind]) * 1e3:.1f} ms",
             f"first save of a run (host buffers reserved after step 1): {med(first_stall[kind]) * 1e3:.1f} ms"),
            (f"stall, blocking torch.save + put_file, {kind}", f"{med(b_stall[kind]) * 1e3:.1f} ms",
             f"{med(b_stall[kind]) / med(t_stall[kind]):.1f}x the Trainer's stall"),
        ]
    rows += [
        ("process start -> first step (fresh)", f"{med(f['first_step'] for f, _ in probes):.2f} s", ""),
        ("process start -> first resumed step", f"{med(r['first_step'] for _, r in probes):.2f} s",
         f"imports {med(r['imports'] for _, r in probes):.2f} s, trainer ready (ckpt loaded) "
         f"{med(r['trainer_ready'] for _, r in probes):.2f} s"),
    ]
    print(f"\nCPU, torch threads=1, {a.reps} interleaved reps, medians (step time: over all "
          f"{len(plain)} steps of each side); step model {params_step / 1e6:.2f}M params "
          f"(batch 64), checkpoint model {params_ckpt / 1e6:.2f}M params + AdamW state")
    print("| measure | median | ratio |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if a.s3:
        weed.terminate()
        weed.wait(30)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
