"""Shard-aware shuffles. Pure numpy, no I/O.

The epoch's samples arrive grouped by shard. `shuffle_groups` permutes whole shard groups, so a
shard's samples stay together; each canonical node then shuffles its contiguous span with one of:

- "naive": a full permutation of the span (no locality).
- "py1s": shards shuffled, then a full permutation within each span (mosaicml's py1s).
- "py1b": the span cut into fixed blocks of `block_size` samples, each block permuted.
- "py1e" (default): every sample is moved by a random offset of at most about block_size/2, so a
  shard is read within a window of about one block and each shard is downloaded once.
"""

from __future__ import annotations

import numpy as np

from foundry.plugins.errors import ConfigError

SHUFFLE_ALGOS = ("py1e", "py1b", "py1s", "py1br", "py2s", "naive")


def default_block_size(num_canonical_nodes: int) -> int:
    return max(4_000_000 // max(1, num_canonical_nodes), 1 << 18)


def group_bounds(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end index of each run of equal consecutive keys."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    cuts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    ends = np.concatenate([cuts, [len(keys)]]).astype(np.int64)
    return starts, ends


def gather_runs(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenate values[starts[i]:ends[i]] for every i, vectorized."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return values[:0]
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return values[np.arange(total, dtype=np.int64) + offsets]


def shuffle_groups(ids: np.ndarray, shard_of: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Permute the runs of samples that share a shard, keeping each run contiguous."""
    starts, ends = group_bounds(shard_of)
    perm = rng.permutation(len(starts))
    return gather_runs(ids, starts[perm], ends[perm])


def shuffle_span(span: np.ndarray, algo: str, block_size: int, rng: np.random.Generator) -> np.ndarray:
    """Shuffle one canonical node's span of sample ids."""
    n = len(span)
    if n <= 1:
        return span.copy()
    if algo in ("naive", "py1s", "py2s"):
        return span[rng.permutation(n)]
    if algo in ("py1b", "py1br"):
        block = max(1, int(block_size))
        out = span.copy()
        keys = np.arange(n, dtype=np.int64) // block
        noise = rng.random(n)
        return out[np.lexsort((noise, keys))]
    if algo == "py1e":
        keys = np.arange(n, dtype=np.float64) + rng.uniform(-0.5, 0.5, n) * float(max(1, block_size))
        return span[np.argsort(keys)]  # random float keys: ties have probability ~0
    raise ConfigError(f"unknown shuffle_algo {algo!r}", hint=f"use one of {', '.join(SHUFFLE_ALGOS)}")
