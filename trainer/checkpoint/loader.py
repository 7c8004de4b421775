"""Finding, downloading (verified) and restoring a checkpoint.

`load_path` / `save_folder` may name a save folder (with `latest`) or one checkpoint folder (with
manifest.json), at any storage URL. Full checkpoints load on any world size; sharded ones are
resharded by torch.distributed.checkpoint on load.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import torch

from foundry.plugins.errors import CheckpointError
from foundry.plugins.manager import open_store
from foundry.plugins.storage import split_parent

from . import store_ops
from .format import MANIFEST, Manifest
from .state import apply_model_optim_state, model_optim_state


def open_checkpoint_source(url: str):
    """(store of the save folder, checkpoint name or None for 'the latest loadable')."""
    store = open_store(url)
    if store.exists(MANIFEST):
        parent, name = split_parent(store.url if "://" in url else url)
        return open_store(parent), name
    return store, None


def download(url: str, dest_root: Path) -> tuple[Manifest, Path] | None:
    """Download the checkpoint `url` names (verified), or the newest loadable one of a save folder.

    None when a save folder holds no checkpoint at all."""
    store, name = open_checkpoint_source(url)
    shutil.rmtree(dest_root, ignore_errors=True)
    if name is not None:
        dest = dest_root / name
        return store_ops.download_verified(store, name, dest), dest
    found = store_ops.download_loadable(store, dest_root)
    if found is None and any(True for _ in store_ops.list_checkpoints(store)):
        raise CheckpointError(f"no loadable checkpoint in {store.url}: every one is incomplete or corrupt")
    return found


def restore(manifest: Manifest, folder: Path, model, optimizers: list, rank: int, world_size: int,
            weights_only: bool = False) -> dict[str, Any]:
    """Load model (+ optimizer) state; return the extra state (timestamp, schedulers, RNG, data)."""
    full = manifest.layout == "full"
    if full:
        state = torch.load(folder / "state.pt", map_location="cpu", weights_only=True)
    else:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp

        state = model_optim_state(model, optimizers, full=False)
        if weights_only:
            state = {"model": state["model"]}
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")  # single process: expected
        dcp.load(state, checkpoint_id=str(folder), no_dist=not (dist.is_available() and dist.is_initialized()))
    apply_model_optim_state(model, [] if weights_only else optimizers, state, full=full)
    extra = torch.load(folder / "extra.pt", map_location="cpu", weights_only=False)
    if manifest.world_size != world_size:
        warnings.warn(f"checkpoint {manifest.name} was written by {manifest.world_size} rank(s), loading on "
                      f"{world_size}: RNG streams are reassigned, data continues from the global position",
                      stacklevel=2)
    return extra


def rank_entry(per_rank: list, rank: int, same_world: bool):
    """A rank's own saved entry on the same world size, rank 0's otherwise (global-state protocol)."""
    if not per_rank:
        return None
    return per_rank[rank] if same_world and rank < len(per_rank) else per_rank[0]
