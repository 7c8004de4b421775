"""mosaicml-streaming 0.13 side (runs in its own venv, isolated mode)."""

from __future__ import annotations

import sys
import time

sys.path.insert(0, sys.argv[1])  # the bench folder (isolated mode adds nothing)
from bench_common import BATCH, batch_for, emit, epoch_result, main, resume_at_75, write_mds  # noqa: E402
from streaming import MDSWriter, StreamingDataset  # noqa: E402  (imported before any timer starts)
from torch.utils.data import DataLoader  # noqa: E402


def clean() -> None:
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()


def write(workload: str, out: str, n: str) -> None:
    write_mds(MDSWriter, workload, out, int(n))


def dataset(src: str, cache: str | None, batch: int = BATCH):
    clean()
    if cache:
        return StreamingDataset(remote=src, local=cache, shuffle=True, batch_size=batch)
    return StreamingDataset(local=src, shuffle=True, batch_size=batch)


def epoch(src: str, mode: str, cache: str | None = None) -> None:
    t0 = time.perf_counter()
    emit(epoch_result(dataset(src, cache, batch_for(mode)), DataLoader, mode, t0))


def resume(src: str) -> None:
    resume_at_75(lambda: dataset(src, None), num_canonical_nodes=lambda ds: ds.num_canonical_nodes or 1)


if __name__ == "__main__":
    main({"write": write, "epoch": epoch, "resume": resume}, sys.argv[2:])
