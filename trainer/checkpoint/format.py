"""What a checkpoint is in a store: names, the manifest, the `latest` pointer, checksums.

    SAVE_FOLDER/
      ep0-ba100/            one checkpoint: data files + manifest.json (written after the data)
        state.pt | __0_0.distcp .metadata ...   (full layout | sharded layout)
        extra.pt            timestamp, schedulers, grad scaler, RNG of every rank, dataloader state
        manifest.json       what is inside, and size + sha256 (+ md5) of every file
      latest                pointer object, written last: {"checkpoint": "ep0-ba100", "manifest_sha256": ...}

Pure data and hashing only; no torch, so `foundry checkpoint ls/inspect` stay fast.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from foundry.plugins.errors import CheckpointError, ConfigError
from foundry.plugins.storage import check_key

LATEST = "latest"
MANIFEST = "manifest.json"
FORMAT_VERSION = 1
LAYOUTS = ("full", "sharded")
_NAME = re.compile(r"^ep(\d+)-ba(\d+)$")


def checkpoint_name(epoch: int, batch: int) -> str:
    return f"ep{epoch}-ba{batch}"


def parse_name(name: str) -> tuple[int, int] | None:
    m = _NAME.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class FileEntry:
    key: str  # relative to the checkpoint folder
    size: int
    sha256: str
    md5: str


def digest_file(path: str | Path, key: str | None = None, md5: bool = True) -> FileEntry:
    """Size, sha256 and md5 of a file; md5=False (its md5 is ""): what checking a download needs,
    half the hashing (on a small machine, hashing is a good part of a restore)."""
    sha, md5_hash, size = hashlib.sha256(), hashlib.md5() if md5 else None, 0
    with open(path, "rb") as f:
        while chunk := f.read(4 << 20):
            sha.update(chunk)
            if md5_hash is not None:
                md5_hash.update(chunk)
            size += len(chunk)
    return FileEntry(key or Path(path).name, size, sha.hexdigest(), md5_hash.hexdigest() if md5_hash else "")


@dataclass
class Manifest:
    name: str
    run_name: str
    layout: str
    world_size: int
    timestamp: dict[str, Any]
    resumption_index: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    files: list[FileEntry] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    format_version: int = FORMAT_VERSION

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True, default=str).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "manifest") -> "Manifest":
        try:
            raw = json.loads(data)
            raw["files"] = [FileEntry(**f) for f in raw.get("files", [])]
            manifest = cls(**raw)
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointError(f"unreadable checkpoint manifest {where}: {exc}") from None
        for entry in manifest.files:  # names from a bucket: each is joined onto a local folder
            try:
                check_key(entry.key, where)
            except ConfigError:
                raise CheckpointError(f"checkpoint manifest {where} names the file {entry.key!r}, "
                                      "which escapes the checkpoint folder", hint="refusing to load it") from None
        return manifest

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def pointer_bytes(name: str, manifest_data: bytes) -> bytes:
    return json.dumps({"checkpoint": name, "manifest_sha256": hashlib.sha256(manifest_data).hexdigest(),
                       "published": time.time()}).encode()


def parse_pointer(data: bytes) -> dict[str, Any]:
    try:
        raw = json.loads(data)
        if not isinstance(raw.get("checkpoint"), str):
            raise ValueError("no checkpoint name")
        return raw
    except ValueError as exc:
        raise CheckpointError(f"unreadable `latest` pointer: {exc}") from None
