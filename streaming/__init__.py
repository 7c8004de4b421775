"""foundry.streaming: MDS datasets (mosaicml-streaming compatible), StreamingDataset, MDSWriter.

`from foundry.streaming import StreamingDataset, MDSWriter` works like `from streaming import ...`.
Importing this package pulls in no cloud SDK and reads no environment variable.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MDSWriter", "Stream", "StreamingDataLoader", "StreamingDataset", "Topology"]

_LAZY = {
    "StreamingDataset": ("foundry.streaming.dataset", "StreamingDataset"),
    "Stream": ("foundry.streaming.stream", "Stream"),
    "StreamingDataLoader": ("foundry.streaming.loader", "StreamingDataLoader"),
    "Topology": ("foundry.streaming.topology", "Topology"),
    "MDSWriter": ("foundry.streaming.writer", "MDSWriter"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'foundry.streaming' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
