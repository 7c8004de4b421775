"""The checkpoint's host copy through a plan built once: the same tree as the slow path at every
save (hyperparameters included), reused buffers, and a new plan whenever the live state changes."""

from __future__ import annotations

import torch
from torch import nn

from foundry.trainer.checkpoint.host_copy import HostBuffers, StateSnapshot
from foundry.trainer.checkpoint.state import live_model_optim_state


def _step(model, opt, sched=None):
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    opt.zero_grad()
    if sched is not None:
        sched.step()


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _reference(model, opt):
    return HostBuffers().copy(live_model_optim_state(model, [opt]))


def test_planned_copy_equals_the_slow_path_save_after_save():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    _step(model, opt, sched)
    snap = StateSnapshot()
    snap.prepare(model, [opt])  # buffers and plan built in the background
    first = snap.take(model, [opt])
    assert _same(first, _reference(model, opt))
    ptrs = [t.data_ptr() for t in first["model"].values()]
    _step(model, opt, sched)
    second = snap.take(model, [opt])
    assert _same(second, _reference(model, opt))  # new values, new lr
    assert second["optim"]["param_groups"][0]["lr"] == opt.param_groups[0]["lr"] == 0.025
    assert [t.data_ptr() for t in second["model"].values()] == ptrs  # the same host memory
    assert snap.replanned == 0


def test_a_replaced_tensor_gets_a_new_plan():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _step(model, opt)
    snap = StateSnapshot()
    snap.prepare(model, [opt])
    snap.take(model, [opt])
    p = model[0].weight
    opt.state[p]["momentum_buffer"] = opt.state[p]["momentum_buffer"] * 2  # an optimizer that rebinds state
    assert _same(snap.take(model, [opt]), _reference(model, opt))
    with torch.no_grad():
        model[1].weight.data = torch.ones_like(model[1].weight)  # a parameter on new storage
    assert _same(snap.take(model, [opt]), _reference(model, opt))
    assert snap.replanned == 2


def test_without_prepare_and_with_stateless_optimizer_state():
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # momentum 0: state values are None
    _step(model, opt)
    snap = StateSnapshot()
    assert _same(snap.take(model, [opt]), _reference(model, opt))
    _step(model, opt)
    assert _same(snap.take(model, [opt]), _reference(model, opt))


def test_empty_tensors_are_never_taken_for_tied_ones():
    """FSDP gives a rank empty shards (a Linear(d, 1) on 2 ranks); they all sit at address 0, and
    merging them made ranks gather different numbers of tensors (a gloo abort)."""
    tree = {"a": torch.empty(0, 4), "b": torch.empty(0, 4), "tied": torch.ones(2)}
    tree["tied_again"] = tree["tied"].view(2)
    out = HostBuffers().copy(tree)
    assert out["a"] is not out["b"]
    assert out["tied"] is out["tied_again"]
