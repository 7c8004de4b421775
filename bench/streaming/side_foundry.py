"""Foundry side: `python side_foundry.py CMD ...` (see run.py for the commands)."""

from __future__ import annotations

import sys
import time

import numpy as np

from bench_common import BATCH, batch_for, emit, epoch_result, main, resume_at_75, write_mds

from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset  # imported before any timer starts
from foundry.streaming.topology import Topology


def write(workload: str, out: str, n: str) -> None:
    write_mds(MDSWriter, workload, out, int(n))


def dataset(src: str, cache: str | None, batch: int = BATCH, **kw):
    if cache:
        return StreamingDataset(remote=src, local=cache, shuffle=True, batch_size=batch, **kw)
    return StreamingDataset(local=src, shuffle=True, batch_size=batch, **kw)


def epoch(src: str, mode: str, cache: str | None = None) -> None:
    t0 = time.perf_counter()
    ds = dataset(src, cache, batch_for(mode))
    res = epoch_result(ds, StreamingDataLoader, mode, t0, batch_transform=True)
    res["bytes_downloaded"] = ds.bytes_downloaded
    emit(res)


def resume(src: str) -> None:
    resume_at_75(lambda: dataset(src, None))


def floor(src: str, order: str = "shards") -> None:
    """The raw floor: every sample's bytes sliced from the mmap'd shards, no decode; in shard order,
    or (`order="shuffled"`) in the order of one shuffled epoch of the dataset, as the sides read."""
    import json
    import mmap
    import os

    index = json.load(open(os.path.join(src, "index.json")))
    if order == "shuffled":  # the plan is made before the timer starts; every side makes its own
        plan = dataset(src, None)._epoch_plan(Topology.detect(), 0, 0)
        visits = list(zip(plan.shards.tolist(), plan.offsets.tolist()))
    t0 = time.perf_counter()
    maps, offsets = [], []
    for shard in index["shards"]:
        with open(os.path.join(src, shard["raw_data"]["basename"]), "rb") as f:
            maps.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        count = int(np.frombuffer(maps[-1], "<u4", 1, 0)[0])
        offsets.append(np.frombuffer(maps[-1], "<u4", count + 1, 4).tolist())
    if order == "shuffled":
        for s, i in visits:
            maps[s][offsets[s][i]:offsets[s][i + 1]]
        n = len(visits)
    else:
        for m, off in zip(maps, offsets):
            for i in range(len(off) - 1):
                m[off[i]:off[i + 1]]
        n = sum(len(off) - 1 for off in offsets)
    seconds = time.perf_counter() - t0
    for m in maps:
        m.close()
    emit({"seconds": seconds, "samples": n})


def ceiling(src: str) -> None:
    """The decompression ceiling: every .zstd shard decompressed in memory, one after another
    (what any reader of these shards must at least spend on this core)."""
    import glob
    import json
    import os

    import zstandard

    from foundry.streaming.format.zstd_seekable import read_seek_table

    files = sorted(glob.glob(os.path.join(src, "**", "*.zstd"), recursive=True))
    datas = [open(f, "rb").read() for f in files]
    n = sum(s["samples"] for s in json.load(open(os.path.join(src, "index.json")))["shards"])
    t0 = time.perf_counter()
    for data in datas:
        table = read_seek_table(data)  # Foundry's shards are frames: one decompress call each
        bounds = table.packed.tolist() if table is not None else [0, len(data)]
        # every frame kept until the shard is done: a reader must hold the whole shard somewhere
        # (1 MiB frames decompressed into a reused buffer stay in the CPU cache and run ~10x faster)
        whole = [zstandard.ZstdDecompressor().decompress(data[a:b]) for a, b in zip(bounds, bounds[1:])]
        del whole
    emit({"seconds": time.perf_counter() - t0, "samples": n})


if __name__ == "__main__":
    main({"write": write, "epoch": epoch, "resume": resume, "floor": floor, "ceiling": ceiling}, sys.argv[1:])
