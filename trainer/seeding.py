"""One seed for python, numpy and torch on every rank; RNG state capture/restore; deterministic mode."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int, rank: int = 0) -> int:
    """Seed python, numpy and torch (CPU and CUDA) with `seed + rank`; returns the seed used."""
    value = (int(seed) + int(rank)) % (2**32)
    random.seed(value)
    np.random.seed(value)
    torch.manual_seed(value)
    return value


def set_deterministic(enabled: bool) -> None:
    """Deterministic kernels (errors on ops that have none), no cuDNN autotuning, fixed cuBLAS workspace."""
    if not enabled:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def rng_state() -> dict[str, Any]:
    """Every global RNG's state, in types torch.load(weights_only=True) accepts."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def load_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    npst = state["numpy"]
    if isinstance(npst, dict):
        npst = (npst["name"], npst["keys"].numpy().astype(np.uint32), npst["pos"], npst["has_gauss"],
                npst["cached_gaussian"])
    np.random.set_state(npst)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
