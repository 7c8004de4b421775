"""The DataLoader side: StreamingDataLoader (dataloader.py: counting and state), the default collate
(collate.py), whole batches made in workers (worker_batches.py), the ring and hand-over that carry
them to the main process (ring.py, handover.py), the worker process's own settings (worker.py).

`from foundry.streaming.loader import StreamingDataLoader` keeps working; the name loads lazily, so
the dataset's import of worker_batches does not load the DataLoader class."""

from __future__ import annotations

from typing import Any

__all__ = ["StreamingDataLoader"]


def __getattr__(name: str) -> Any:
    if name == "StreamingDataLoader":
        from .dataloader import StreamingDataLoader

        return StreamingDataLoader
    raise AttributeError(f"module 'foundry.streaming.loader' has no attribute {name!r}")
