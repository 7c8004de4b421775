"""The instance ledger of every cloud-VM provider: one JSON file per launch in the cluster's state
folder, written *before* the instances are asked for (intent first), so no process death can leave
an instance that nothing records. The instances carry the same token as a tag or label (and as the
create request's idempotency token where the API has one: ClientToken, opc-retry-token), so whoever
reads a record finds them by tag even when the record has no instance ids yet.

States: "intent" (about to ask) -> "requested" (ids known) -> "terminated" (asked to end, by
whoever saw the resumption end or found the launch interrupted).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.atomic_files import atomic_write, is_temp_name


class Ledger:
    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, token: str) -> Path:
        return self.folder / f"{token}.json"

    def get(self, token: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(token).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def write(self, token: str, **fields: Any) -> dict[str, Any]:
        record = {**(self.get(token) or {"token": token, "created_at": time.time()}), **fields}
        self.folder.mkdir(parents=True, exist_ok=True)
        # fsync: the record must be on disk before the request that it announces leaves this machine
        atomic_write(self._path(token), json.dumps(record, sort_keys=True), mode=0o600, fsync=True)
        return record

    def records(self) -> Iterator[dict[str, Any]]:
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.json")):
            if is_temp_name(path.name):
                continue
            try:
                yield json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
