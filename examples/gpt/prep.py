"""Data preparation: the Python standard library's own source files (present on every machine
with Python, no download) -> byte-level token sequences -> MDS shards at any storage URL.

    python examples/gpt/prep.py --out file:///tmp/pystdlib --max-mb 4

Each sample is {"tokens": uint8[block_size + 1]} (bytes are the tokens; vocab 256). Files are taken
in sorted order, so the dataset is the same on every machine with the same Python version.
The last `--val-fraction` of sequences go to the `val` split, the rest to `train`.
"""

from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

import numpy as np


def corpus_bytes(max_bytes: int) -> bytes:
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts[-2:-1] or path.name.startswith("test_"):
            continue
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return b"\n".join(chunks)[:max_bytes]


def prepare(out: str, max_mb: float = 4.0, block_size: int = 64, val_fraction: float = 0.005,
            shard_bytes: int = 1 << 20) -> dict[str, int]:
    from foundry.streaming import MDSWriter

    data = np.frombuffer(corpus_bytes(int(max_mb * (1 << 20))), dtype=np.uint8)
    n = (len(data) - 1) // block_size
    seqs = [data[i * block_size: i * block_size + block_size + 1] for i in range(n)]
    n_val = max(1, int(n * val_fraction))
    counts = {}
    for split, part in (("train", seqs[:-n_val]), ("val", seqs[-n_val:])):
        with MDSWriter(out=f"{out.rstrip('/')}/{split}", columns={"tokens": "ndarray:uint8"},
                       size_limit=shard_bytes, exist_ok=True) as writer:
            for seq in part:
                writer.write({"tokens": np.ascontiguousarray(seq)})
        counts[split] = len(part)
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="storage URL for the MDS dataset (train/ and val/ below it)")
    p.add_argument("--max-mb", type=float, default=4.0)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--secret", help="a stored secret to write with (`foundry create secret s3 NAME`)")
    a = p.parse_args()
    if a.secret:
        from foundry.app.sdk import use_secret

        with use_secret(a.secret):
            counts = prepare(a.out, a.max_mb, a.block_size)
    else:
        counts = prepare(a.out, a.max_mb, a.block_size)
    print(f"wrote {counts['train']} train and {counts['val']} val sequences to {a.out}")


if __name__ == "__main__":
    main()
