"""What the bucket stores (s3, gs, oci) share: prefix-relative list keys, small-file puts, and
parallel ranged downloads into an atomic temporary file."""

from __future__ import annotations

import os
from pathlib import Path

from foundry.plugins.part_digests import current_digests
from foundry.plugins.storage import (
    BaseObjectStore, Listing, ObjectInfo, ProgressCallback, check_key, folder_prefix, join_key,
)

from .request_gate import RequestGate
from .transfer import TransferConfig, parallel_download


class TruncatedRead(Exception):
    """A response body ended before its announced length: retried like any transient failure."""


class RemoteStore(BaseObjectStore):
    prefix: str
    transfer: TransferConfig
    download_gate: RequestGate  # set in __init__: at most `transfer.concurrency` downloads in flight

    def _list_prefix(self, prefix: str) -> tuple[str, int]:
        """The bucket-level prefix to list for `prefix`, and how many leading characters of each
        returned name to strip to get a store-relative key."""
        full = (join_key(self.prefix, check_key(prefix, self.url)) if prefix
                else (self.prefix + "/" if self.prefix else ""))
        if prefix.endswith("/") and not full.endswith("/"):
            full += "/"
        return full, len(self.prefix) + 1 if self.prefix else 0

    def _put_small_file(self, key: str, path: str | os.PathLike, size: int,
                        progress: ProgressCallback | None) -> bool:
        """Upload a file at or under the multipart threshold in one request; False if it is larger."""
        if size > self.transfer.threshold:
            return False
        data = Path(path).read_bytes()
        digests = current_digests()
        if digests is not None:  # one part: its md5 is the object's plain ETag
            digests.begin()
            digests.feed(0, data)
        self.put(key, data)
        if progress:
            progress(len(data))
        return True

    def _range_exact(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        """Exactly bytes [start, end) of the object, retried; a short read is a transient error.
        With `etag`, a store that can make the read conditional does, so a part never mixes two
        versions of an object."""
        raise NotImplementedError

    def list_dir(self, prefix: str = "") -> Listing:
        folder = folder_prefix(prefix)
        full, strip = self._list_prefix(folder)
        prefixes, objects = self._list_level(full)
        return Listing(sorted(p[strip:] for p in prefixes),
                       sorted((ObjectInfo(o.key[strip:], o.size, o.etag, o.modified) for o in objects),
                              key=lambda o: o.key))

    def _list_level(self, full_prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        """The bucket's native delimiter listing of `full_prefix`: (sub-prefixes, objects), both with
        bucket-level names; the caller makes them store-relative."""
        raise NotImplementedError

    def get(self, key: str) -> bytes:
        with self.download_gate.turn() as ticket, self.download_gate.slot(ticket):
            return self._get_whole(key)

    def _get_whole(self, key: str) -> bytes:
        """The whole object in one request, retried (`get` holds a slot of the download gate)."""
        raise NotImplementedError

    def get_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        # through the gate, in line in the order files are asked for (request_gate.py)
        with self.download_gate.turn() as ticket:
            info = self.head(key)
            parallel_download(path, info.size, lambda s, e: self._range_exact(key, s, e, info.etag),
                              self.transfer, progress, gate=self.download_gate, ticket=ticket)
