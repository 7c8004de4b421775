"""Checkpoints load without running code: every file is read with torch.load(weights_only=True)
(tensors, numbers, strings, lists, tuples and dicts of them), and a sharded checkpoint's DCP
metadata, which torch unpickles in full, is first checked against an allow-list.

A checkpoint that would need more is refused with a CheckpointError, not loaded: a checkpoint
from an untrusted bucket must never be able to run code on the machine that loads it.
"""

from __future__ import annotations

import dataclasses
import enum
import pickle
from pathlib import Path
from typing import Any

import torch

from foundry.plugins.errors import CheckpointError

from .state import scalars_only

_PLAIN = (type(None), bool, int, float, str, bytes, torch.Tensor, torch.Size, torch.dtype)
_UNSAFE_HINT = ("Foundry loads checkpoints with weights_only=True; load this file yourself only if you "
                "trust its source, or write it again with Foundry")


def to_safe(tree: Any, what: str, path: str = "") -> Any:
    """`tree` with numpy values turned into tensors / Python numbers; CheckpointError (at save time,
    naming the path) for anything weights_only loading would refuse."""
    import numpy as np

    if isinstance(tree, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(tree).copy())
    if isinstance(tree, np.generic):
        return tree.item()
    if isinstance(tree, _PLAIN):
        return tree
    if isinstance(tree, dict):
        return {k: to_safe(v, what, f"{path}/{k}") for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        if scalars_only(tree):
            return type(tree)(tree)
        return type(tree)(to_safe(v, what, f"{path}/{i}") for i, v in enumerate(tree))
    raise CheckpointError(f"{what} holds a {type(tree).__module__}.{type(tree).__qualname__} at {path or '/'}: "
                          "checkpoints hold only tensors, numbers, strings and lists/dicts of them",
                          hint="return plain values (or tensors) from state_dict()")


def load_file(path: Path, where: str) -> Any:
    """torch.load with weights_only=True; a file that needs more is refused."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"refusing to load {where}: it needs unsafe (arbitrary code) unpickling ({first})",
                              hint=_UNSAFE_HINT) from None


def _allowed(module: str, name: str) -> bool:
    if module in ("torch.distributed.checkpoint.metadata", "torch.distributed.checkpoint.filesystem"):
        import importlib

        obj = getattr(importlib.import_module(module), name, None)
        return dataclasses.is_dataclass(obj) and isinstance(obj, type) or isinstance(obj, enum.EnumMeta)
    if module == "torch":
        return name == "Size" or isinstance(getattr(torch, name, None), torch.dtype)
    return (module, name) in {("torch.serialization", "_get_layout"), ("pathlib", "PosixPath"),
                              ("pathlib", "PurePosixPath"), ("collections", "OrderedDict")}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if not _allowed(module, name):
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def check_dcp_metadata(folder: Path, where: str) -> Any:
    """Unpickle DCP's .metadata with the allow-list before torch.distributed.checkpoint does; return it."""
    path = Path(folder) / ".metadata"
    try:
        with open(path, "rb") as f:
            return _MetadataUnpickler(f).load()
    except FileNotFoundError:
        raise CheckpointError(f"{where} has no .metadata (not a sharded checkpoint)") from None
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError) as exc:
        raise CheckpointError(f"refusing to load {where}: its .metadata needs unsafe unpickling ({exc})",
                              hint=_UNSAFE_HINT) from None
