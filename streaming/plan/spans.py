"""Spans of positions cut into canonical-node parts, the way mosaicml-streaming 0.13 cuts them
(its `divide_spans`), and the per-run / per-epoch permutations of those pieces. Pure numpy.

A part k holds positions [N*k//C, N*(k+1)//C) of the span sequence; a span crossing a border is
split; an empty span belongs to the first part that reaches it. The numpy generators are called in
exactly mosaic's order (one permutation per part, then per piece), which is what makes the
orders equal; the per-sample work is vectorised.
"""

from __future__ import annotations

import numpy as np


def ramp(lengths: np.ndarray) -> np.ndarray:
    """0..n-1 for every n in `lengths`, concatenated."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def divide(begins: np.ndarray, ends: np.ndarray, num_parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut a sequence of spans into `num_parts` parts of N*k//num_parts samples, splitting the
    spans that cross a border. Returns the pieces (begin, end) in order and each piece's part."""
    sizes = ends - begins
    seq_end = np.cumsum(sizes)
    seq_start = seq_end - sizes
    bounds = sizes.sum() * np.arange(num_parts + 1, dtype=np.int64) // num_parts
    full = np.flatnonzero(sizes > 0)
    first = np.searchsorted(bounds, seq_start[full], side="right") - 1
    last = np.searchsorted(bounds, seq_end[full], side="left") - 1
    span = np.repeat(full, last - first + 1)
    part = np.repeat(first, last - first + 1) + ramp(last - first + 1)
    lo = np.maximum(seq_start[span], bounds[part])
    hi = np.minimum(seq_end[span], bounds[part + 1])
    keep = hi > lo  # empty parts in between give nothing
    span, part, lo, hi = span[keep], part[keep], lo[keep], hi[keep]
    empty = np.flatnonzero(sizes == 0)  # an empty span joins the first part that reaches it
    span = np.concatenate([span, empty])
    part = np.concatenate([part, np.searchsorted(bounds[1:], seq_start[empty], side="left")])
    lo = np.concatenate([lo, seq_start[empty]])
    hi = np.concatenate([hi, seq_start[empty]])
    order = np.lexsort((lo, span))
    span, part, lo, hi = span[order], part[order], lo[order], hi[order]
    shift = begins[span] - seq_start[span]
    return lo + shift, hi + shift, part


def part_ranges(parts: np.ndarray, num_parts: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(parts, minlength=num_parts).astype(np.int64, copy=False)
    return np.cumsum(counts) - counts, counts


def permute_within_parts(starts: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Index of the pieces after each part's pieces are permuted, part by part."""
    return np.concatenate([s + rng.permutation(int(n)) for s, n in zip(starts.tolist(), counts.tolist())]
                          or [np.zeros(0, dtype=np.int64)]).astype(np.int64, copy=False)


def shuffled_pieces(units: np.ndarray, num_parts: int, seed: int, epoch: int):
    """py1s/py1e/py1br's common start: units shuffled by run, divided, permuted per part by epoch.
    Returns (piece begins, piece ends, part starts, part counts, the epoch generator)."""
    ends = np.cumsum(units)
    begins = ends - units
    run = np.random.default_rng(seed).permutation(len(units))
    lo, hi, part = divide(begins[run], ends[run], num_parts)
    starts, counts = part_ranges(part, num_parts)
    rng = np.random.default_rng(seed + epoch)
    order = permute_within_parts(starts, counts, rng)
    return lo[order], hi[order], starts, counts, rng
