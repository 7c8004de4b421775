"""What `foundry checkpoint ls/inspect` show: plain dicts from a save folder or a checkpoint URL.
No torch import: it reads manifests and pointers only (unless asked to verify checksums)."""

from __future__ import annotations

import datetime as _dt
import tempfile
from pathlib import Path
from typing import Any

from foundry.plugins.errors import CheckpointError
from foundry.plugins.manager import open_store
from foundry.plugins.storage import split_parent

from . import store_ops
from .format import MANIFEST


def list_folder(url: str) -> list[dict[str, Any]]:
    store = open_store(url)
    return [{"name": e.name, "epoch": e.epoch, "batch": e.batch, "complete": e.complete, "latest": e.latest,
             "size": e.size, "files": e.files, "url": store.child_url(e.name)}
            for e in store_ops.list_checkpoints(store)]


def _locate(url: str):
    """(store of the save folder, checkpoint name): a checkpoint URL, or a save folder's latest."""
    store = open_store(url)
    if store.exists(MANIFEST):
        parent, name = split_parent(url if "://" in url else store.url)
        return open_store(parent), name
    pointer = store_ops.read_latest(store)
    if pointer:
        return store, pointer["checkpoint"]
    complete = [e for e in store_ops.list_checkpoints(store) if e.complete]
    if not complete:
        raise CheckpointError(f"no checkpoint at {url}", hint="give a save folder or one checkpoint's folder")
    return store, complete[-1].name


def describe(url: str, verify: bool = False) -> dict[str, Any]:
    store, name = _locate(url)
    manifest = store_ops.read_manifest(store, name)
    pointer = store_ops.read_latest(store)
    out: dict[str, Any] = {
        "url": store.child_url(name),
        "name": manifest.name,
        "run_name": manifest.run_name,
        "latest": bool(pointer and pointer["checkpoint"] == name),
        "layout": manifest.layout,
        "world_size": manifest.world_size,
        "resumption_index": manifest.resumption_index,
        "created": _dt.datetime.fromtimestamp(manifest.created, _dt.timezone.utc).isoformat(timespec="seconds"),
        "timestamp": manifest.timestamp,
        "size": manifest.total_bytes,
        "files": [{"key": f.key, "size": f.size, "sha256": f.sha256} for f in manifest.files],
        "config": manifest.config,
    }
    if verify:
        with tempfile.TemporaryDirectory(prefix="foundry-inspect-") as tmp:
            store_ops.download_verified(store, name, Path(tmp))
        out["verified"] = True
    return out
