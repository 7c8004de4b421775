"""Shared by every side of the streaming benchmark (runs in Foundry's and the peers' venvs).

Workloads (identical samples for every library):
- tokens: sample i = {"tokens": int32[2048] filled from a fixed pattern}, 8 KiB each.
- images: sample i = {"image": ~2 KB JPEG bytes, "label": int}; 256 distinct JPEGs reused.
- WORKLOAD-zstd: the same samples in zstd-compressed shards.

Epoch modes: plain (iterate the dataset), loader (DataLoader, batch 32, 2 workers), loader256
(batch 256, 2 workers). Each side uses its library's own loader and default collate. collate /
collate256: the same loaders, every side given the same fine-tuning collate_fn (`pad_collate`).
transform / transform256: Foundry's loader keeps its worker-made batch and hands it to
`batch_transform=pad_transform`, which makes the same dict; the peers run `pad_collate`.
"""

from __future__ import annotations

import functools
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


def split_workload(workload: str) -> tuple[str, str | None]:
    """"tokens-zstd" -> ("tokens", "zstd"); "tokens" -> ("tokens", None)."""
    base, _, compression = workload.partition("-")
    return base, compression or None


def batch_for(mode: str) -> int:
    return 256 if mode.endswith("256") else BATCH


PAD_TO = 64         # pad to a multiple of this, as fine-tuning collators do (pad_to_multiple_of)
PAD_ID = 0
IGNORE_INDEX = -100  # labels where the loss ignores a position


def pad_collate(batch):
    """A fine-tuning collate_fn: each sample's tokens padded to the batch's longest (a multiple of
    PAD_TO) into int64 input_ids, an attention_mask, and labels that ignore the padding."""
    import torch

    lengths = [len(s["tokens"]) for s in batch]
    width = -(-max(lengths) // PAD_TO) * PAD_TO
    input_ids = np.full((len(batch), width), PAD_ID, np.int64)
    mask = np.zeros((len(batch), width), np.int64)
    for row, (sample, n) in enumerate(zip(batch, lengths)):
        input_ids[row, :n] = sample["tokens"]
        mask[row, :n] = 1
    labels = np.where(mask == 1, input_ids, IGNORE_INDEX)
    return {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask),
            "labels": torch.from_numpy(labels)}


