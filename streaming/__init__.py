"""foundry.streaming: MDS datasets (mosaicml-streaming compatible), StreamingDataset, MDSWriter.

`from foundry.streaming import StreamingDataset, MDSWriter` works like `from streaming import ...`.
Importing this package pulls in no cloud SDK and reads no environment variable.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CSVWriter", "JSONWriter", "LocalDataset", "MDSWriter", "Stream", "StreamingDataLoader", "StreamingDataset",
           "TSVWriter", "Topology", "XSVWriter", "clean_stale_shared_memory", "merge_index", "streams_registry"]

_LAZY = {
    "StreamingDataset": ("foundry.streaming.dataset", "StreamingDataset"),
    "Stream": ("foundry.streaming.stream", "Stream"),
    "streams_registry": ("foundry.streaming.stream", "streams_registry"),
    "StreamingDataLoader": ("foundry.streaming.loader", "StreamingDataLoader"),
    "Topology": ("foundry.streaming.topology", "Topology"),
    "LocalDataset": ("foundry.streaming.local", "LocalDataset"),
    "MDSWriter": ("foundry.streaming.writer", "MDSWriter"),
    "JSONWriter": ("foundry.streaming.writer", "JSONWriter"),
    "CSVWriter": ("foundry.streaming.writer", "CSVWriter"),
    "TSVWriter": ("foundry.streaming.writer", "TSVWriter"),
    "XSVWriter": ("foundry.streaming.writer", "XSVWriter"),
    "merge_index": ("foundry.streaming.tools.merge", "merge_index"),
}


def clean_stale_shared_memory() -> None:
    """mosaicml-streaming scripts call this first (from `streaming.base.util`): it removes shared
    memory a killed run left behind. Foundry names no shared memory of its own (its epoch counter
    is an anonymous map, the loader's batch rings are torch's shared tensors, freed with their
    processes), so there is nothing to clean: it does nothing."""


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
