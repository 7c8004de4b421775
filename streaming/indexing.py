"""Indexing a dataset as mosaicml-streaming's `Array` does: `ds[3]`, `ds[-1]`, `ds[2:10:2]`,
`ds[[1, 5]]`, `ds[np.array([[0, 1], [2, 3]])]` (nested lists of samples, in the index's shape).
Each sample's arrays are its own (`own_arrays`)."""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from foundry.plugins.errors import ConfigValueError


def index_samples(at: Any, size: int, one: Callable[[int], Any], again: Callable[[Any], Any]) -> Any:
    """`one(i)` for an integer `at` (negative counts from the end), else a list of `again(sub)` for
    each index a slice, list or numpy array names (`again` is the dataset's own `__getitem__`, so a
    subclass's transform applies to each sample, as in mosaic)."""
    if isinstance(at, slice):
        return [again(i) for i in range(*at.indices(size))]
    if isinstance(at, (list, np.ndarray)):
        return [again(sub) for sub in at]
    try:
        i = operator.index(at)  # int, numpy integer, 0-d integer tensor
    except TypeError:
        raise ConfigValueError(f"cannot index a dataset with {type(at).__name__}",
                               hint="use an int, a slice, a list of ints or an integer numpy array") from None
    return one(i + size if -size <= i < 0 else i)


def own_arrays(sample: Any) -> Any:
    """The sample with each numpy array that views its shard's map replaced by a copy: what one
    sample looked up by index gives is the caller's to change in place."""
    if isinstance(sample, dict):
        for key, value in sample.items():
            if isinstance(value, np.ndarray) and not value.flags.owndata:
                sample[key] = value.copy()
    return sample
