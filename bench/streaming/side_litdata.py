"""litdata side (runs in .venv-peers/litdata, isolated mode)."""

from __future__ import annotations

import sys
import time

sys.path.insert(0, sys.argv[1])  # the bench folder
from bench_common import BATCH, collate, emit, jpeg_pool, timed_epoch, token_base, token_sample  # noqa: E402
from litdata import StreamingDataLoader, StreamingDataset  # noqa: E402  (imported before any timer starts)
from litdata.streaming.writer import BinaryWriter  # noqa: E402


def write(workload: str, out: str, n: int) -> None:
    t0 = time.perf_counter()
    w = BinaryWriter(out, chunk_bytes="64MB")
    if workload == "tokens":
        base = token_base()
        for i in range(n):
            w.add_item(i, {"tokens": token_sample(i, base)})
    else:
        pool = jpeg_pool()
        for i in range(n):
            w.add_item(i, {"image": pool[i % len(pool)], "label": i})
    w.done()
    w.merge()
    emit({"seconds": time.perf_counter() - t0, "samples": n})


def dataset(src: str, cache: str | None):
    if cache:
        from litdata.streaming import downloader
        from litdata.streaming.resolver import Dir

        # SeaweedFS on loopback speaks plain http; litdata's obstore client refuses it by default.
        downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = "true"

        return StreamingDataset(input_dir=Dir(path=cache, url=src), shuffle=True, max_cache_size="50GB")
    return StreamingDataset(input_dir=src, shuffle=True)


def epoch(src: str, mode: str, cache: str | None = None) -> None:
    t0 = time.perf_counter()
    ds = dataset(src, cache)
    if mode == "plain":
        res = timed_epoch(ds, batched=False)
    else:
        res = timed_epoch(StreamingDataLoader(ds, batch_size=BATCH, num_workers=2, collate_fn=collate), batched=True)
    res["setup_s"] = time.perf_counter() - t0 - res["seconds"]
    emit(res)


def resume(src: str) -> None:
    t0 = time.perf_counter()
    ds = dataset(src, None)
    n = len(ds)
    state = ds.state_dict(num_samples_yielded=(int(n * 0.75) // BATCH) * BATCH, num_workers=0, batch_size=BATCH)
    fresh = dataset(src, None)
    fresh.load_state_dict(state)
    first = next(iter(fresh))
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
