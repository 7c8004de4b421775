"""Python's garbage collector kept off the objects alive before an epoch's iteration, while it runs:
in the main process of a DataLoader with forked workers, and in every process that iterates a
dataset (the plain loop, each worker).

In any process: a full collection walks every object alive, and in a process that imported torch
and built a model that is hundreds of thousands of them. One that fell inside a 20,000-sample
epoch of local zstd tokens took ~45 ms of its ~90 ms (the same epoch without it: ~45 ms), and
whether it falls there depends on nothing but how many objects the program made before (the
order of two imports moved it in or out: that epoch ran at ~200k or ~440k samples/s for it).
Frozen, the objects from before the epoch are left out of every collection until it ends.

After a fork, the main process and its workers share every memory page copy-on-write. A full
collection in either walks every object and writes to its header, so it copies nearly every page
it touches: the first batch of a fresh process waited ~150 ms for one (a collection that an import
in torch's `__next__` set off right after the fork; bench/streaming/README.md), and each copied
page is memory twice. `gc.freeze()` just before the fork takes the objects alive then out of
collections (the forked workers inherit that). The freeze ends when the last epoch iterating
with forked workers ends (its iterator is finished or dropped: a young object, so even one caught
in a reference cycle is collected and ends it), and cyclic garbage from before is collected then.

Only the first of overlapping holds freezes, so the frozen set is what was alive when the first
one started. A process that froze objects itself (gc.get_freeze_count() > 0 then) is left as it is.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import Callable

_lock = threading.Lock()
_holders = 0    # epochs with forked workers running
_ours = False   # the freeze in place is ours to undo


def hold() -> None:
    """Before forking workers for an epoch (or iterating persistent ones); `release()` once after."""
    global _holders, _ours
    with _lock:
        if _holders == 0:
            _ours = gc.get_freeze_count() == 0
            if _ours:
                gc.freeze()
        _holders += 1


def release(_finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
    global _holders, _ours
    if _finalizing():  # an iterator left unfinished at exit: this module may be torn down already
        return
    with _lock:
        _holders -= 1
        if _holders == 0 and _ours:
            gc.unfreeze()
            _ours = False
