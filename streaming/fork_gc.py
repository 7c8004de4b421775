"""Python's garbage collector kept off the objects that forked DataLoader workers share with the
main process, while the workers run.

After a fork, the main process and its workers share every memory page copy-on-write. A full
collection in either walks every object and writes to its header, so it copies nearly every page
it touches: the first batch of a fresh process waited ~150 ms for one (a collection that an import
in torch's `__next__` set off right after the fork; bench/streaming/README.md), and each copied
page is memory twice. `gc.freeze()` just before the fork takes the objects alive then out of
collections (the forked workers inherit that), and the last loader whose workers stop unfreezes
them, so cyclic garbage that existed at the fork is collected then, not never.

A process that froze objects itself (gc.get_freeze_count() > 0 before any loader did) is left as
it is.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders = 0  # loaders with forked workers running, while we hold the freeze


def hold() -> bool:
    """Freeze before forking workers; True when the caller must `release()` once they are gone."""
    global _holders
    with _lock:
        if _holders == 0 and gc.get_freeze_count():
            return False  # frozen by the program itself: not ours to thaw
        gc.freeze()  # again for a later loader: objects made since are shared with its workers too
        _holders += 1
        return True


def release() -> None:
    global _holders
    with _lock:
        _holders -= 1
        if _holders == 0:
            gc.unfreeze()
