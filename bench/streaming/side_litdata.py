"""litdata side (runs in .venv-peers/litdata, isolated mode)."""

from __future__ import annotations

import sys
import time

sys.path.insert(0, sys.argv[1])  # the bench folder
from bench_common import BATCH, collate, emit, epoch_result, main, prepare_samples, samples, split_workload  # noqa: E402
from litdata import StreamingDataLoader, StreamingDataset  # noqa: E402  (imported before any timer starts)
from litdata.streaming.writer import BinaryWriter  # noqa: E402


def write(workload: str, out: str, n: str) -> None:
    prepare_samples(workload)
    t0 = time.perf_counter()
    w = BinaryWriter(out, chunk_bytes="64MB", compression=split_workload(workload)[1])
    for i, sample in samples(workload, int(n)):
        w.add_item(i, sample)
    w.done()
    w.merge()
    emit({"seconds": time.perf_counter() - t0, "samples": int(n)})


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
    # litdata yields bytes columns as memoryviews, which cannot cross processes: the shared collate
    # turns them into bytes (arrays go through torch's default_collate, as litdata's own default)
    emit(epoch_result(dataset(src, cache), StreamingDataLoader, mode, t0, collate_fn=collate))


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
    main({"write": write, "epoch": epoch, "resume": resume}, sys.argv[2:])
