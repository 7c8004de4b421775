"""How many samples each stream contributes to an epoch, and which ones. Pure numpy, no I/O.

A stream of `n` samples asked for `choose` samples per epoch gives every sample `choose // n`
times plus `choose % n` distinct samples drawn without replacement. With sampling_method
"balanced" the draw changes every epoch; with "fixed" it is the same in every epoch.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from foundry.plugins.errors import ConfigError

SAMPLING_METHODS = ("balanced", "fixed")


def rng_for(seed: int, *keys: int) -> np.random.Generator:
    """A generator that depends only on the seed and the integer keys given."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, *(int(k) & 0xFFFFFFFF for k in keys)])


def choose_counts(
    sizes: Sequence[int],
    proportion: Sequence[float | None],
    repeat: Sequence[float | None],
    choose: Sequence[int | None],
    epoch_size: int | None,
) -> np.ndarray:
    """Samples per epoch for each stream (mosaicml-streaming's rules).

    Either every stream has a `proportion` (relative weights of `epoch_size`, which defaults to
    the total number of samples) or none has; otherwise each stream takes `choose` samples, or
    `repeat` times its size (default 1). With no proportions, `epoch_size` rescales the counts.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    has_prop = [p is not None for p in proportion]
    if any(has_prop) and not all(has_prop):
        raise ConfigError("either every stream sets proportion or none does",
                          hint="use repeat= or choose= on the others, or give all of them a proportion")
    if epoch_size is not None and int(epoch_size) <= 0:
        raise ConfigError(f"epoch_size must be positive, got {epoch_size}")
    if all(has_prop) and len(sizes):
        weights = np.asarray(proportion, dtype=np.float64)
        if (weights < 0).any() or weights.sum() <= 0:
            raise ConfigError("stream proportions must be non-negative with a positive sum")
        target = int(epoch_size) if epoch_size is not None else total
        return _apportion(weights / weights.sum(), target)
    counts = []
    for n, r, c in zip(sizes, repeat, choose):
        if r is not None and c is not None:
            raise ConfigError("a stream sets both repeat and choose", hint="keep one of them")
        if c is not None:
            if c < 0:
                raise ConfigError(f"choose must be >= 0, got {c}")
            counts.append(int(c))
        else:
            r = 1.0 if r is None else float(r)
            if r < 0:
                raise ConfigError(f"repeat must be >= 0, got {r}")
            counts.append(int(round(r * int(n))))
    counts = np.asarray(counts, dtype=np.int64)
    if epoch_size is not None and counts.sum() > 0:
        return _apportion(counts / counts.sum(), int(epoch_size))
    return counts


def _apportion(fractions: np.ndarray, total: int) -> np.ndarray:
    """Integers proportional to `fractions` summing exactly to `total` (largest remainders)."""
    raw = fractions * total
    base = np.floor(raw).astype(np.int64)
    short = total - int(base.sum())
    if short > 0:
        order = np.argsort(-(raw - base), kind="stable")
        base[order[:short]] += 1
    return base


def sample_stream(n: int, choose: int, seed: int, epoch: int, stream: int, method: str = "balanced") -> np.ndarray:
    """The sorted sample ids (0..n-1, with repeats) a stream contributes to one epoch."""
    if method not in SAMPLING_METHODS:
        raise ConfigError(f"unknown sampling_method {method!r}", hint=f"use one of {', '.join(SAMPLING_METHODS)}")
    if n <= 0 or choose <= 0:
        return np.zeros(0, dtype=np.int64)
    whole, part = divmod(int(choose), int(n))
    ids = np.tile(np.arange(n, dtype=np.int64), whole) if whole else np.zeros(0, dtype=np.int64)
    if part:
        rng = rng_for(seed, 0x5A3B, stream, epoch if method == "balanced" else 0)
        extra = rng.choice(n, size=part, replace=False).astype(np.int64)
        ids = np.concatenate([ids, extra])
    ids.sort(kind="stable")
    return ids
