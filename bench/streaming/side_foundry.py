"""Foundry side: `python side_foundry.py CMD ...` (see run.py for the commands)."""

from __future__ import annotations

import sys
import time

import numpy as np

from bench_common import BATCH, collate, emit, jpeg_pool, timed_epoch, token_base, token_sample

from foundry.streaming import MDSWriter, StreamingDataset  # imported before any timer starts
from torch.utils.data import DataLoader


def write(workload: str, out: str, n: int) -> None:
    t0 = time.perf_counter()
    if workload == "tokens":
        base = token_base()
        with MDSWriter(out=out, columns={"tokens": "ndarray:int32:2048"}) as w:
            for i in range(n):
                w.write({"tokens": token_sample(i, base)})
    else:
        pool = jpeg_pool()
        with MDSWriter(out=out, columns={"image": "bytes", "label": "int"}) as w:
            for i in range(n):
                w.write({"image": pool[i % len(pool)], "label": i})
    emit({"seconds": time.perf_counter() - t0, "samples": n})


def dataset(src: str, cache: str | None, **kw):
    if cache:
        return StreamingDataset(remote=src, local=cache, shuffle=True, batch_size=BATCH, **kw)
    return StreamingDataset(local=src, shuffle=True, batch_size=BATCH, **kw)


def epoch(src: str, mode: str, cache: str | None = None) -> None:
    t0 = time.perf_counter()
    ds = dataset(src, cache)
    if mode == "plain":
        res = timed_epoch(ds, batched=False)
    else:
        res = timed_epoch(DataLoader(ds, batch_size=BATCH, num_workers=2, collate_fn=collate), batched=True)
    res["first_sample_s"] += 0  # measured from iteration start
    res["setup_s"] = time.perf_counter() - t0 - res["seconds"]
    res["bytes_downloaded"] = ds.bytes_downloaded
    emit(res)


def resume(src: str) -> None:
    t0 = time.perf_counter()
    ds = dataset(src, None)
    n = ds.size
    ds.load_state_dict({"epoch": 0, "sample_in_epoch": (int(n * 0.75) // BATCH) * BATCH, "shuffle_seed": 9176,
                        "num_canonical_nodes": 1, "initial_physical_nodes": 1})
    first = next(iter(ds))
    assert first is not None
    emit({"seconds": time.perf_counter() - t0})


def floor(src: str) -> None:
    """The raw floor: every sample's bytes sliced from the mmap'd shards, in shard order, no decode."""
    import json
    import mmap
    import os

    index = json.load(open(os.path.join(src, "index.json")))
    t0 = time.perf_counter()
    n = 0
    for shard in index["shards"]:
        with open(os.path.join(src, shard["raw_data"]["basename"]), "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        count = int(np.frombuffer(m, "<u4", 1, 0)[0])
        off = np.frombuffer(m, "<u4", count + 1, 4).tolist()
        for i in range(count):
            m[off[i]:off[i + 1]]
        n += count
        m.close()
    emit({"seconds": time.perf_counter() - t0, "samples": n})


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "write":
        write(args[0], args[1], int(args[2]))
    elif cmd == "epoch":
        epoch(args[0], args[1], args[2] if len(args) > 2 else None)
    elif cmd == "resume":
        resume(args[0])
    elif cmd == "floor":
        floor(args[0])
