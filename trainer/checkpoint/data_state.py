"""The train data's position in a checkpoint, for every ordinary way of feeding data.

Which object's state is saved (first match):
1. a dataset (the loader's, or the loader itself) with mosaic's `state_dict(num_samples,
   from_beginning)`: a StreamingDataset under torch's DataLoader, under StreamingDataLoader, or a
   subclass. It cannot know how many samples training consumed (workers prefetch, a DataLoader
   drops or buffers), so the trainer says so from its own timestamp, as Composer does: the global
   samples trained in the current epoch. At an epoch's end the data continues at the next epoch's
   first sample, whatever the finished epoch's length (drop_last included).
2. a loader, or its dataset, with its own `state_dict()` / `load_state_dict()`.
3. none (a list, a map-style dataset behind a sampler): the resumed epoch is fast-forwarded,
   with the RNG replayed so that a sampler draws the same permutation.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..time import Timestamp

SAMPLES = "samples"  # mosaic's contract: the caller passes the samples consumed
OWN = "own"          # state_dict() with no arguments


def _has_state(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def _takes_sample_count(obj: Any) -> bool:
    try:
        params = inspect.signature(obj.state_dict).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return "num_samples" in params


def stateful_data(loader: Any) -> tuple[Any, str] | None:
    """(the object whose state a checkpoint holds, SAMPLES or OWN), or None."""
    dataset = getattr(loader, "dataset", None)
    for candidate in (dataset, loader):
        if candidate is not None and _has_state(candidate) and _takes_sample_count(candidate):
            return candidate, SAMPLES
    for candidate in (loader, dataset):
        if candidate is not None and _has_state(candidate):
            return candidate, OWN
    return None


def align_batch_size(loader: Any) -> int | None:
    """Tell a StreamingDataset its loader's batch size when it was not given one (Composer's seeds:
    `DataLoader(StreamingDataset(...), batch_size=16)`); returns the size set, or None.

    Untold, the dataset deals its samples to the DataLoader's workers one at a time, so the k
    batches trained are not the epoch's first k x batch samples and no sample count resumes it
    (nor on another world size: the saved global batch would be the world size). Told, every batch
    comes whole from one worker in the epoch's order - what mosaic asks users to do by hand."""
    found = stateful_data(loader)
    size = getattr(loader, "batch_size", None)
    if found is None or found[1] != SAMPLES or found[0] is loader or type(size) is not int:
        return None
    dataset = found[0]
    if not hasattr(dataset, "batch_size") or dataset.batch_size is not None:
        return None
    try:
        dataset.batch_size = size
    except AttributeError:  # a read-only property: leave it
        return None
    return size


def save_data_state(loader: Any, timestamp: Timestamp, read_epoch: int | None = None) -> Any:
    """This rank's data state for a checkpoint taken at `timestamp` (None: nothing to save);
    `read_epoch`: the trainer epoch in which the loader was last iterated."""
    found = stateful_data(loader)
    if found is None:
        return None
    obj, kind = found
    if kind == OWN:
        return obj.state_dict()
    if timestamp.batch_in_epoch > 0:
        return obj.state_dict(int(timestamp.sample_in_epoch), True)
    state = obj.state_dict(0, True)
    if timestamp.batch > 0 and read_epoch == timestamp.epoch - 1 and _is_position(state):
        # taken after an epoch ended: the dataset still names the finished epoch (its last
        # iteration), and samples dropped at its end (drop_last) were never trained on. Not when
        # that epoch ended without an iteration (EPOCH_USED_UP): the dataset names the next already.
        state = {**state, "epoch": int(state["epoch"]) + 1, "sample_in_epoch": 0}
    return state


def _is_position(state: Any) -> bool:
    """mosaic's state format: {'epoch': int, 'sample_in_epoch': int, ...}."""
    return isinstance(state, dict) and isinstance(state.get("epoch"), int) and "sample_in_epoch" in state


NONE, CONTINUES, EPOCH_USED_UP = "none", "continues", "epoch_used_up"


def load_data_state(loader: Any, state: Any, timestamp: Timestamp) -> str:
    """Put a saved data state back. NONE: nothing restored (the trainer fast-forwards); CONTINUES:
    the data goes on where it stopped by itself; EPOCH_USED_UP: stopped after the epoch's last
    batch but before its end - a StreamingDataset then names the next epoch's start, so the
    trainer ends this epoch without reading another batch of it."""
    found = stateful_data(loader)
    if found is None or state is None:
        return NONE
    found[0].load_state_dict(state)
    if found[1] == SAMPLES and timestamp.batch_in_epoch > 0 and _is_position(state) \
            and int(state["sample_in_epoch"]) == 0:  # a count past the end was saved as the next epoch
        return EPOCH_USED_UP
    return CONTINUES