def pad_transform(batch):
    """`pad_collate`'s dict made from the stacked batch ({"tokens": int32[n, length]}), for
    Foundry's batch_transform: every row has the same length, so padding is only to PAD_TO."""
    import torch

    tokens = batch["tokens"]
    n, length = tokens.shape
    width = -(-length // PAD_TO) * PAD_TO
    input_ids = torch.full((n, width), PAD_ID, dtype=torch.int64)
    input_ids[:, :length] = tokens
    mask = torch.zeros((n, width), dtype=torch.int64)
    mask[:, :length] = 1
    labels = input_ids.masked_fill(mask == 0, IGNORE_INDEX)
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def samples(workload: str, n: int):
    """The workload's n samples, identical for every library: (index, sample dict)."""
    workload, _ = split_workload(workload)
    if workload == "tokens":
        base = token_base()
        for i in range(n):
            yield i, {"tokens": token_sample(i, base)}
    else:
        pool = jpeg_pool()
        for i in range(n):
            yield i, {"image": pool[i % len(pool)], "label": i}


def prepare_samples(workload: str) -> None:
    """What `samples` needs built once, done before a write is timed: PIL's import and the 256 JPEG
    encodes are not the writer's time (they were ~0.15 s of a ~0.25 s images write, for every side)."""
    if split_workload(workload)[0] == "images":
        jpeg_pool()


MDS_COLUMNS = {"tokens": {"tokens": "ndarray:int32:2048"}, "images": {"image": "bytes", "label": "int"}}


def write_mds(writer_class, workload: str, out: str, n: int) -> None:
    """The write measurement for the two MDS writers (Foundry's and mosaicml-streaming's)."""
    base, compression = split_workload(workload)
    prepare_samples(workload)
    t0 = time.perf_counter()
    with writer_class(out=out, columns=MDS_COLUMNS[base], compression=compression) as w:
        for _, sample in samples(workload, n):
            w.write(sample)
    emit({"seconds": time.perf_counter() - t0, "samples": n})


def epoch_result(ds, loader_class, mode: str, started: float, collate_fn=None, batch_transform: bool = False) -> dict:
    """One epoch of `ds`, plain or through `loader_class` with 2 workers; setup time since `started`.
    collate* modes give every side `pad_collate`; transform* modes give a loader that takes
    `batch_transform` (Foundry's) `pad_transform`, and the others `pad_collate`."""
    if mode == "plain":
        res = timed_epoch(ds, batched=False)
    else:
        kw = {"collate_fn": collate_fn} if collate_fn is not None else {}
        if mode.startswith("transform") and batch_transform:
            kw = {"batch_transform": pad_transform}
        elif mode.startswith(("collate", "transform")):
            kw = {"collate_fn": pad_collate}
        res = timed_epoch(loader_class(ds, batch_size=batch_for(mode), num_workers=2, **kw), batched=True)
    res["setup_s"] = time.perf_counter() - started - res["seconds"]
    return res


def resume_at_75(make_dataset, num_canonical_nodes=lambda ds: 1) -> None:
    """Time from building a dataset to its first sample after loading a state at 75% of the epoch
    (mosaicml-streaming's state keys, which Foundry reads too)."""
    t0 = time.perf_counter()
    ds = make_dataset()
    ds.load_state_dict({"epoch": 0, "sample_in_epoch": (int(ds.size * 0.75) // BATCH) * BATCH,
                        "shuffle_seed": 9176, "num_canonical_nodes": num_canonical_nodes(ds),
                        "initial_physical_nodes": 1})
    assert next(iter(ds)) is not None
    emit({"seconds": time.perf_counter() - t0})


def main(commands: dict, argv: list[str]) -> None:
    """`side.py [BENCH_DIR] COMMAND ARGS...`: run one measurement in this process."""
    cmd, *args = argv
    {"rss_floor": rss_floor, **commands}[cmd](*args)


def rss_floor() -> None:
    """Peak RSS of the process tree for a batch-256, 2-worker torch DataLoader over a dataset that
    reads nothing (10,000 zero token arrays per worker): what the venv's Python, torch and
    workers cost before any library reads data. Same code on every side; only the venv differs."""
    from torch.utils.data import DataLoader, IterableDataset

    class Nothing(IterableDataset):
        def __iter__(self):
            zeros = np.zeros(TOKENS, np.int32)
            for _ in range(10_000):
                yield {"tokens": zeros}

    t0 = time.perf_counter()
    n = sum(len(b["tokens"]) for b in DataLoader(Nothing(), batch_size=256, num_workers=2))
    emit({"seconds": time.perf_counter() - t0, "samples": n})


@functools.lru_cache(maxsize=None)
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
        self.tree_peak = 0.0
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
            self.tree_peak = max(self.tree_peak, tree_rss_mb())
            time.sleep(0.02)


def tree_rss_mb() -> float:
    """RSS of this process and every descendant (DataLoader workers), summed."""
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0) / 1024.0
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass
    return total


ANON = _AnonPeak()  # after tree_rss_mb: its thread calls it at once (it died of a NameError when it won the race)


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
    first = first_wall = None
    n = 0
    marks = {}  # samples -> seconds until that many had come (a first training batch, not only a sample)
    pending = [256, 32]
    mark = pending.pop()
    for item in iterable:
        if first is None:
            first = time.perf_counter() - t0
            first_wall = time.time()
        if batched:
            v = next(iter(item.values())) if isinstance(item, dict) else item[0]
            n += len(v)
        else:
            n += 1
        if n >= mark:  # one comparison a sample, as before
            now = time.perf_counter() - t0
            while n >= mark:
                marks[mark] = now
                mark = pending.pop() if pending else float("inf")
    out = {"seconds": time.perf_counter() - t0, "samples": n, "first_sample_s": first,
           "first_32_s": marks.get(32), "first_256_s": marks.get(256)}
    if os.environ.get("BENCH_SPAWNED_AT") and first_wall is not None:
        # from the moment run.py started this process: the interpreter, every import, then the sample
        out["from_spawn_s"] = first_wall - float(os.environ["BENCH_SPAWNED_AT"])
    return out


def emit(result: dict) -> None:
    result["maxrss_mb"] = maxrss_mb()
    result["peak_anon_mb"] = max(ANON.peak, ANON.now())
    result["maxrss_children_mb"] = maxrss_mb(children=True)
    result["peak_tree_rss_mb"] = max(ANON.tree_peak, tree_rss_mb())
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
