"""Checkpoint stall vs a plain host copy of the same state (issue 12's measure), both layouts.

    python bench/trainer/bench_stall.py [--width 1536] [--depth 6] [--saves 4] [--parallelism none|fsdp]

The stall is the main-thread time of a save (`saver.last_stall_s`): the copy of model + optimizer
state into the reusable host buffers, plus gathering RNG/dataloader state. The baseline is the
physical limit: copying the same tensors into already-allocated host tensors (pinned on a GPU).
Reported for the first save of a run (the host buffers were reserved in the background after the
first step) and for the saves after it, as medians and as ratios to the baseline. The goal is
<= 1.5x for both. Runs on CPU or, with --device cuda, on a GPU (bench/trainer/gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch


def mlp(width: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


class PlainHostCopy:
    """Copies the trainer's model + optimizer tensors into host memory allocated (and touched) once:
    the physical limit of a checkpoint stall (pinned memory and non-blocking copies on a GPU)."""

    def __init__(self, trainer):
        from foundry.trainer.checkpoint.state import _leaves, _local, live_model_optim_state

        self.live = [_local(t) for _, t in _leaves(live_model_optim_state(trainer.model, trainer.optimizers))]
        self.pin = trainer.device.type == "cuda"
        self.host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=self.pin) for t in self.live]
        for h in self.host:
            h.zero_()

    def __call__(self) -> float:
        start = time.perf_counter()
        for h, t in zip(self.host, self.live):
            h.copy_(t, non_blocking=self.pin)
        if self.pin:
            torch.cuda.synchronize()
        return time.perf_counter() - start


def run_layout(layout: str, a, tmp: Path) -> dict:
    from foundry.trainer import Trainer

    model = mlp(a.width, a.depth)
    stalls: list[float] = []
    copies: list[float] = []
    every = 5

    class Record:
        """Times a plain host copy just before each save (paired, so a loaded machine hits both
        alike), and reads the save's stall on the batch after it."""

        copy = None

        def batch_end(self, trainer):
            saver = trainer.checkpoints.saver
            if trainer.timestamp.batch % every == 0:
                self.copy = self.copy or PlainHostCopy(trainer)
                copies.append(min(self.copy() for _ in range(3)))
            if saver.in_flight and trainer.timestamp.batch % every == 1:  # the batch after a save
                stalls.append(saver.last_stall_s)
                saver.wait()  # keep saves independent: none waits for the previous upload

    g = torch.Generator().manual_seed(0)
    steps = a.saves * every + 1
    batches = [(torch.randn(8, a.width, generator=g), torch.randn(8, 1, generator=g)) for _ in range(steps)]
    t = Trainer(run_name=f"stall-{layout}", model=model, train_dataloader=batches, max_duration=f"{steps}ba",
                loss_fn=torch.nn.functional.mse_loss, save_folder=f"file://{tmp}/ckpt-{layout}",
                save_interval=f"{every}ba", checkpoint_layout=layout, device=a.device, parallelism=a.parallelism,
                run_dir=str(tmp / f"run-{layout}"), progress_bar=False, console_log_interval=10**9,
                callbacks=[Record()], save_overwrite=True)
    t.fit()
    state_bytes = sum(_local_bytes(x) for x in (t.model, t.optimizers))
    ratios = [s / c for s, c in zip(stalls, copies)]
    return {"layout": layout, "first_s": stalls[0], "steady_s": statistics.median(stalls[1:]),
            "copy_s": statistics.median(copies), "first_ratio": ratios[0],
            "steady_ratio": statistics.median(ratios[1:]), "state_mb": state_bytes / 2**20}


def _local_bytes(obj) -> int:
    from foundry.trainer.checkpoint.state import _leaves, _local

    if isinstance(obj, torch.nn.Module):
        return sum(_local(p).numel() * p.element_size() for p in obj.parameters())
    return sum(_local(t).numel() * t.element_size() for o in obj for _, t in _leaves(o.state_dict()["state"]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=1536)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--saves", type=int, default=4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--parallelism", default="none", help="none, or fsdp (world size 1 without torchrun)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    tmp = Path(tempfile.mkdtemp(prefix="foundry-bench-stall-"))
    try:
        rows = [run_layout(layout, a, tmp) for layout in ("full", "sharded")]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    params = sum(p.numel() for p in mlp(a.width, a.depth).parameters())
    if a.json:
        print(json.dumps(rows))
        return
    print(f"\n{a.device}, parallelism {a.parallelism}, MLP {params / 1e6:.1f}M params + AdamW "
          f"(~{rows[0]['state_mb']:.0f} MB of state), {a.saves} saves per layout, medians")
    print("| layout | plain host copy | stall, first save | ratio (paired) | stall, later saves "
          "| ratio (paired, median) |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['layout']} | {r['copy_s'] * 1e3:.1f} ms | {r['first_s'] * 1e3:.1f} ms | {r['first_ratio']:.2f}x | "
              f"{r['steady_s'] * 1e3:.1f} ms | {r['steady_ratio']:.2f}x |")


if __name__ == "__main__":
    main()
