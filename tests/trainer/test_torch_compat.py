"""trainer/torch_compat.py is the one place the trainer touches torch internals. Pinned to the torch
version it was checked against: on another torch this fails first, naming the module to re-check."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from foundry.trainer import torch_compat as tc


def test_pinned_to_the_torch_it_was_checked_against():
    running = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert running == tc.TESTED_TORCH, (
        f"torch {running}: re-check every function in trainer/torch_compat.py (and run "
        f"tests/trainer/test_host_copy.py, test_fsdp*.py), then set TESTED_TORCH = {running!r}")


@pytest.fixture
def mesh(tmp_path):
    """A one-process gloo group and its 1-D CPU mesh: enough for real DTensors."""
    from torch.distributed.device_mesh import init_device_mesh

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # the first DTensor in a process costs seconds (torch.distributed.tensor's import)
def test_local_tensor_is_a_view_of_the_shard_without_autograd(mesh):
    from torch.distributed.tensor import Shard, distribute_tensor

    param = torch.nn.Parameter(distribute_tensor(torch.arange(6.0).reshape(3, 2), mesh, [Shard(0)]))
    local = tc.local_tensor(param)
    assert type(local) is torch.Tensor and local.grad_fn is None
    assert local.data_ptr() == param.to_local().data_ptr()
    plain = torch.ones(2)
    assert tc.local_tensor(plain) is plain and tc.dtensor_type() is type(param.data)


@pytest.mark.slow
def test_dtensor_like_wraps_a_buffer_without_a_copy(mesh):
    from torch.distributed.tensor import Shard, distribute_tensor

    live = distribute_tensor(torch.arange(6.0).reshape(3, 2), mesh, [Shard(0)])
    buf = torch.zeros(3, 2)
    out = tc.dtensor_like(buf, live)
    assert (out.placements, out.shape, out.stride()) == (live.placements, live.shape, live.stride())
    tc.foreach_copy_([buf], [tc.local_tensor(live)])
    assert torch.equal(out.full_tensor(), torch.arange(6.0).reshape(3, 2))   # the copy landed in the wrapper


@pytest.mark.subprocess  # DataLoader worker processes
def test_dataloader_workers_shut_down_and_the_iterator_is_forgotten():
    loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2, num_workers=1, persistent_workers=True)
    batches = iter(loader)
    assert next(batches).tolist() == [0, 1]
    workers = tc.loader_workers(batches)
    assert len(workers) == 1 and workers[0].is_alive()
    tc.shutdown_workers(batches)
    workers[0].join(timeout=30)
    assert not workers[0].is_alive()
    tc.forget_iterator(loader, batches)
    assert next(iter(loader)).tolist() == [0, 1]   # a fresh iterator, with new workers
    assert tc.loader_workers(iter(torch.utils.data.DataLoader([1, 2]))) == []


@pytest.mark.slow
def test_param_fqns_are_the_names_get_state_dict_gives(mesh):
    """The sharded restore finds each parameter's saved optimizer state by these names: plain, under
    FSDP2 (fully_shard keeps names), and through an activation-checkpoint wrapper (prefix dropped)."""
    from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    torch.manual_seed(0)
    model = torch.nn.Sequential(checkpoint_wrapper(torch.nn.Linear(4, 4)), torch.nn.Linear(4, 1))
    fully_shard(model[1], mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters())
    names = tc.param_fqns(model)
    assert sorted(names.values()) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    _, osd = get_state_dict(model, [opt], options=StateDictOptions(full_state_dict=False))
    assert set(osd["state"]) == set(names.values())
