"""Restoring a checkpoint into fresh optimizers: the state is reserved from the saved shapes (the
full layout's state dict, the sharded layout's DCP metadata) instead of by torch's zero-gradient
step (the slow part of a restore), and training continues exactly as with the optimizer that was
saved."""

from __future__ import annotations

import pytest
import torch

from foundry.trainer.checkpoint.safe import check_dcp_metadata
from foundry.trainer.checkpoint.state import (
    _reserve_optim_state,
    apply_model_optim_state,
    model_optim_state,
    reserve_optim_state_from_metadata,
)


def _model(seed: int):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


def _trained(seed: int = 0, frozen: bool = False):
    model = _model(seed)
    model[2].weight.requires_grad_(not frozen)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):
        _step(model, opt)
    return model, opt


def _step(model, opt) -> None:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()


def _assert_next_step_equal(model, opt, fresh_model, fresh_opt) -> None:
    """One more step on both: parameters and optimizer state bit for bit equal."""
    _step(model, opt)
    _step(fresh_model, fresh_opt)
    for a, b in zip(model.parameters(), fresh_model.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(opt.state.values(), fresh_opt.state.values()):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _saved(model, opt) -> dict:
    state = model_optim_state(model, [opt], full=True)
    return {"model": {k: v.clone() for k, v in state["model"].items()},
            "optim": {"state": {k: {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in s.items()}
                                for k, s in state["optim"]["state"].items()},
                      "param_groups": state["optim"]["param_groups"]}}


def test_fresh_adamw_continues_bit_for_bit():
    model, opt = _trained()
    saved = _saved(model, opt)
    fresh_model = _model(seed=7)  # other weights, no gradients yet (as in a new process)
    fresh_opt = torch.optim.AdamW(fresh_model.parameters(), lr=1e-2)
    apply_model_optim_state(fresh_model, [fresh_opt], saved, full=True)
    assert all(p.grad is None for p in fresh_model.parameters())
    _assert_next_step_equal(model, opt, fresh_model, fresh_opt)


def test_saved_state_unlike_the_parameters_reserves_nothing():
    """Shapes that do not match the parameters: nothing is reserved, torch's own path decides."""
    model, opt = _trained()
    saved = _saved(model, opt)
    saved["optim"]["state"][next(iter(saved["optim"]["state"]))]["exp_avg"] = torch.zeros(3)
    fresh_opt = torch.optim.AdamW(_model(seed=7).parameters(), lr=1e-2)
    _reserve_optim_state([fresh_opt], saved["optim"])
    assert not fresh_opt.state


def _dcp_saved(model, opt, folder) -> None:
    import torch.distributed.checkpoint as dcp

    dcp.save(model_optim_state(model, [opt], full=False), checkpoint_id=str(folder), no_dist=True)


def _sharded_restore(model, opt, folder) -> bool:
    """What the sharded restore does (loader.restore): reserve, get_state_dict, DCP load in place, set."""
    import torch.distributed.checkpoint as dcp

    reserved = reserve_optim_state_from_metadata(model, [opt], check_dcp_metadata(folder, "test"))
    state = model_optim_state(model, [opt], full=False)
    dcp.load(state, checkpoint_id=str(folder), no_dist=True)
    apply_model_optim_state(model, [opt], state, full=False)
    return reserved


def _counting_steps(opt) -> list:
    calls: list = []
    original = opt.step
    opt.step = lambda *a, **k: (calls.append(1), original(*a, **k))[1]
    return calls


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_sharded_restore_skips_the_zero_step_and_continues_bit_for_bit(tmp_path):
    model, opt = _trained(frozen=True)  # a frozen parameter has no saved state and gets none
    _dcp_saved(model, opt, tmp_path)
    fresh_model = _model(seed=7)
    fresh_model[2].weight.requires_grad_(False)
    fresh_opt = torch.optim.AdamW(fresh_model.parameters(), lr=1e-2)
    steps = _counting_steps(fresh_opt)
    assert _sharded_restore(fresh_model, fresh_opt, tmp_path)
    assert steps == [] and all(p.grad is None for p in fresh_model.parameters())
    assert fresh_model[2].weight not in fresh_opt.state
    _assert_next_step_equal(model, opt, fresh_model, fresh_opt)


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_sharded_state_of_another_shape_reserves_nothing(tmp_path):
    model, opt = _trained()
    _dcp_saved(model, opt, tmp_path)
    other = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    other_opt = torch.optim.AdamW(other.parameters(), lr=1e-2)
    assert not reserve_optim_state_from_metadata(other, [other_opt], check_dcp_metadata(tmp_path, "test"))
    assert not other_opt.state
