"""Topology in one object: what torchrun (or a provider) put in the environment, read once.

`DistEnv.detect()` is where the trainer learns RANK/WORLD_SIZE/...: DistEnv is plugins.launch_env's LaunchEnv,
Foundry's one topology type (the name stays for the trainer's callers); `init()` starts the
process group (gloo on CPU, nccl on GPU). `choose_parallelism` is the pure rule for DDP vs FSDP;
FSDP runs on CPU (gloo) exactly as on GPU, and in one process without torchrun as world size 1.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from foundry.plugins.errors import ConfigError
from foundry.plugins.launch_env import LaunchEnv

DistEnv = LaunchEnv   # rank, world_size, local_rank, local_world_size, resumption_index; .distributed, .is_main


def pick_device(requested: str, env: DistEnv):
    import torch

    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", env.local_rank % torch.cuda.device_count())
        return torch.device("cpu")
    device = torch.device(requested)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", env.local_rank % max(1, torch.cuda.device_count()))
    return device


def backend_for(device_type: str) -> str:
    return "nccl" if device_type == "cuda" else "gloo"


def init_process_group(env: DistEnv, device, parallelism: str = "none") -> bool:
    """Start the default process group when launched with WORLD_SIZE > 1, or for FSDP in a single
    process (world size 1 over an in-memory store: FSDP needs a process group even alone).
    True if this call started one."""
    import torch.distributed as dist

    if dist.is_initialized() or not (env.distributed or parallelism == "fsdp"):
        return False
    if device.type == "cuda":
        import torch

        torch.cuda.set_device(device)
    if not env.distributed:
        dist.init_process_group(backend_for(device.type), store=dist.HashStore(), rank=0, world_size=1)
        return True
    dist.init_process_group(backend_for(device.type), timeout=timedelta(minutes=30))
    return True


def choose_parallelism(requested: str, device_type: str, world_size: int) -> str:
    """'none' | 'ddp' | 'fsdp' ('auto' picks DDP when distributed). FSDP on any device and world size."""
    if requested not in ("auto", "ddp", "fsdp", "none"):
        raise ConfigError(f"unknown parallelism {requested!r}", hint="use auto, ddp, fsdp or none")
    if world_size == 1 and requested in ("auto", "ddp"):
        return "none"
    if requested == "auto":
        return "ddp"
    return requested


def wrap_model(model, parallelism: str, device):
    """Wrap for data parallelism; returns the module the loop calls forward on."""
    if parallelism == "none":
        return model
    if parallelism == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)
    from .fsdp import fully_shard_model

    return fully_shard_model(model)


def all_reduce_sum(values: list[float], device, env: DistEnv) -> list[float]:
    """Sum small scalars over ranks in one collective (loss, stop flag, OOM flag)."""
    if not env.distributed:
        return values
    import torch
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def all_gather_object(obj: Any, env: DistEnv) -> list[Any]:
    if not env.distributed:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * env.world_size
    dist.all_gather_object(out, obj)
    return out


def torch_dist_initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def barrier(env: DistEnv) -> None:
    if env.distributed:
        import torch.distributed as dist

        dist.barrier()
