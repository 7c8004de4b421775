"""Checkpoint stall vs a plain host copy of the same state (issue 12's measure), both layouts.

    python bench/trainer/bench_stall.py [--width 1536] [--depth 6] [--saves 4] [--runs 3] [--parallelism none|fsdp]
    torchrun --nproc_per_node 2 bench/trainer/bench_stall.py --parallelism fsdp ...   # several ranks

The stall is the main-thread time of a save (`saver.last_stall_s`): the copy of model + optimizer
state into the reusable host buffers, this rank's RNG/dataloader state, and the hand-off to the
background thread. The baseline is the physical limit: copying the same tensors into
already-allocated host tensors (pinned on a GPU), best of 3, just before each save. Reported for
the first save of a run (the host buffers were reserved and the copy planned in the background
after the first step) and for the saves after it, as ratios to the baseline paired save by save.
Each layout runs `--runs` times, interleaved, so the first save is measured more than once: the
table shows the median and the worst run. Under torchrun every rank measures its own and the table
shows, per save, the slowest rank's ratio (the loop waits for it at the next all-reduce). The goal
is <= 1.5x for both. Runs on CPU or, with --device cuda, on a GPU (bench/trainer/gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from bench_models import data, mlp


class PlainHostCopy:
    """Copies the trainer's model + optimizer tensors into host memory allocated (and touched) once:
    the physical limit of a checkpoint stall (pinned memory and non-blocking copies on a GPU)."""

    def __init__(self, trainer):
        from foundry.trainer.checkpoint.state import _leaves, live_model_optim_state
        from foundry.trainer.torch_compat import local_tensor as _local

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


def run_layout(layout: str, a, tmp: Path, run: int = 0) -> dict:
    """One training run with `a.saves` saves: {"stalls", "copies", "ratios" (paired), "state_mb"}."""
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

    steps = a.saves * every + 1
    t = Trainer(run_name=f"stall-{layout}-{run}", model=model, train_dataloader=data(a.width, steps, 8),
                max_duration=f"{steps}ba", loss_fn=torch.nn.functional.mse_loss,
                save_folder=f"file://{tmp}/ckpt-{layout}-{run}", save_interval=f"{every}ba", checkpoint_layout=layout,
                device=a.device, parallelism=a.parallelism, run_dir=str(tmp / f"run-{layout}-{run}"),
                progress_bar=False, console_log_interval=10**9, callbacks=[Record()], save_overwrite=True)
    t.fit()
    state_bytes = sum(_local_bytes(x) for x in (t.model, t.optimizers))
    return {"stalls": stalls, "copies": copies, "ratios": [s / c for s, c in zip(stalls, copies)],
            "state_mb": state_bytes / 2**20}


def summarize(layout: str, runs: list[dict]) -> dict:
    """Per layout over the runs: the first save's ratio (median, worst run) and the later saves'
    (median of each run's median, worst run's median)."""
    med = statistics.median
    firsts = [r["ratios"][0] for r in runs]
    laters = [med(r["ratios"][1:]) for r in runs]
    return {"layout": layout, "runs": len(runs), "copy_s": med(c for r in runs for c in r["copies"]),
            "first_s": med(r["stalls"][0] for r in runs), "steady_s": med(s for r in runs for s in r["stalls"][1:]),
            "first_ratio": med(firsts), "first_worst": max(firsts), "steady_ratio": med(laters),
            "steady_worst": max(laters), "first_each": firsts, "steady_each": laters,
            "state_mb": runs[0]["state_mb"]}


def slowest_rank(per_rank: list[dict]) -> dict:
    """One rank's result made of, save by save, the slowest rank's stall and ratio."""
    if len(per_rank) == 1:
        return per_rank[0]
    ratios = [max(rs) for rs in zip(*(r["ratios"] for r in per_rank))]
    stalls = [max(ss) for ss in zip(*(r["stalls"] for r in per_rank))]
    copies = [max(cs) for cs in zip(*(r["copies"] for r in per_rank))]
    return {"stalls": stalls, "copies": copies, "ratios": ratios, "state_mb": per_rank[0]["state_mb"]}


def _local_bytes(obj) -> int:
    from foundry.trainer.checkpoint.state import _leaves
    from foundry.trainer.torch_compat import local_tensor as _local

    if isinstance(obj, torch.nn.Module):
        return sum(_local(p).numel() * p.element_size() for p in obj.parameters())
    return sum(_local(t).numel() * t.element_size() for o in obj for _, t in _leaves(o.state_dict()["state"]))


def shared_tmp(world: int) -> tuple[Path, object]:
    """A scratch folder every rank sees (the store of a sharded save is one folder for all ranks)."""
    if world == 1:
        return Path(tempfile.mkdtemp(prefix="foundry-bench-stall-")), None
    import torch.distributed as dist

    dist.init_process_group("gloo")  # the Trainer finds it started and uses it
    box = [tempfile.mkdtemp(prefix="foundry-bench-stall-") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return Path(box[0]), dist


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=1536)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--saves", type=int, default=4)
    p.add_argument("--runs", type=int, default=3, help="training runs per layout (each has one first save)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--parallelism", default="none", help="none, or fsdp (world size 1 without torchrun)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    tmp, dist = shared_tmp(world)
    layouts = ("full", "sharded")
    results: dict[str, list[dict]] = {layout: [] for layout in layouts}
    try:
        for run in range(a.runs):  # interleaved: a burst of load hits both layouts alike
            for layout in layouts:
                mine = run_layout(layout, a, tmp, run)
                per_rank = [mine]
                if dist is not None:
                    per_rank = [None] * world
                    dist.all_gather_object(per_rank, mine)
                results[layout].append(slowest_rank(per_rank))
    finally:
        if dist is not None:
            dist.barrier()
        if dist is None or dist.get_rank() == 0:
            shutil.rmtree(tmp, ignore_errors=True)
    if dist is not None and dist.get_rank() != 0:
        return
    rows = [summarize(layout, results[layout]) for layout in layouts]
    params = sum(p.numel() for p in mlp(a.width, a.depth).parameters())
    if a.json:
        print(json.dumps(rows))
        return
    ranks = f"{world} ranks (slowest rank per save)" if world > 1 else "world size 1"
    print(f"\n{a.device}, parallelism {a.parallelism}, {ranks}, MLP {params / 1e6:.1f}M params + AdamW "
          f"(~{rows[0]['state_mb']:.0f} MB of state per rank), {a.runs} runs x {a.saves} saves per layout")
    print("| layout | plain host copy | first save: ratio, median (worst) | later saves: ratio, median (worst) "
          "| first, each run | later, each run |\n|---|---|---|---|---|---|")
    for r in rows:
        each = lambda xs: " ".join(f"{x:.2f}" for x in xs)  # noqa: E731
        print(f"| {r['layout']} | {r['copy_s'] * 1e3:.1f} ms | {r['first_ratio']:.2f}x ({r['first_worst']:.2f}x) | "
              f"{r['steady_ratio']:.2f}x ({r['steady_worst']:.2f}x) | {each(r['first_each'])} | {each(r['steady_each'])} |")


if __name__ == "__main__":
    main()
