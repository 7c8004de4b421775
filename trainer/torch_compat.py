"""The torch internals the trainer leans on, in one place: what is not torch's public API, or what
we rely on beyond its documentation. Written against torch 2.13; tests/trainer/test_torch_compat.py
pins that version and checks each function here, so an upgrade fails there first and says what to
re-check. Public API where it serves: DTensor.to_local() / DTensor.from_local(), never
`_local_tensor` / `DTensor(local, _spec)`.

torch is imported by the callers (checkpoint state, the loop); importing this module costs nothing more.
"""

from __future__ import annotations

from typing import Any

import torch

TESTED_TORCH = "2.13"   # the minor version every function below was checked against


def dtensor_type() -> type | None:
    """torch's DTensor class, or None where torch was built without distributed."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return None
    return DTensor


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (a view of its memory, no autograd record), else `t` itself."""
    dtensor = dtensor_type()
    if dtensor is None or not isinstance(t, dtensor):
        return t
    with torch.no_grad():  # a state read: to_local() would otherwise record a backward node
        return t.to_local()


def dtensor_like(local: torch.Tensor, like: Any) -> Any:
    """A DTensor over `local` (no copy: a view) with the mesh, placements, shape and stride of `like`."""
    return type(like).from_local(local, like.device_mesh, like.placements, run_check=False,
                                 shape=like.shape, stride=like.stride())


def foreach_copy_(dsts: list[torch.Tensor], srcs: list[torch.Tensor], non_blocking: bool = False) -> None:
    """dst.copy_(src) for every pair in one dispatch (torch's own `_foreach_copy_`, what optimizers use)."""
    torch._foreach_copy_(dsts, srcs, non_blocking=non_blocking)


def loader_workers(batches: Any) -> list:
    """The worker processes of a DataLoader iterator (empty for a single-process one)."""
    return list(getattr(batches, "_workers", None) or ())


def shutdown_workers(batches: Any) -> None:
    """The DataLoader iterator's own worker shutdown (what its __del__ does), now."""
    batches._shutdown_workers()


def forget_iterator(loader: Any, batches: Any) -> None:
    """A DataLoader with persistent workers keeps its iterator; once `batches` is stopped, drop it so
    the next iter(loader) starts new workers."""
    if batches is not None and getattr(loader, "_iterator", None) is batches:
        loader._iterator = None


def param_fqns(model: torch.nn.Module) -> dict[int, str]:
    """id(parameter) -> the name get_state_dict gives it (torch's own `_get_fqns`: without the
    prefixes of torch.compile, DDP and activation-checkpoint wrappers). A parameter that maps to
    several names (FSDP1's flat parameters) is left out."""
    from torch.distributed.checkpoint.state_dict import _get_fqns

    names: dict[int, str] = {}
    for name, param in model.named_parameters():
        fqns = _get_fqns(model, name)
        if len(fqns) == 1:
            names[id(param)] = next(iter(fqns))
    return names
