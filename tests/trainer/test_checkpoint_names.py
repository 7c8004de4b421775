"""A checkpoint manifest is data from a bucket: a file name in it that is absolute or climbs out
with `..` is refused before anything is downloaded (issue 15.1)."""

from __future__ import annotations

import hashlib
import json

import pytest

from foundry.plugins.errors import CheckpointError
from foundry.plugins.manager import open_store
from foundry.trainer.checkpoint import store_ops
from foundry.trainer.checkpoint.format import MANIFEST


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_a_manifest_naming_a_file_outside_is_refused(tmp_path, kind):
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"do not touch")
    store = open_store(str(tmp_path / "save"))
    name = "ep0-ba1"
    key = str(victim) if kind == "absolute" else "../../victim.bin"
    # the object a bucket that keeps "//" literally would serve for f"{name}/{key}"
    store.put(f"{name}/{str(victim).lstrip('/')}", b"evil")
    manifest = {"name": name, "run_name": "r", "layout": "full", "world_size": 1, "timestamp": {},
                "files": [{"key": key, "size": 4, "sha256": hashlib.sha256(b"evil").hexdigest(),
                           "md5": hashlib.md5(b"evil").hexdigest()}]}
    store.put(f"{name}/{MANIFEST}", json.dumps(manifest).encode())
    with pytest.raises(CheckpointError, match="escapes the checkpoint folder"):
        store_ops.download_verified(store, name, tmp_path / "dest" / name)
    assert victim.read_bytes() == b"do not touch"
