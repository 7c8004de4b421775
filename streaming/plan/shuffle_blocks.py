"""The block-local shuffles of mosaicml-streaming 0.13, py1e (its default) and py1br, with the
same draws in the same order. Both start like py1s: units shuffled by run, cut into canonical-node
parts, permuted per part by epoch (`spans.shuffled_pieces`). Then, per canonical node:

- "py1e": the samples of each piece are permuted; every sample of a piece then moves by the same
  bounded random shift window: a block size b is drawn in [0.75, 1.25) x block_size, and the
  piece's samples get uniform offsets within +-(b - piece size)/2 (clipped to the node), the node
  is sorted by position + offset. A shard is read within about one block: cache-friendly.
- "py1br": the node's pieces are laid out in order, then cut into consecutive blocks of random
  size in [0.75, 1.25) x block_size, staggered by a random per-node offset, and each block is
  permuted.
"""

from __future__ import annotations

import warnings

import numpy as np

from foundry.plugins.errors import ConfigError

from .spans import ramp, shuffled_pieces


def _block_range(block_size: int) -> tuple[int, int]:
    return int(0.75 * block_size), int(1.25 * block_size)


def shuffle_py1e(units: np.ndarray, num_parts: int, seed: int, epoch: int, block_size: int) -> np.ndarray:
    lo, hi, starts, counts, rng = shuffled_pieces(units, num_parts, seed, epoch)
    b_lo, b_hi = _block_range(block_size)
    out, narrow = [], False
    for s, n in zip(starts.tolist(), counts.tolist()):
        sizes = (hi[s:s + n] - lo[s:s + n]).astype(np.int64, copy=False)
        total = int(sizes.sum())
        if total == 0:
            raise ConfigError(f"a canonical node gets no samples: fewer samples than num_canonical_nodes={num_parts}",
                              hint="lower num_canonical_nodes, or check that the dataset index lists its samples")
        samples = np.concatenate([b + rng.permutation(int(e - b)) for b, e in zip(lo[s:s + n].tolist(), hi[s:s + n].tolist())])
        shifts = np.empty(total, dtype=np.float64)
        offset = 0
        for size in sizes.tolist():
            cutoff = (int(rng.integers(b_lo, b_hi)) - size) / 2
            if cutoff < 0:
                cutoff, narrow = 0, True
            low, high = max(-cutoff, -offset), min(cutoff, total - offset - size)
            shifts[offset:offset + size] = rng.uniform(low=low, high=high, size=size)
            offset += size
        positions = np.arange(total, dtype=np.float64) + shifts
        out.append(samples[np.argsort(positions)])  # numpy's default sort, as mosaic's
    if narrow:
        warnings.warn("shuffle_block_size is smaller than some shards: those shards are not mixed with others; "
                      "raise shuffle_block_size for a better shuffle", stacklevel=3)
    return np.concatenate(out).astype(np.int64, copy=False) if out else np.zeros(0, dtype=np.int64)


def shuffle_py1br(units: np.ndarray, num_parts: int, seed: int, epoch: int, block_size: int) -> np.ndarray:
    lo, hi, starts, counts, rng = shuffled_pieces(units, num_parts, seed, epoch)
    sizes = hi - lo
    ids = np.repeat(lo, sizes) + ramp(sizes)
    b_lo, b_hi = _block_range(block_size)
    stagger = rng.integers(0, b_lo, (num_parts,))
    edges = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64, copy=False)
    for node, (s, n) in enumerate(zip(starts.tolist(), counts.tolist())):
        node_start, node_stop = int(edges[s]), int(edges[s + n])
        blocks, end, lag = [], node_start, int(stagger[node])
        while end < node_stop:
            size = int(rng.integers(b_lo, b_hi))
            a, b = max(end - lag, node_start), min(end + size - lag, node_stop)
            blocks.append((a, b))
            end += b - a
        for a, b in blocks:
            ids[a:b] = ids[a:b][rng.permutation(b - a)]
    return ids.astype(np.int64, copy=False)
