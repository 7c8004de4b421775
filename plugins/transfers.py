"""Bytes this process moved to and from object stores, counted at the storage layer (exact payload bytes
of every completed get/get_range/get_file/put/put_file) and the requests by billing class (`put_list`:
put/put_file/list; `get`: get/get_range/get_file/head/exists; one per call here: a multipart upload
the SDK splits counts once), kept as a structured record per process.

`open_store` wraps every store in `MeteredStore`, tagged with what the bytes are for: the module that
opened the store says it (the streaming loader reads data, the trainer's checkpoint code reads and
writes checkpoints, the dataset writer and converters upload), so no caller has to pass a label.

Inside a job (FOUNDRY_RUN_DIR set by the control plane) the counts go to
`$FOUNDRY_RUN_DIR/egress/r{RESUMPTION_INDEX}/{hostname}-{pid}.json`, rewritten atomically at most once a
second while bytes move and once more at exit: `foundry describe run` sums them per node and store
(app/control/egress.py). A forked child (a DataLoader worker) starts from zero and writes its own file.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from .atomic_files import atomic_write

PURPOSES = ("data", "checkpoint", "upload", "other")
# (module prefix of the caller of open_store, purpose); the first match wins
_PURPOSE_BY_MODULE = (
    ("foundry.trainer.checkpoint", "checkpoint"),
    ("foundry.streaming.writer", "upload"),
    ("foundry.streaming.convert", "upload"),
    ("foundry.streaming.tools", "upload"),
    ("foundry.streaming.upload", "upload"),
    ("foundry.streaming", "data"),
)
FLUSH_EVERY_S = 1.0


def purpose_of(module: str) -> str:
    for prefix, purpose in _PURPOSE_BY_MODULE:
        if module == prefix or module.startswith(prefix + "."):
            return purpose
    return "other"


class TransferMeter:
    """Counts per (store root, purpose, direction) for this process; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.counts: dict[str, dict[str, dict[str, int]]] = {}
        self._last_flush = 0.0
        self._dirty = False

    def add(self, store: str, purpose: str, direction: str, nbytes: int) -> None:
        if nbytes <= 0:
            return
        with self._lock:
            per = self.counts.setdefault(store, {}).setdefault(purpose, {"read": 0, "written": 0})
            per[direction] += int(nbytes)
            self._dirty = True
            due = time.monotonic() - self._last_flush >= FLUSH_EVERY_S
        if due:
            self.flush()

    def request(self, store: str, purpose: str, kind: str) -> None:
        """One request of a billing class (`put_list`: PUT/POST/LIST, S3's and R2's dearer class;
        `get`: GET/HEAD) in the same record as the bytes."""
        with self._lock:
            per = self.counts.setdefault(store, {}).setdefault(purpose, {"read": 0, "written": 0})
            per[kind] = per.get(kind, 0) + 1
            self._dirty = True
            due = time.monotonic() - self._last_flush >= FLUSH_EVERY_S
        if due:
            self.flush()

    def snapshot(self) -> dict[str, dict[str, dict[str, int]]]:
        with self._lock:
            return json.loads(json.dumps(self.counts))

    def record_path(self, environ=os.environ) -> Path | None:
        run_dir = environ.get("FOUNDRY_RUN_DIR")
        if not run_dir:
            return None
        resumption = environ.get("RESUMPTION_INDEX", "0")
        return Path(run_dir) / "egress" / f"r{resumption}" / f"{socket.gethostname()}-{os.getpid()}.json"

    def flush(self) -> None:
        """Write this process's record (only inside a job, only when something changed)."""
        path = self.record_path()
        with self._lock:
            if path is None or not self._dirty:
                return
            self._dirty, self._last_flush = False, time.monotonic()
            record: dict[str, Any] = {
                "resumption": int(os.environ.get("RESUMPTION_INDEX", "0") or 0),
                "node": socket.gethostname(), "pid": os.getpid(),
                "rank": int(os.environ["RANK"]) if os.environ.get("RANK", "").isdigit() else None,
                "stores": json.loads(json.dumps(self.counts)),
            }
        try:
            atomic_write(path, json.dumps(record, sort_keys=True))
        except OSError:
            pass  # accounting never breaks a transfer or a job


METER = TransferMeter()
atexit.register(METER.flush)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=METER.reset)


def store_root(url: str) -> str:
    """`s3://bucket/some/prefix` -> `s3://bucket` (the unit a price applies to); file stores -> `file://`."""
    scheme, _, rest = url.partition("://")
    if not rest:
        return "file://"
    return f"{scheme}://{rest.split('/', 1)[0]}" if scheme != "file" else "file://"


class MeteredStore:
    """An ObjectStore that counts the bytes of every completed transfer in METER and delegates the rest."""

    def __init__(self, inner: Any, purpose: str, meter: TransferMeter = METER):
        self._inner, self._purpose, self._meter = inner, purpose, meter
        self._root = store_root(getattr(inner, "url", ""))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property  # type: ignore[misc]
    def __class__(self):  # isinstance(store, TheBackend) stays true through the wrapper (as mock does)
        return type(self._inner)

    @property
    def url(self) -> str:
        return self._inner.url

    @property
    def unwrapped(self) -> Any:
        return self._inner

    def _count(self, direction: str, nbytes: int) -> None:
        self._meter.request(self._root, self._purpose, "get" if direction == "read" else "put_list")
        self._meter.add(self._root, self._purpose, direction, nbytes)

    @classmethod
    def from_url(cls, url: str, options: dict[str, Any] | None = None):  # pragma: no cover - open_store builds
        raise TypeError("build stores with foundry.plugins.manager.open_store")

    def get(self, key: str) -> bytes:
        data = self._inner.get(key)
        self._count("read", len(data))
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        data = self._inner.get_range(key, start, end)
        self._count("read", len(data))
        return data

    def get_file(self, key: str, path, progress=None) -> None:
        self._inner.get_file(key, path, progress)
        self._count("read", os.path.getsize(path))

    def put(self, key: str, data: bytes) -> None:
        self._inner.put(key, data)
        self._count("written", len(data))

    def put_file(self, key: str, path, progress=None) -> None:
        size = os.path.getsize(path)
        self._inner.put_file(key, path, progress)
        self._count("written", size)

    def list(self, prefix: str = ""):
        self._meter.request(self._root, self._purpose, "put_list")
        return self._inner.list(prefix)

    def delete(self, key: str) -> None:
        self._inner.delete(key)

    def head(self, key: str):
        self._meter.request(self._root, self._purpose, "get")
        return self._inner.head(key)

    def exists(self, key: str) -> bool:
        self._meter.request(self._root, self._purpose, "get")
        return self._inner.exists(key)

    def child_url(self, key: str) -> str:
        return self._inner.child_url(key)
