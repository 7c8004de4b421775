"""Python's garbage collector kept off the objects that forked DataLoader workers share with the
main process, while an epoch's iteration runs.

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
import threading

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


def release() -> None:
    global _holders, _ours
    with _lock:
        _holders -= 1
        if _holders == 0 and _ours:
            gc.unfreeze()
            _ours = False
