"""Finding, downloading (verified) and restoring a checkpoint.

`load_path` / `save_folder` may name a save folder (with `latest`), one checkpoint folder (with
manifest.json), or one file: a file inside a checkpoint folder means that checkpoint; any other
single file (a Composer checkpoint, a torch.save'd state dict) gives model weights only. Full
checkpoints load on any world size; sharded ones are resharded by torch.distributed.checkpoint
on load. Every file is loaded with weights_only=True (see safe.py).
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from foundry.plugins.errors import CheckpointError, ObjectNotFoundError
from foundry.plugins.manager import open_store
from foundry.plugins.storage import split_parent

from . import store_ops
from .format import MANIFEST, Manifest
from .safe import check_dcp_metadata, load_file
from .state import apply_model_optim_state, model_optim_state, reserve_optim_state_from_metadata

FILE_LAYOUT = "file"  # a single weights file, not a Foundry checkpoint folder


def open_checkpoint_source(url: str, options: dict[str, Any] | None = None):
    """(store of the save folder, checkpoint name or None for 'the latest loadable', file name or None);
    every store opened with `options` (transfer settings)."""
    def opened(where: str):
        return open_store(where, options)  # looked up here, at call time: tests wrap loader.open_store

    store = opened(url)
    if store.exists(MANIFEST):
        parent, name = split_parent(store.url if "://" in url else url)
        return opened(parent), name, None
    if store_ops.read_latest(store) is not None or store_ops.list_checkpoints(store):
        return store, None, None
    try:
        parent_url, fname = split_parent(store.url)
    except Exception:
        return store, None, None
    parent = opened(parent_url)
    if not parent.exists(fname):
        return store, None, None
    if parent.exists(MANIFEST):  # a file inside one checkpoint's folder: that checkpoint
        folder_parent, name = split_parent(parent.url)
        return opened(folder_parent), name, None
    return parent, None, fname


def download(url: str, dest_root: Path, options: dict[str, Any] | None = None) -> tuple[Manifest, Path, str] | None:
    """Download the checkpoint `url` names (verified), or the newest loadable one of a save folder:
    (manifest, local folder, its URL). None when a save folder holds no checkpoint at all. `options`:
    the stores' transfer settings (the Trainer's checkpoint_transfer)."""
    store, name, fname = open_checkpoint_source(url, options)
    shutil.rmtree(dest_root, ignore_errors=True)
    if fname is not None:
        dest = dest_root / "file"
        try:
            store.get_file(fname, dest / fname)
        except ObjectNotFoundError:
            raise CheckpointError(f"no checkpoint file at {url}") from None
        manifest = Manifest(name=fname, run_name="", layout=FILE_LAYOUT, world_size=0, timestamp={})
        return manifest, dest, store.child_url(fname)
    if name is not None:
        dest = dest_root / name
        return store_ops.download_verified(store, name, dest), dest, store.child_url(name)
    found = store_ops.download_loadable(store, dest_root)
    if found is None:
        _nothing_loadable(store)
        return None
    manifest, folder = found
    return manifest, folder, store.child_url(manifest.name)


def _nothing_loadable(store) -> None:
    """No checkpoint loaded: a save folder that holds none starts fresh; one whose `latest` or
    checkpoint folders say training happened must not silently start again from batch 0."""
    fresh = (f"to start fresh on purpose, remove the save folder (`foundry rm -r {store.url}`) or "
             "give this run another save_folder")
    entries = store_ops.list_checkpoints(store)
    if entries:
        raise CheckpointError(f"no loadable checkpoint in {store.url}: every one is incomplete or corrupt "
                              f"({', '.join(e.name for e in entries)})", hint=fresh)
    pointer = store_ops.read_latest(store)
    if pointer is not None:
        name = pointer["checkpoint"]
        raise CheckpointError(f"{store.child_url(store_ops.LATEST)} names checkpoint {name}, which is missing "
                              f"from {store.url} (and no other checkpoint is there)",
                              hint=f"restore {store.child_url(name)} to resume; {fresh}")


def _model_weights(obj: Any, where: str) -> dict[str, torch.Tensor]:
    """The model state dict inside a single checkpoint file (Composer's, Foundry's, or bare)."""
    for candidate in (obj.get("state", {}).get("model") if isinstance(obj.get("state"), dict) else None,
                      obj.get("model"), obj):
        if isinstance(candidate, dict) and candidate and all(isinstance(v, torch.Tensor) for v in candidate.values()):
            return {k.removeprefix("module."): v for k, v in candidate.items()}
    raise CheckpointError(f"{where} holds no model state dict",
                          hint="give a Foundry checkpoint folder, a Composer checkpoint, or a torch.save'd state_dict")


def restore(manifest: Manifest, folder: Path, model, optimizers: list, rank: int, world_size: int,
            weights_only: bool = False) -> dict[str, Any] | None:
    """Load model (+ optimizer) state; return the extra state (timestamp, schedulers, RNG, data),
    None for a single weights file."""
    where = f"checkpoint {manifest.name}"
    if manifest.layout == FILE_LAYOUT:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        obj = load_file(folder / manifest.name, where)
        weights = _model_weights(obj if isinstance(obj, dict) else {}, where)
        set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True))
        return None
    full = manifest.layout == "full"
    if full:
        state = load_file(folder / "state.pt", f"{where} (state.pt)")
    else:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp

        metadata = check_dcp_metadata(folder, where)
        if not weights_only:
            reserve_optim_state_from_metadata(model, optimizers, metadata)
        state = model_optim_state(model, optimizers, full=False)
        if weights_only:
            state = {"model": state["model"]}
        with warnings.catch_warnings():  # single process: DCP's "torch.distributed is disabled" is expected
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load(state, checkpoint_id=str(folder), no_dist=not (dist.is_available() and dist.is_initialized()))
    apply_model_optim_state(model, [] if weights_only else optimizers, state, full=full)
    extra = load_file(folder / "extra.pt", f"{where} (extra.pt)")
    if manifest.world_size != world_size:
        # expected (the headline feature), so one plain line from rank 0, not a UserWarning with
        # this file's path and source line in every rank's log
        if rank == 0:
            sys.stderr.write(f"foundry: checkpoint {manifest.name} was written by {manifest.world_size} "
                             f"process(es), resuming on {world_size}: data continues from the same "
                             "global sample, random streams are reassigned\n")
    return extra


def rank_entry(per_rank: list, rank: int, same_world: bool):
    """A rank's own saved entry on the same world size, rank 0's otherwise (global-state protocol)."""
    if not per_rank:
        return None
    return per_rank[rank] if same_world and rank < len(per_rank) else per_rank[0]
