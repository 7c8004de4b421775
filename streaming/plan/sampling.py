"""How many samples each stream and shard contributes to an epoch, and which ones. Pure numpy.

These follow mosaicml-streaming 0.13 exactly, random draws included, so a mixed dataset yields the
same samples as with mosaic:

- `stream_choose`: samples per epoch for each stream. Either every stream has a `proportion`
  (relative weights of `epoch_size`, default the total) or none has. Integer parts are truncated
  and the shortfall goes to distinct streams drawn with `default_rng(seed)`. With no weights at
  all, `epoch_size` weights streams by their size. `repeat` keeps `int(repeat * size)`;
  `epoch_size` together with `repeat`/`choose` is refused, as mosaic refuses it.
- `shard_choose`: a stream's count spread over its shards: whole repeats of every shard, then the
  remainder taken in picks of `granularity` samples from shards drawn in a seeded random order.
- `resample`: the epoch's "big ids" (positions 0..epoch_size-1) and the sample each one reads.
  A shard chosen c times of its n samples gives shuffle units [n]*(c//n) + [c%n]: full copies, then
  c%n distinct samples drawn without replacement (sorted). The shuffle then permutes big ids.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from foundry.plugins.errors import ConfigError

SAMPLING_METHODS = ("balanced", "fixed")


def _spread_shortfall(sizes: np.ndarray, target: int, weights: np.ndarray, seed: int) -> np.ndarray:
    counts = (target * (weights / weights.sum())).astype(np.int64, copy=False)
    short = int(target - counts.sum())
    counts[np.random.default_rng(seed).choice(len(sizes), short, False)] += 1
    return counts


def stream_choose(
    sizes: Sequence[int],
    proportion: Sequence[float | None],
    repeat: Sequence[float | None],
    choose: Sequence[int | None],
    epoch_size: int | None,
    seed: int,
) -> np.ndarray:
    """Samples per epoch for each stream (mosaicml-streaming's `Stream.apply_weights`)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    has_prop = [p is not None for p in proportion]
    if any(has_prop) and not all(has_prop):
        raise ConfigError("either every stream sets proportion or none does",
                          hint="use repeat= or choose= on the others, or give all of them a proportion")
    if epoch_size is not None and int(epoch_size) < 0:
        raise ConfigError(f"epoch_size must be non-negative, got {epoch_size}")
    for r, c in zip(repeat, choose):
        if r is not None and c is not None:
            raise ConfigError("a stream sets both repeat and choose", hint="keep one of them")
        if (r is not None and r < 0) or (c is not None and c < 0):
            raise ConfigError("repeat and choose must be >= 0")
    target = int(epoch_size) if epoch_size else None  # mosaic treats 0 as unset
    if all(has_prop) and len(sizes):
        weights = np.asarray(proportion, dtype=np.float64)
        if (weights < 0).any() or weights.sum() <= 0:
            raise ConfigError("stream proportions must be non-negative with a positive sum")
        return _spread_shortfall(sizes, target if target is not None else int(sizes.sum()), weights, seed)
    unweighted = all(r is None and c is None for r, c in zip(repeat, choose))
    if target is not None:
        if not unweighted:
            raise ConfigError("epoch_size cannot be combined with stream repeat= or choose=",
                              hint="give every stream a proportion instead (mosaicml-streaming refuses this too)")
        return _spread_shortfall(sizes, target, sizes.astype(np.float64), seed)
    counts = [int(c) if c is not None else int(float(r) * int(n)) if r is not None else int(n)
              for n, r, c in zip(sizes, repeat, choose)]
    return np.asarray(counts, dtype=np.int64)


def stream_proportions(sizes: Sequence[int], proportion: Sequence[float | None], choose: Sequence[int],
                       epoch_size: object) -> np.ndarray:
    """Each stream's share as mosaic's `Stream.apply_weights` leaves `stream.proportion` (the
    stream-aware batching methods use it): the normalised weights when every stream has one, the
    stream sizes' shares with only `epoch_size`, else each stream's share of the epoch (`choose`
    as `stream_choose` returned it). Only whether `epoch_size` is set matters: without weights
    and without it, `choose` is the sizes anyway."""
    if len(proportion) and all(p is not None for p in proportion):
        weights = np.asarray(proportion, dtype=np.float64)
    elif epoch_size:
        weights = np.asarray(sizes, dtype=np.float64)
    else:
        weights = np.asarray(choose, dtype=np.int64)
    total = weights.sum()
    return weights / total if total else np.zeros(len(weights), dtype=np.float64)


def shard_choose(shard_sizes: np.ndarray, choose: int, granularity: int, seed: int, epoch: int,
                 use_epoch: bool) -> np.ndarray:
    """How many samples each shard of one stream gives this epoch (mosaic's `get_sampling`)."""
    sizes = np.asarray(shard_sizes, dtype=np.int64)
    total = int(sizes.sum())
    if granularity <= 0:
        raise ConfigError(f"sampling_granularity must be positive, got {granularity}")
    if total == 0 or choose % total == 0:
        return sizes * (choose // total) if total else np.zeros_like(sizes)
    picks_per_shard = (sizes + granularity - 1) // granularity
    pick_shard = np.repeat(np.arange(len(sizes)), picks_per_shard)
    pick_size = np.full(len(pick_shard), granularity, dtype=np.int64)
    pick_size[np.cumsum(picks_per_shard) - 1] = sizes - (picks_per_shard - 1) * granularity
    order = np.random.default_rng(seed + epoch if use_epoch else seed).permutation(len(pick_shard))
    want = choose % total
    taken = np.cumsum(pick_size[order])
    last = int(np.searchsorted(taken, want, side="left"))  # the pick that reaches `want`
    amount = pick_size[order[: last + 1]].copy()
    amount[-1] -= int(taken[last]) - want
    out = sizes * (choose // total)
    np.add.at(out, pick_shard[order[: last + 1]], amount)
    return out


def resample(shard_sizes: np.ndarray, stream_shards: Sequence[tuple[int, int]], choose: Sequence[int],
             granularity: int, seed: int, epoch: int, method: str, shuffle: bool) -> tuple[np.ndarray, np.ndarray]:
    """(shuffle unit sizes, sample id of every big id) for one epoch (mosaic's `resample_streams`)."""
    if method not in SAMPLING_METHODS:
        raise ConfigError(f"unknown sampling_method {method!r}", hint=f"use one of {', '.join(SAMPLING_METHODS)}")
    sizes = np.asarray(shard_sizes, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(sizes) else sizes
    per_shard = np.zeros(len(sizes), dtype=np.int64)
    for (first, end), c in zip(stream_shards, choose):
        per_shard[first:end] = shard_choose(sizes[first:end], int(c), granularity, seed, epoch,
                                            shuffle and method == "balanced")
    if np.array_equal(per_shard, sizes):  # every sample once: positions are the sample ids
        return sizes.copy(), np.arange(int(sizes.sum()), dtype=np.int64)
    full = np.where(sizes > 0, per_shard // np.maximum(sizes, 1), 0)
    part = per_shard - full * sizes
    # units: per shard, `full` units of its size then one of `part` (when non-zero)
    unit_count = full + (part > 0)
    units = np.repeat(sizes, unit_count)
    has_part = np.flatnonzero(part > 0)
    units[np.cumsum(unit_count)[has_part] - 1] = part[has_part]
    # ids: each shard's block is its full copies (consecutive ids), then its partial draw
    block_start = np.cumsum(per_shard) - per_shard
    ids = np.empty(int(per_shard.sum()), dtype=np.int64)
    copy_sizes = np.repeat(sizes, full)
    copy_starts = np.repeat(block_start, full) + (np.arange(len(copy_sizes)) - np.repeat(np.cumsum(full) - full, full)) * copy_sizes
    where = np.repeat(copy_starts, copy_sizes) + _ramp(copy_sizes)
    ids[where] = np.repeat(np.repeat(offsets, full), copy_sizes) + _ramp(copy_sizes)
    rng = np.random.default_rng(seed + epoch if method == "balanced" else seed)
    for s in has_part.tolist():  # one draw per shard, in shard order, as mosaic draws them
        at = int(block_start[s] + full[s] * sizes[s])
        ids[at:at + int(part[s])] = np.sort(rng.choice(int(sizes[s]), int(part[s]), False)) + offsets[s]
    return units.astype(np.int64), ids


def _ramp(lengths: np.ndarray) -> np.ndarray:
    """0..n-1 for every n in `lengths`, concatenated."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
