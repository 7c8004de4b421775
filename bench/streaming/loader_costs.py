"""Where a 2-worker StreamingDataLoader's time goes, on a Foundry MDS dataset of fixed-size columns
(the bench's `tokens`): the figures behind docs/bench-streaming.md, "The DataLoader against the
read floor".

    python bench/streaming/loader_costs.py DATASET_DIR [--batch 256] [--epochs 4]

1. preadv only: every sample of one shuffled epoch read into a batch buffer, in one process, then
   in two processes at once (each half of the batches): µs a row.
2. The workers' batch maker (`WorkerBatches.make`) in one process, no DataLoader around it: µs a
   row, everything included. The ring is swapped for one private buffer (this process is not a
   worker, and nobody would free its slots).
3. StreamingDataLoader, 2 workers, new workers each epoch: each worker's first batches against
   the rest (ms), and samples/s after the first batch.
4. The same with persistent workers, after a first epoch: samples/s and the CPU a sample costs in
   the workers and in the main process.
"""

from __future__ import annotations

import argparse
import multiprocessing.util
import os
import resource
import time

import numpy as np

from foundry.streaming import StreamingDataLoader, StreamingDataset
from foundry.streaming.loader import ring as batch_ring
from foundry.streaming.loader import worker_batches as batch_reads
from foundry.streaming.format import open_shard
from foundry.streaming.format.index import load_index
from foundry.streaming.topology import Topology


def epoch_rows(src: str, batch: int):
    """The shuffled epoch's (shard, index) pairs, and the shards opened for pread."""
    ds = StreamingDataset(local=src, shuffle=True, batch_size=batch)
    plan = ds._epoch_plan(Topology.detect(), 0, 0)
    infos = load_index(open(os.path.join(src, "index.json")).read())
    readers = {k: open_shard(info, os.path.join(src, info.raw_basename), mapped=False) for k, info in enumerate(infos)}
    return plan.shards.tolist(), plan.offsets.tolist(), readers


def preadv_only(src: str, batch: int) -> None:
    shards, indices, readers = epoch_rows(src, batch)
    row_bytes = max(len(reader.get_sample_bytes(0)) for reader in readers.values())  # opens each file
    spans = [(readers[s]._fd, readers[s]._offsets[i]) for s, i in zip(shards, indices)]
    out = np.zeros((batch, row_bytes), np.uint8)
    rows = [[memoryview(out[r])] for r in range(batch)]

    def run(part: int, parts: int) -> float:
        t0, n = time.perf_counter(), 0
        for b in range(part * batch, len(spans) - batch + 1, parts * batch):
            for r in range(batch):
                fd, at = spans[b + r]
                os.preadv(fd, rows[r], at)
            n += batch
        return (time.perf_counter() - t0) / n * 1e6

    print(f"1. preadv only, one process: {min(run(0, 1) for _ in range(3)):.2f} µs a row")
    pipes = []
    for part in range(2):
        r, w = os.pipe()
        if os.fork() == 0:
            os.write(w, f"{min(run(part, 2) for _ in range(3)):.2f}".encode())
            os._exit(0)
        pipes.append(r)
    each = [os.read(r, 64).decode() for r in pipes]
    for _ in pipes:
        os.wait()
    print(f"   two processes at once: {' and '.join(each)} µs a row each")


def maker_alone(src: str, batch: int) -> None:
    shards, indices, readers = epoch_rows(src, batch)
    maker = batch_reads.WorkerBatches(batch, False, None)
    private = {}

    def reserve(columns):
        targets = {k: private.setdefault(k, np.empty(shape, dtype)) for k, (shape, dtype) in columns.items()}
        return targets, targets

    real, batch_ring.reserve = batch_ring.reserve, reserve
    try:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for b in range(0, len(shards) - batch + 1, batch):
                assert maker.make(shards[b:b + batch], indices[b:b + batch], readers, None, True) is not None
            best = min(best, (time.perf_counter() - t0) / (len(shards) // batch * batch) * 1e6)
    finally:
        batch_ring.reserve = real
    print(f"2. WorkerBatches.make in one process: {best:.2f} µs a row")


_MAKE = batch_reads.WorkerBatches.make


def _timed_make(self, *args):
    t0 = time.perf_counter()
    out = _MAKE(self, *args)
    _TIMES.append(time.perf_counter() - t0)
    return out


_TIMES: list[float] = []  # this worker's batches, seconds each


def _report_batches(worker_id: int) -> None:
    def report():
        ms = [t * 1e3 for t in _TIMES]
        print(f"   worker {worker_id}: first 4 batches {', '.join(f'{t:.2f}' for t in ms[:4])} ms; "
              f"the other {len(ms) - 4}: {np.mean(ms[4:]):.2f} ms each", flush=True)
    multiprocessing.util.Finalize(None, report, exitpriority=100)


def new_workers(src: str, batch: int, epochs: int) -> None:
    print("3. StreamingDataLoader, 2 workers, new workers each epoch:")
    batch_reads.WorkerBatches.make = _timed_make  # the forked workers inherit it
    try:
        for _ in range(epochs):
            loader = StreamingDataLoader(StreamingDataset(local=src, shuffle=True, batch_size=batch), batch_size=batch,
                                         num_workers=2, worker_init_fn=_report_batches, multiprocessing_context="fork")
            arrived = [time.perf_counter() for _ in loader]
            print(f"   {(len(arrived) - 1) * batch / (arrived[-1] - arrived[0]) / 1e3:.0f}k samples/s after the first batch",
                  flush=True)
            time.sleep(0.2)  # the workers' reports come before the next epoch's
    finally:
        batch_reads.WorkerBatches.make = _MAKE


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def persistent_workers(src: str, batch: int, epochs: int) -> None:
    loader = StreamingDataLoader(StreamingDataset(local=src, shuffle=True, batch_size=batch), batch_size=batch,
                                 num_workers=2, persistent_workers=True)
    for _ in loader:  # starts the workers
        pass
    workers = [w.pid for w in loader._iterator._workers]
    main0, workers0 = resource.getrusage(resource.RUSAGE_SELF), [_cpu_s(p) for p in workers]
    t0, n = time.perf_counter(), 0
    for _ in range(epochs):
        n += sum(len(next(iter(b.values()))) for b in loader)
    seconds = time.perf_counter() - t0
    main1, workers1 = resource.getrusage(resource.RUSAGE_SELF), [_cpu_s(p) for p in workers]
    main_s = main1.ru_utime + main1.ru_stime - main0.ru_utime - main0.ru_stime
    workers_s = sum(workers1) - sum(workers0)
    print(f"4. persistent workers, {epochs} epochs after the first: {n / seconds / 1e3:.0f}k samples/s; CPU a sample: "
          f"workers {workers_s / n * 1e6:.2f} µs, main process {main_s / n * 1e6:.2f} µs; "
          f"both cores {(workers_s + main_s) / (2 * seconds):.0%} busy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=4)
    a = ap.parse_args()
    preadv_only(a.dataset, a.batch)
    maker_alone(a.dataset, a.batch)
    new_workers(a.dataset, a.batch, a.epochs)
    persistent_workers(a.dataset, a.batch, a.epochs)


if __name__ == "__main__":
    main()
