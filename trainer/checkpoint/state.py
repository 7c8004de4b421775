"""Gathering the training state into host memory, and putting it back.

Model and optimizer state go through torch.distributed.checkpoint.state_dict, which names
parameters by their fully-qualified names whatever the wrapper (plain, DDP, FSDP): a full state
dict is portable between world sizes and wrappers; the sharded one is what DCP saves per rank.
"""

from __future__ import annotations

import threading
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


def _dtensor_type():
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch built without distributed
        return None
    return DTensor


class HostBuffers:
    """Reusable host memory for the checkpoint copy, the only part of a save that stalls training.

    With at most one checkpoint in flight, the previous copy is free again when the next save
    starts: copying into already-allocated (and, with a GPU, pinned) buffers avoids allocation and
    page faults, the bulk of a naive stall. `reserve` allocates them ahead of the first save (in a
    background thread, pages touched), so the first save stalls no longer than the others.

    A DTensor (FSDP) is copied shard by shard: only the local shard goes to host memory, wrapped
    back into a DTensor with the same sharding spec, so DCP writes it as it is and the full layout
    gathers it off the training thread. A tensor shared under several names (tied weights) is
    copied once and stays shared in the copy.
    """

    def __init__(self, pin: bool = False):
        self.pin = pin
        self._buffers: dict[str, torch.Tensor] = {}
        self._reserving: threading.Thread | None = None

    def _buffer(self, path: str, like: torch.Tensor) -> torch.Tensor:
        buf = self._buffers.get(path)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype or like.is_sparse:
            buf = torch.empty(like.shape, dtype=like.dtype, device="cpu", pin_memory=self.pin and not like.is_sparse)
            self._buffers[path] = buf
        return buf

    def reserve(self, tree: Any) -> None:
        """Allocate (and touch) buffers shaped like `tree` in a background thread."""
        shapes = [(path, _meta(t)) for path, t in _leaves(tree)]

        def allocate() -> None:
            for path, like in shapes:
                self._buffer(path, like).zero_()  # zero_ faults the pages in now, not during the copy

        self._reserving = threading.Thread(target=allocate, name="foundry-host-buffers", daemon=True)
        self._reserving.start()

    @property
    def reserved(self) -> bool:
        return self._reserving is not None or bool(self._buffers)

    def copy(self, tree: Any) -> Any:
        """Copy every tensor of `tree` into the host buffers; returns the copy (same structure)."""
        if self._reserving is not None:
            self._reserving.join()
            self._reserving = None
        seen: dict[tuple, Any] = {}
        dtensor = _dtensor_type()
        on_device = False

        def visit(node: Any, path: str) -> Any:
            nonlocal on_device
            if isinstance(node, torch.Tensor):
                key = _alias_key(node)
                if key in seen:
                    return seen[key]
                local = _local(node)
                src = local.detach()
                on_device |= src.device.type != "cpu"
                buf = self._buffer(path, src)
                buf.copy_(src, non_blocking=self.pin)
                out = dtensor(buf, node._spec, requires_grad=False) if local is not node else buf
                seen[key] = out
                return out
            if isinstance(node, dict):
                return {k: visit(v, f"{path}/{k}") for k, v in node.items()}
            if isinstance(node, (list, tuple)):
                return type(node)(visit(v, f"{path}/{i}") for i, v in enumerate(node))
            return node

        out = visit(tree, "")
        if on_device and torch.cuda.is_available():
            torch.cuda.synchronize()  # the non-blocking copies must land before training moves on
        return out


def _local(t: torch.Tensor) -> torch.Tensor:
    dtensor = _dtensor_type()
    return t._local_tensor if dtensor is not None and isinstance(t, dtensor) else t


def _alias_key(t: torch.Tensor) -> tuple:
    """Same key for two tensors that are views of the same memory with the same layout: a state
    dict names a tied weight twice, as two tensor objects over one storage."""
    local = _local(t)
    if local.is_sparse:
        return ("sparse", id(t))
    return (local.device, local.untyped_storage().data_ptr(), local.storage_offset(), tuple(local.shape),
            tuple(local.stride()), local.dtype)


def _meta(t: torch.Tensor) -> torch.Tensor:
    local = _local(t)
    return torch.empty(local.shape, dtype=local.dtype, device="meta")


def _leaves(tree: Any, path: str = ""):
    """(path, tensor) for every tensor, each shared tensor once: the paths HostBuffers.copy uses."""
    seen: set[tuple] = set()

    def walk(node, path):
        if isinstance(node, torch.Tensor):
            if _alias_key(node) not in seen:
                seen.add(_alias_key(node))
                yield path, node
        elif isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, f"{path}/{k}")
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                yield from walk(v, f"{path}/{i}")

    yield from walk(tree, path)


def holds_dtensors(tree: Any) -> bool:
    dtensor = _dtensor_type()
    return dtensor is not None and any(isinstance(t, dtensor) for _, t in _leaves(tree))


def live_model_optim_state(model, optimizers: list) -> dict[str, Any]:
    """Model + optimizer state by fully-qualified name, as views of the live tensors (no copy, no
    communication): local shards under FSDP, whole tensors otherwise. What HostBuffers copies."""
    model_sd, optim_sd = get_state_dict(model, optimizers, options=StateDictOptions(full_state_dict=False))
    return {"model": model_sd, "optim": optim_sd}


def gather_full(tree: Any, group=None, keep: bool = True) -> Any:
    """The host copy with every DTensor gathered into a whole tensor (collective over `group`, a
    gloo group, so it runs off the training thread on CPU memory). With `keep` False the gathered
    tensors are dropped as soon as each collective is done (ranks that do not write the file)."""
    dtensor = _dtensor_type()
    if dtensor is None or not holds_dtensors(tree):
        return tree
    mesh = None
    seen: dict[int, Any] = {}

    def whole(t):
        nonlocal mesh
        if t.device_mesh.ndim != 1:
            from foundry.plugins.errors import CheckpointError

            raise CheckpointError("the full checkpoint layout supports 1-D device meshes only",
                                  hint="use checkpoint_layout='sharded'")
        if t.device_mesh.size() == 1:
            return t._local_tensor
        if mesh is None:
            from torch.distributed.device_mesh import DeviceMesh

            mesh = DeviceMesh.from_group(group, "cpu")
        return dtensor.from_local(t._local_tensor, mesh, t.placements, run_check=False,
                                  shape=t.shape, stride=t.stride()).full_tensor()

    def visit(node):
        if isinstance(node, torch.Tensor):
            if id(node) not in seen:
                full = whole(node) if isinstance(node, dtensor) else node
                seen[id(node)] = full if keep else None
            return seen[id(node)]
        if isinstance(node, dict):
            return {k: visit(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return type(node)(visit(v) for v in node)
        return node

    return visit(tree)


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
