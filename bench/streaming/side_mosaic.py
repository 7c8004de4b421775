"""mosaicml-streaming 0.13 side (runs in its own venv, isolated mode)."""

from __future__ import annotations

import sys
import time

sys.path.insert(0, sys.argv[1])  # the bench folder (isolated mode adds nothing)
from bench_common import BATCH, collate, emit, jpeg_pool, timed_epoch, token_base, token_sample  # noqa: E402
from streaming import MDSWriter, StreamingDataset  # noqa: E402  (imported before any timer starts)
from torch.utils.data import DataLoader  # noqa: E402


def clean() -> None:
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()


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


def dataset(src: str, cache: str | None):
    clean()
    if cache:
        return StreamingDataset(remote=src, local=cache, shuffle=True, batch_size=BATCH)
    return StreamingDataset(local=src, shuffle=True, batch_size=BATCH)


def epoch(src: str, mode: str, cache: str | None = None) -> None:
    t0 = time.perf_counter()
    ds = dataset(src, cache)
    if mode == "plain":
        res = timed_epoch(ds, batched=False)
    else:
        res = timed_epoch(DataLoader(ds, batch_size=BATCH, num_workers=2, collate_fn=collate), batched=True)
    res["setup_s"] = time.perf_counter() - t0 - res["seconds"]
    emit(res)


def resume(src: str) -> None:
    t0 = time.perf_counter()
    ds = dataset(src, None)
    n = ds.size
    ds.load_state_dict({"epoch": 0, "sample_in_epoch": (int(n * 0.75) // BATCH) * BATCH, "shuffle_seed": 9176,
                        "num_canonical_nodes": ds.num_canonical_nodes or 1, "initial_physical_nodes": 1})
    first = next(iter(ds))
    assert first is not None
    emit({"seconds": time.perf_counter() - t0})


if __name__ == "__main__":
    cmd, *args = sys.argv[2:]
    if cmd == "write":
        write(args[0], args[1], int(args[2]))
    elif cmd == "epoch":
        epoch(args[0], args[1], args[2] if len(args) > 2 else None)
    elif cmd == "resume":
        resume(args[0])
