"""Shared by every side of the streaming benchmark (runs in Foundry's and the peers' venvs).

Workloads (identical samples for every library):
- tokens: sample i = {"tokens": int32[2048] filled from a fixed pattern}, 8 KiB each.
- images: sample i = {"image": ~2 KB JPEG bytes, "label": int}; 256 distinct JPEGs reused.
"""

from __future__ import annotations

import io
import json
import os
import resource
import sys
import time

import numpy as np

BATCH = 32
TOKENS = 2048


def token_sample(i: int, base: np.ndarray) -> np.ndarray:
    out = base.copy()
    out[0] = i
    return out


def token_base() -> np.ndarray:
    return (np.arange(TOKENS, dtype=np.int64) * 2654435761 % 50257).astype(np.int32)


def jpeg_pool(n: int = 256) -> list[bytes]:
    from PIL import Image

    rng = np.random.default_rng(0)
    pool = []
    for k in range(n):
        arr = rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=60)
        pool.append(buf.getvalue())
    return pool


class _AnonPeak:
    """Peak anonymous memory (RssAnon: heap, arrays; not file pages mapped from the page cache),
    sampled every 20 ms in a daemon thread, because mmap'd shard pages inflate plain max RSS."""

    def __init__(self) -> None:
        import threading

        self.peak = 0.0
        threading.Thread(target=self._run, daemon=True).start()

    @staticmethod
    def now() -> float:
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return 0.0

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, self.now())
            time.sleep(0.02)


ANON = _AnonPeak()


def maxrss_mb(children: bool = False) -> float:
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0


def du(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def count(item) -> int:
    """Samples in a yielded item: a batch (dict of tensors/lists) or one sample."""
    if isinstance(item, dict):
        v = next(iter(item.values()))
        if hasattr(v, "shape") and getattr(v, "ndim", 0) >= 1 and item.get("__batched__", True):
            return int(v.shape[0]) if not isinstance(v, np.ndarray) else 1
        if isinstance(v, list):
            return len(v)
        return 1
    return 1


def timed_epoch(iterable, batched: bool) -> dict:
    t0 = time.perf_counter()
    first = None
    n = 0
    for item in iterable:
        if first is None:
            first = time.perf_counter() - t0
        if batched:
            v = next(iter(item.values())) if isinstance(item, dict) else item[0]
            n += len(v)
        else:
            n += 1
    return {"seconds": time.perf_counter() - t0, "samples": n, "first_sample_s": first}


def emit(result: dict) -> None:
    result["maxrss_mb"] = maxrss_mb()
    result["peak_anon_mb"] = max(ANON.peak, ANON.now())
    result["maxrss_children_mb"] = maxrss_mb(children=True)
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


def collate(batch):
    """Same collate for every side: arrays and numbers stacked into tensors, bytes kept as a list."""
    from torch.utils.data import default_collate

    out = {}
    for key in batch[0]:
        values = [s[key] for s in batch]
        if isinstance(values[0], (bytes, bytearray, memoryview)):
            out[key] = [bytes(v) for v in values]  # litdata yields memoryviews, which cannot cross processes
        else:
            out[key] = default_collate(values)
    return out
