"""Training step time while a checkpoint uploads in the background vs without (issue 32).

    .venv/bin/python bench/trainer/ckpt_step_during_upload.py [--width 2048] [--depth 8] [--steps 80] [--priority low]

Starts SeaweedFS on loopback; one Trainer run on it saves every `--every` batches (~0.4 GB of MLP +
AdamW state at the defaults) and records each step's time with whether a save was in flight
(handed off, not yet published) when the step ended. Prints the median step time of each kind
and their ratio (goal: within 5%), and the load average. One process, torch threads = 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--every", type=int, default=40)
    p.add_argument("--priority", default="low", help="checkpoint_upload_priority: normal, low or idle")
    a = p.parse_args()
    sys.path.insert(0, str(HERE.parents[1] / "tests"))
    import torch
    from bench_models import data, mlp
    from support.storage_servers import start_seaweedfs, stop_seaweedfs

    from foundry.trainer import Trainer

    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="foundry-bench-step-"))
    weed, server = start_seaweedfs(tmp / "weed")
    os.environ.update(server.env())
    loads = [os.getloadavg()[0]]
    steps: dict[bool, list[float]] = {True: [], False: []}

    class Record:
        def batch_end(self, t):
            if t.timestamp.batch > 2:  # past the first steps (allocations, host buffers reserved)
                steps[t.checkpoints.saver.in_flight is not None and not t.checkpoints.saver._done.is_set()].append(
                    t._last_step[2])
            loads.append(os.getloadavg()[0])

    try:
        t = Trainer(run_name="step-bench", model=mlp(a.width, a.depth), train_dataloader=data(a.width, a.steps, 64),
                    max_duration=f"{a.steps}ba", loss_fn=torch.nn.functional.mse_loss,
                    save_folder=f"s3://{server.create_bucket('step-bench')}/ckpt", save_interval=f"{a.every}ba",
                    device="cpu", run_dir=str(tmp / "run"), progress_bar=False, console_log_interval=10**9,
                    callbacks=[Record()], checkpoint_upload_priority=a.priority)
        t.fit()
    finally:
        stop_seaweedfs(weed)
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    busy, idle = steps[True], steps[False]
    params = sum(p.numel() for p in mlp(a.width, a.depth).parameters())
    print(f"MLP {params / 1e6:.0f}M params + AdamW ({params * 12 / 1e9:.2f} GB of state), batch 64, save every "
          f"{a.every} steps, upload priority {a.priority}; 1-min load average {min(loads):.1f}-{max(loads):.1f}")
    print(f"| steps | n | median step |\n|---|---|---|\n| no upload in flight | {len(idle)} | {med(idle) * 1e3:.0f} ms |")
    if busy:
        print(f"| upload in flight | {len(busy)} | {med(busy) * 1e3:.0f} ms ({med(busy) / med(idle):.2f}x) |")


if __name__ == "__main__":
    main()
