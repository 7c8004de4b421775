"""A run's checkpoints, as the control plane sees them: where the trainer said it saves them, and
deleting them when the user asks (`foundry delete run NAME --delete-checkpoints`).

The location is a fact the trainer records in the run folder (config.json, `save_folder_resolved`),
never guessed from the spec. Checkpoints are the user's: deleting a run keeps them unless asked, and
a new run under the same name then resumes from them (the trainer says so in one line).
"""

from __future__ import annotations

import json
from pathlib import Path

from foundry.plugins.errors import FoundryError, StorageError
from foundry.plugins.manager import open_store


def checkpoint_url(run_dir: Path) -> str | None:
    """The checkpoint folder the run's trainer wrote to, or None (no trainer ran, or no save_folder)."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    url = (config.get("trainer") or {}).get("save_folder_resolved")
    return url if isinstance(url, str) and url else None


def delete_checkpoints(url: str) -> int:
    """Delete every object under the checkpoint folder `url`, the `latest` pointer first (so a reader
    never follows it into a half-deleted checkpoint). Returns how many objects were deleted."""
    from foundry.trainer.checkpoint.format import LATEST  # torch-free; imported when used

    try:
        store = open_store(url)
        keys = [info.key for info in store.list("")]
        keys.sort(key=lambda k: k != LATEST)  # the pointer first
        for key in keys:
            store.delete(key)
    except FoundryError:
        raise
    except Exception as exc:  # a vendor error: say where, keep the message short
        raise StorageError(f"could not delete the checkpoints at {url}: {exc}") from exc
    return len(keys)
