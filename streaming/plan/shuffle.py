"""Shard-aware shuffles of an epoch's positions: mosaicml-streaming 0.13's algorithms, random draws
included, so the same seed gives the same order. Pure numpy, no I/O.

Input: the sizes of the epoch's shuffle units (a shard, or one copy of it when it is repeated) in
position order; output: a permutation `perm` of the positions (the partition's position i reads
big id perm[i]). `seed` is the run's seed; `seed + epoch` seeds each epoch's draws.

- "naive": one permutation of all positions.
- "py1s": units shuffled once per run (seed), cut into `num_canonical_nodes` contiguous parts of
  equal size (a unit on a border is split); each epoch the units of every part are permuted, then
  the samples within every unit.
- "py2s": like py1s, but the samples of every unit are permuted once per run before the cut, and
  again each epoch (part by part).
- "py1e" (mosaic's default) and "py1br": see `shuffle_blocks.py`.
mosaic 0.13 has no "py1b"; it is refused, as mosaic refuses it.
"""

from __future__ import annotations

import numpy as np

from foundry.plugins.errors import ConfigError

from .shuffle_blocks import shuffle_py1br, shuffle_py1e
from .spans import divide, part_ranges, shuffled_pieces

SHUFFLE_ALGOS = ("py1e", "py1br", "py1s", "py2s", "naive")


def default_block_size(num_canonical_nodes: int) -> int:
    return max(4_000_000 // max(1, num_canonical_nodes), 1 << 18)


def check_algo(algo: str) -> None:
    if algo == "py1b":
        raise ConfigError("shuffle_algo 'py1b' does not exist in mosaicml-streaming 0.13",
                          hint="use 'py1br' (random block sizes) or the default 'py1e'")
    if algo not in SHUFFLE_ALGOS:
        raise ConfigError(f"unknown shuffle_algo {algo!r}", hint=f"use one of {', '.join(SHUFFLE_ALGOS)}")


def shuffle_naive(units: np.ndarray, num_parts: int, seed: int, epoch: int, block_size: int) -> np.ndarray:
    return np.random.default_rng(seed + epoch).permutation(int(np.sum(units)))


def shuffle_py1s(units: np.ndarray, num_parts: int, seed: int, epoch: int, block_size: int) -> np.ndarray:
    lo, hi, _, _, rng = shuffled_pieces(units, num_parts, seed, epoch)
    out = [b + rng.permutation(int(e - b)) for b, e in zip(lo.tolist(), hi.tolist())]
    return np.concatenate(out).astype(np.int64, copy=False) if out else np.zeros(0, dtype=np.int64)


def shuffle_py2s(units: np.ndarray, num_parts: int, seed: int, epoch: int, block_size: int) -> np.ndarray:
    ends = np.cumsum(units)
    begins = ends - units
    fixed = np.random.default_rng(seed)
    run = fixed.permutation(len(units))
    seq = np.concatenate([b + fixed.permutation(int(e - b)) for b, e in zip(begins[run].tolist(), ends[run].tolist())]
                         or [np.zeros(0, dtype=np.int64)]).astype(np.int64, copy=False)
    seq_ends = np.cumsum(units[run])
    lo, hi, part = divide(seq_ends - units[run], seq_ends, num_parts)
    starts, counts = part_ranges(part, num_parts)
    rng = np.random.default_rng(seed + epoch)
    out = []
    for s, n in zip(starts.tolist(), counts.tolist()):  # mosaic draws part by part
        for i in (s + rng.permutation(n)).tolist():
            piece = seq[lo[i]:hi[i]]
            out.append(piece[rng.permutation(len(piece))])
    return np.concatenate(out).astype(np.int64, copy=False) if out else np.zeros(0, dtype=np.int64)


def shuffle_positions(algo: str, units: np.ndarray, num_canonical_nodes: int, seed: int, epoch: int,
                      block_size: int) -> np.ndarray:
    """mosaic's `get_shuffle`: the permutation of the epoch's positions."""
    check_algo(algo)
    fn = {"naive": shuffle_naive, "py1s": shuffle_py1s, "py2s": shuffle_py2s,
          "py1e": shuffle_py1e, "py1br": shuffle_py1br}[algo]
    return fn(np.asarray(units, dtype=np.int64), int(num_canonical_nodes), int(seed), int(epoch), int(block_size))
