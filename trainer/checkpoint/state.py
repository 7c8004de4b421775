"""Gathering the training state into host memory, and putting it back.

Model and optimizer state go through torch.distributed.checkpoint.state_dict, which names
parameters by their fully-qualified names whatever the wrapper (plain, DDP, FSDP): a full state
dict is portable between world sizes and wrappers; the sharded one is what DCP saves per rank.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict


def to_host(tree: Any) -> Any:
    """Deep copy with every tensor copied to CPU memory (training may change the originals next)."""
    if isinstance(tree, torch.Tensor):
        if tree.device.type == "cpu":
            return tree.detach().clone()
        return tree.detach().to("cpu")
    if isinstance(tree, dict):
        return {k: to_host(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [to_host(v) for v in tree]
    if isinstance(tree, tuple):
        return tuple(to_host(v) for v in tree)
    return tree


class HostBuffers:
    """Reusable host memory for the checkpoint copy. With at most one checkpoint in flight, the
    previous copy is free again when the next save starts: copying into already-allocated (and,
    with a GPU, pinned) buffers avoids page faults and allocation, the bulk of the stall."""

    def __init__(self, pin: bool = False):
        self.pin = pin
        self._buffers: dict[str, torch.Tensor] = {}

    def copy(self, tree: Any, path: str = "") -> Any:
        if isinstance(tree, torch.Tensor):
            src = tree.detach()
            buf = self._buffers.get(path)
            if buf is None or buf.shape != src.shape or buf.dtype != src.dtype or src.is_sparse:
                buf = torch.empty(src.shape, dtype=src.dtype, device="cpu", pin_memory=self.pin and not src.is_sparse)
                self._buffers[path] = buf
            buf.copy_(src, non_blocking=self.pin)
            return buf
        if isinstance(tree, dict):
            return {k: self.copy(v, f"{path}/{k}") for k, v in tree.items()}
        if isinstance(tree, (list, tuple)):
            return type(tree)(self.copy(v, f"{path}/{i}") for i, v in enumerate(tree))
        return tree


def _options(full: bool) -> StateDictOptions:
    return StateDictOptions(full_state_dict=full, cpu_offload=full)


def model_optim_state(model, optimizers: list, full: bool) -> dict[str, Any]:
    model_sd, optim_sd = get_state_dict(model, optimizers, options=_options(full))
    return {"model": model_sd, "optim": optim_sd}


def apply_model_optim_state(model, optimizers: list, state: dict[str, Any], full: bool) -> None:
    if not optimizers or not state["optim"].get("state"):
        from torch.distributed.checkpoint.state_dict import set_model_state_dict

        set_model_state_dict(model, state["model"], options=StateDictOptions(full_state_dict=full))
        if optimizers:  # stateless (plain SGD): set_state_dict asserts on it; only hyperparameters to restore
            _load_param_groups(optimizers, state["optim"].get("param_groups", []))
        return
    set_state_dict(model, optimizers, model_state_dict=state["model"], optim_state_dict=state["optim"],
                   options=StateDictOptions(full_state_dict=full, broadcast_from_rank0=False))


def _load_param_groups(optimizers: list, saved: list[dict[str, Any]]) -> None:
    """Hyperparameters (lr, ...) of every group, in order: the saved groups are the optimizers'
    groups concatenated, as get_state_dict lists them."""
    groups = [g for opt in optimizers for g in opt.param_groups]
    if len(groups) != len(saved):
        raise ValueError(f"checkpoint has {len(saved)} optimizer parameter groups, the optimizers have {len(groups)}")
    for group, values in zip(groups, saved):
        group.update({k: v for k, v in values.items() if k != "params"})


def dataloader_stateful(loader) -> Any:
    """The object whose state_dict/load_state_dict we checkpoint: the loader, else its dataset."""
    for candidate in (loader, getattr(loader, "dataset", None)):
        if candidate is not None and callable(getattr(candidate, "state_dict", None)) \
                and callable(getattr(candidate, "load_state_dict", None)):
            return candidate
    return None
