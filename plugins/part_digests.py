"""Hashing what a transfer moves, as it moves it: a checkpoint's sha256 (and the parts' md5s a
multipart ETag is made of) from the transfer's own pass over the bytes, not a second read of the
file before or after (on a small machine, those reads were a good part of a save and a restore).

The caller opens `digesting()` around `put_file`/`get_file`; the stores' parallel transfers
(backends/storage/transfer.py) feed it. A store that moves the file another way feeds nothing, and
the caller sees that in `size` and hashes the file itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import threading
from typing import Iterator


class PartDigests:
    """The sha256 of the bytes a transfer moves and the md5 of each part, computed from the parts as
    they pass (the transfer's own read of the file, or the downloaded bytes): no second read.

    Parts arrive on worker threads in any order; each waits for the previous part to be hashed (a
    worker holds one part, so memory stays `concurrency * part_size`). `size` counts the bytes
    hashed: a caller compares it with the file's size, since a store that moves the file another
    way (a single request, a local copy) feeds nothing.
    """

    def __init__(self, part_md5: bool) -> None:
        self._part_md5 = part_md5
        self._cond = threading.Condition()
        self.begin()

    def begin(self) -> None:
        """(Re)start: each transfer of the file starts the hashes over."""
        with self._cond:
            self._sha, self.size, self.part_md5s, self._failed = hashlib.sha256(), 0, [], False
            self._cond.notify_all()

    def feed(self, offset: int, data: bytes | memoryview) -> None:
        with self._cond:
            while self.size != offset and not self._failed:
                self._cond.wait()
            if self._failed:
                raise RuntimeError("an earlier part of this transfer failed")
        # only this part's worker can be here now: the next one waits for `size` to move
        self._sha.update(data)
        if self._part_md5:
            self.part_md5s.append(hashlib.md5(data).digest())
        with self._cond:
            self.size += len(data)
            self._cond.notify_all()

    def fail(self) -> None:
        """A part failed: wake the parts waiting for their turn (the transfer is abandoned)."""
        with self._cond:
            self._failed = True
            self._cond.notify_all()

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()

    def multipart_etag(self) -> str:
        """S3's ETag for these parts: the md5 of a single part, or md5 of the parts' md5s + "-N"."""
        if len(self.part_md5s) == 1:
            return self.part_md5s[0].hex()
        return f"{hashlib.md5(b''.join(self.part_md5s)).hexdigest()}-{len(self.part_md5s)}"


_current: contextvars.ContextVar[PartDigests | None] = contextvars.ContextVar("foundry_part_digests", default=None)


@contextlib.contextmanager
def digesting(part_md5: bool = False) -> Iterator[PartDigests]:
    """Hash what the parallel transfers started in this context move (PartDigests). A context
    variable, not a parameter: it reaches the transfer through any store wrapper unchanged."""
    digests = PartDigests(part_md5)
    token = _current.set(digests)
    try:
        yield digests
    finally:
        _current.reset(token)


def current_digests() -> PartDigests | None:
    """The PartDigests of the enclosing `digesting()`, if any (read on the thread that starts the transfer)."""
    return _current.get()
