"""Gathering the training state into host memory, and putting it back.

Model and optimizer state go through torch.distributed.checkpoint.state_dict, which names
parameters by their fully-qualified names whatever the wrapper (plain, DDP, FSDP): a full state
dict is portable between world sizes and wrappers; the sharded one is what DCP saves per rank.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from ..torch_compat import dtensor_type, local_tensor, param_fqns


SCALARS = frozenset({type(None), bool, int, float, str})


def scalars_only(seq: list | tuple) -> bool:
    """A flat sequence of immutable scalars (Python's RNG state: 625 ints), walked in one C loop."""
    return all(type(v) in SCALARS for v in seq)


def to_host(tree: Any) -> Any:
    """Deep copy with every tensor copied to CPU memory (training may change the originals next)."""
    if isinstance(tree, torch.Tensor):
        if tree.device.type == "cpu":
            return tree.detach().clone()
        return tree.detach().to("cpu")
    if isinstance(tree, dict):
        return {k: to_host(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return list(tree) if scalars_only(tree) else [to_host(v) for v in tree]
    if isinstance(tree, tuple):
        return tree if scalars_only(tree) else tuple(to_host(v) for v in tree)
    return tree


def _alias_key(t: torch.Tensor) -> tuple:
    """Same key for two tensors that are views of the same memory with the same layout: a state
    dict names a tied weight twice, as two tensor objects over one storage."""
    local = local_tensor(t)
    if local.is_sparse or local.numel() == 0:  # empty shards (FSDP, a dim smaller than the world) share address 0
        return ("own", id(t))
    return (local.device, local.untyped_storage().data_ptr(), local.storage_offset(), tuple(local.shape),
            tuple(local.stride()), local.dtype)


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
    dtensor = dtensor_type()
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
    dtensor = dtensor_type()
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
            return local_tensor(t)
        if _is_dim0_shard(t.placements):  # FSDP's: uneven (even empty) shards, which full_tensor() mis-gathers
            return _gather_dim0(local_tensor(t), tuple(t.shape), group, t.device_mesh.size())
        if mesh is None:
            from torch.distributed.device_mesh import DeviceMesh

            mesh = DeviceMesh.from_group(group, "cpu")
        return dtensor.from_local(local_tensor(t), mesh, t.placements, run_check=False,
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


def _is_dim0_shard(placements) -> bool:
    from torch.distributed.tensor import Shard

    return len(placements) == 1 and isinstance(placements[0], Shard) and placements[0].dim == 0


def _gather_dim0(local: torch.Tensor, shape: tuple, group, world: int) -> torch.Tensor:
    """The whole of a tensor split on dim 0 the way FSDP2 splits it (torch.chunk: the last shards may
    be short or empty, e.g. a Linear(d, 1) over 2 ranks): pad each to the chunk size, gather, trim."""
    import torch.distributed as dist

    chunk = -(-shape[0] // world)
    padded = local.new_zeros((chunk, *shape[1:]))
    padded[: local.shape[0]].copy_(local)
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded, group=group)
    return torch.cat(parts)[: shape[0]]


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
    if full:
        _reserve_optim_state(optimizers, state["optim"])
    set_state_dict(model, optimizers, model_state_dict=state["model"], optim_state_dict=state["optim"],
                   options=StateDictOptions(full_state_dict=full, broadcast_from_rank0=False))


def _reserve_optim_state(optimizers: list, saved: dict[str, Any]) -> None:
    """Give fresh optimizers (no state yet) uninitialized state tensors shaped like the saved ones.

    Why: set_state_dict creates a fresh optimizer's state by running a step with zero gradients
    (torch's _init_optim_state), which on CPU cost 2 of the 3 s of restoring 100 MB of AdamW state.
    It skips that when the state exists; every value is then overwritten by the load, by name, so
    only the shapes matter. Done only when the saved groups list one state per parameter, in the
    optimizers' order, each tensor shaped like its parameter (or a scalar); otherwise torch initializes.
    Under FSDP the zero-gradient step cost 4.2 s of a 10.5 s restore of 1 GB on 2 CPU ranks.
    """
    groups = [g for opt in optimizers for g in opt.param_groups]
    saved_groups, saved_state = saved.get("param_groups", []), saved.get("state", {})
    if any(opt.state for opt in optimizers) or len(groups) != len(saved_groups):
        return
    reserved: list[tuple[torch.Tensor, dict]] = []
    for group, saved_group in zip(groups, saved_groups):
        names = saved_group.get("params", [])
        if len(names) != len(group["params"]):
            return
        for name, param in zip(names, group["params"]):
            values = saved_state.get(name)
            if not isinstance(values, dict) or param.grad is not None:
                return
            # a whole saved tensor has the parameter's global shape; under FSDP the reserved one is a
            # DTensor sharded like the parameter (empty_like), which set_state_dict then fills with its shard
            if any(isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape != param.shape for v in values.values()):
                return
            reserved.append((param, {k: _uninitialized_like(param, v.dtype, scalar=v.dim() == 0, device=v.device)
                                     if isinstance(v, torch.Tensor) else v for k, v in values.items()}))
    owner = {id(p): opt for opt in optimizers for g in opt.param_groups for p in g["params"]}
    for param, values in reserved:
        owner[id(param)].state[param] = values


def reserve_optim_state_from_metadata(model, optimizers: list, metadata: Any) -> bool:
    """Give fresh optimizers uninitialized state shaped as a sharded (DCP) checkpoint lists it, so
    that get_state_dict, which the sharded restore needs for tensors to load into, skips torch's
    zero-gradient step (40% of restoring 0.3 GB of AdamW state on CPU). DCP then fills every
    value in place. Done only when every parameter's saved state is tensors shaped like the
    parameter (its global shape) or scalars; a parameter without saved state (frozen) gets none, as
    torch would give it. Returns whether anything was reserved; otherwise torch initializes."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    if not optimizers or any(opt.state for opt in optimizers):
        return False
    by_param: dict[str, dict[str, Any]] = {}
    for key, entry in (getattr(metadata, "state_dict_metadata", None) or {}).items():
        if key.startswith("optim.state."):
            owner, _, name = key[len("optim.state."):].rpartition(".")
            by_param.setdefault(owner, {})[name] = entry
    fqn_of = param_fqns(model)
    reserved: list[tuple[Any, torch.optim.Optimizer, dict]] = []
    for opt in optimizers:
        for group in opt.param_groups:
            for param in group["params"]:
                if param.grad is not None or id(param) not in fqn_of:
                    return False
                values = {}
                for name, entry in by_param.pop(fqn_of[id(param)], {}).items():
                    if not isinstance(entry, TensorStorageMetadata):
                        return False
                    if len(entry.size) != 0 and tuple(entry.size) != tuple(param.shape):
                        return False
                    values[name] = _uninitialized_like(param, entry.properties.dtype, scalar=len(entry.size) == 0)
                if values:
                    reserved.append((param, opt, values))
    if by_param:  # saved state no parameter here accounts for (nested values, other names): torch decides
        return False
    if not reserved:
        return False
    for param, opt, values in reserved:
        opt.state[param] = values
    return True


def _uninitialized_like(param, dtype: torch.dtype, scalar: bool, device=None) -> torch.Tensor:
    """An optimizer state value to be overwritten by a load: a scalar (AdamW's `step`, on `device`, CPU by
    default), or shaped and placed like `param` (a DTensor sharded like it under FSDP)."""
    if scalar:
        return torch.empty((), dtype=dtype, device=device)
    return torch.empty_like(param, dtype=dtype, requires_grad=False)


def _load_param_groups(optimizers: list, saved: list[dict[str, Any]]) -> None:
    """Hyperparameters (lr, ...) of every group, in order: the saved groups are the optimizers'
    groups concatenated, as get_state_dict lists them."""
    groups = [g for opt in optimizers for g in opt.param_groups]
    if len(groups) != len(saved):
        raise ValueError(f"checkpoint has {len(saved)} optimizer parameter groups, the optimizers have {len(groups)}")
    for group, values in zip(groups, saved):
        group.update({k: v for k, v in values.items() if k != "params"})

