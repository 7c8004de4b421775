"""Where a StreamingDataLoader with a user's collate_fn spends its time (Foundry only).

    python bench/streaming/collate_costs.py DATASET_DIR [--batch 32] [--reps 5]

DATASET_DIR: a Foundry copy of the bench's tokens workload (run.py writes one, e.g.
.foundry-cache/bench-streaming/tokens-20000/foundry). CPU time, not wall time, so that a loaded
machine moves the figures less (it still moves them: caches are shared).

1. In one process, µs of CPU a batch for each step a worker takes: the samples decoded one by one
   (`get_sample`) or read as rows (`row_samples`), the collate (bench_common.pad_collate), and the
   hand-over: what torch's pickling does to each tensor (a new shared-memory segment and a copy)
   against one copy into a ring slot (`hand_over`).
2. A real 2-worker epoch per loader kind: the main process's CPU and the workers' CPU per 1,000
   samples, and the wall time (the machine's load is printed beside it). Run it with PYTHONPATH
   pointing at another checkout to compare code (step 1 skips what that checkout lacks).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import pad_collate, pad_transform  # noqa: E402
from foundry.streaming import StreamingDataLoader, StreamingDataset  # noqa: E402
from foundry.streaming.read import rows  # noqa: E402
from foundry.streaming.format.reader import MDSShardFileReader  # noqa: E402


def _cpu_us(fn, reps: int) -> float:
    """Median CPU µs of one call of fn over `reps` rounds of 20 calls."""
    rounds = []
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(20):
            fn()
        rounds.append((time.process_time() - t0) / 20 * 1e6)
    return statistics.median(rounds)


def steps(src: str, batch: int, reps: int) -> None:
    import torch

    torch.set_num_threads(1)  # as in a DataLoader worker
    ds = StreamingDataset(local=src, batch_size=batch)
    info = ds._infos[0]  # the first shard (a private attribute: this script measures internals)
    reader = MDSShardFileReader(info, Path(src) / info.raw_basename)
    indices = list(range(0, batch * 7, 7))[:batch]
    readers = {0: reader}
    shards = [0] * batch
    print(f"1. one batch of {batch}, µs of CPU (median of {reps} rounds of 20)")
    print(f"   samples decoded one by one (get_sample):  {_cpu_us(lambda: [reader.get_sample(i) for i in indices], reps):8.1f}")
    if hasattr(rows, "row_samples"):
        print(f"   samples read as rows (row_samples):       "
              f"{_cpu_us(lambda: rows.row_samples(shards, indices, readers), reps):8.1f}")
    samples = [reader.get_sample(i) for i in indices]
    print(f"   pad_collate:                              {_cpu_us(lambda: pad_collate(samples), reps):8.1f}")
    collate_us = _cpu_us(lambda: pad_collate(samples), reps)

    def segments() -> None:  # what torch's pickling does to each tensor of a worker's batch
        for t in pad_collate(samples).values():
            t.share_memory_()

    print(f"   a shm segment + copy per tensor (torch):  {_cpu_us(segments, reps) - collate_us:8.1f}"
          "  (then an fd through the resource sharer, per tensor)")
    try:
        from foundry.streaming.loader import ring as batch_ring
        from foundry.streaming.loader.handover import hand_over
    except ImportError:
        return

    def ring() -> None:
        for value in hand_over(pad_collate(samples)).values():
            value.ref.ring.bytes[value.ref.slot] = 0  # what the main process does when the batch dies

    print(f"   the batch copied into a ring slot:        {_cpu_us(ring, reps) - collate_us:8.1f}")
    batch_ring._drop_worker_ring()


def epoch(src: str, batch: int, kind: str) -> dict:
    ds = StreamingDataset(local=src, shuffle=True, batch_size=batch)
    kw = {"collate": {"collate_fn": pad_collate}, "transform": {"batch_transform": pad_transform}, "default": {}}[kind]
    loader = StreamingDataLoader(ds, batch_size=batch, num_workers=2, **kw)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for b in loader:
        n += len(next(iter(b.values())))
    wall, main_cpu = time.perf_counter() - t0, time.process_time() - c0
    del loader, b
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers = (children.ru_utime + children.ru_stime) - (children0.ru_utime + children0.ru_stime)
    return {"sps": n / wall, "main_ms": main_cpu / n * 1e6, "workers_ms": workers / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--kinds", default="default,collate,transform")
    a = ap.parse_args()
    steps(a.src, a.batch, a.reps)
    kinds = [k for k in a.kinds.split(",") if k != "transform" or "batch_transform" in StreamingDataLoader.__init__.__code__.co_varnames]
    print(f"2. 2-worker epochs, batch {a.batch}, {a.reps} interleaved rounds: medians "
          "(CPU ms per 1,000 samples in the main process / in the workers; wall samples/s)")
    got: dict[str, list[dict]] = {k: [] for k in kinds}
    loads = []
    for _ in range(a.reps):
        for k in kinds:
            got[k].append(epoch(a.src, a.batch, k))
            loads.append(os.getloadavg()[0])
    for k in kinds:
        med = {key: statistics.median(r[key] for r in got[k]) for key in got[k][0]}
        print(f"   {k:10s} main {med['main_ms']:7.1f}  workers {med['workers_ms']:7.1f}  wall {med['sps']:9,.0f}/s")
    print(f"   load average (1 min) during the epochs: median {statistics.median(loads):.2f}")


if __name__ == "__main__":
    main()
