"""The pure parts behind FSDP and the GPU defaults, on CPU: which modules become FSDP units (tied
weights stay in one group), host buffers (tied copied once, reserved ahead, reused), "auto"
precision on each kind of device, tokens the model consumes, peaks and MFU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from foundry.plugins.errors import ConfigError
from foundry.trainer.checkpoint.host_copy import HostBuffers
from foundry.trainer.checkpoint.state import gather_full, live_model_optim_state
from foundry.trainer.fsdp import check_ties, shard_units, tied_groups
from foundry.trainer.precision import describe_precision, resolve_precision
from foundry.trainer.throughput import count_tokens, mfu, peak_flops

ROOT = Path(__file__).resolve().parents[2]


def gpt(**kw):
    sys.path.insert(0, str(ROOT))
    try:
        from examples.gpt.model import GPT, GPTConfig
    finally:
        sys.path.remove(str(ROOT))
    return GPT(GPTConfig(block_size=8, n_layer=2, n_head=2, n_embd=16, **kw))


def test_units_are_the_blocks_not_the_container_and_ties_stay_in_the_root():
    model = gpt()
    assert tied_groups(model) == [["wte.weight", "head.weight"]]
    assert [name for name, _ in shard_units(model)] == ["blocks.0", "blocks.1"]


class TiedIntoABlock(nn.Module):
    """A layer list whose last block shares its weight with the embedding: that block must not be
    its own FSDP unit, or the tie would be split across two groups."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 10, bias=False)])
        self.layers[1].weight = self.emb.weight


def test_a_block_tied_outside_itself_is_left_to_the_root():
    model = TiedIntoABlock()
    assert [name for name, _ in shard_units(model)] == ["layers.0"]


def test_without_a_block_list_the_top_level_children_are_units():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    assert [name for name, _ in shard_units(model)] == ["0", "2"]


def test_check_ties_refuses_a_silent_untie():
    model = gpt()
    ties = tied_groups(model)
    check_ties(model, ties)
    model.head.weight = nn.Parameter(model.wte.weight.detach().clone())
    with pytest.raises(ConfigError, match="untied"):
        check_ties(model, ties)


def test_host_buffers_copy_tied_once_reserve_ahead_and_reuse():
    model = gpt()
    opt = torch.optim.AdamW(model.parameters())
    model({"tokens": torch.randint(0, 256, (2, 9))}).sum().backward()
    opt.step()
    live = live_model_optim_state(model, [opt])
    buffers = HostBuffers()
    buffers.reserve(live)  # before the first save, off the training thread
    first = buffers.copy(live)
    assert first["model"]["head.weight"] is first["model"]["wte.weight"]  # one copy, still tied
    assert first["model"]["wte.weight"] is not model.wte.weight
    assert torch.equal(first["model"]["wte.weight"], model.wte.weight)
    allocated = {k: v.data_ptr() for k, v in buffers._buffers.items()}
    with torch.no_grad():
        model.wte.weight.add_(1.0)
    second = buffers.copy(live_model_optim_state(model, [opt]))
    assert {k: v.data_ptr() for k, v in buffers._buffers.items()} == allocated  # the reserved memory, reused
    assert torch.equal(second["model"]["wte.weight"], model.wte.weight)
    assert gather_full(second) is second  # nothing sharded: nothing to gather


def test_auto_precision_per_device():
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert resolve_precision("auto", cpu) == ("fp32", False)
    assert resolve_precision("auto", cuda, bf16_ok=True) == ("bf16", True)
    assert resolve_precision("auto", cuda, bf16_ok=False) == ("fp32", True)  # TF32 matmuls at least
    assert resolve_precision("fp32", cuda, bf16_ok=True) == ("fp32", False)  # asked for strict fp32
    assert resolve_precision("amp_bf16", cpu) == ("bf16", False)               # Composer's names carry over
    assert resolve_precision("amp_fp16", cuda) == ("fp16", False)
    with pytest.raises(ConfigError, match="amp_fp8"):
        resolve_precision("amp_fp8", cuda)
    with pytest.raises(ConfigError):
        resolve_precision("fp8", cpu)
    assert describe_precision("auto", "fp32", cpu) == "fp32 (auto)"
    assert describe_precision("bf16", "bf16", cuda) == "bf16 autocast"


def test_tokens_are_what_the_model_consumes():
    model = gpt()
    assert count_tokens(model, {"tokens": torch.zeros(4, 9)}) == 4 * 8  # T+1 per sample, T consumed
    assert count_tokens(nn.Linear(2, 2), {"input_ids": torch.zeros(4, 9)}) == 36
    assert count_tokens(nn.Linear(2, 2), (torch.zeros(4, 2), torch.zeros(4))) == 0


def test_peak_and_mfu():
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16", True) == 989e12
    assert peak_flops("NVIDIA H100 PCIe", "bf16", True) == 756e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "fp32", True) == 156e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "fp32", False) == 19.5e12
    assert peak_flops("Some Future GPU", "bf16", True) is None
    assert peak_flops(None, "bf16", True) is None
    assert mfu(1e6, 6e8, 989e12, 8) == pytest.approx(1e6 * 6e8 / (989e12 * 8))
    assert mfu(1e6, None, 989e12, 8) is None and mfu(1e6, 6e8, None, 1) is None


def test_run_yaml_parameters_choose_precision_and_fsdp(tmp_path, monkeypatch):
    """examples/runs/gpt-parameters.yaml through the trainer's parameter path (tiny, file://, CPU):
    precision and parallelism are plain settings there."""
    import yaml

    from foundry.trainer.__main__ import build_from_parameters

    sys.path.insert(0, str(ROOT))
    try:
        from examples.gpt.prep import prepare
    finally:
        sys.path.remove(str(ROOT))
    spec = yaml.safe_load((ROOT / "examples" / "runs" / "gpt-parameters.yaml").read_text())
    params = spec["parameters"]
    assert params["precision"] == "auto" and params["parallelism"] == "fsdp"
    data = f"file://{tmp_path}/data"
    prepare(data, max_mb=0.02, block_size=8)
    params.update(model_args={"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 8}, max_duration="2ba",
                  train_dataloader_args={"data": data, "global_batch": 4, "cache_dir": str(tmp_path / "cache")},
                  save_folder=f"file://{tmp_path}/ckpt/{{run_name}}", parallelism="none", device="cpu",  # FSDP: test_fsdp.py
                  run_dir=str(tmp_path / "run"), progress_bar=False, run_name="gpt-params")
    trainer = build_from_parameters(params)
    assert trainer.cfg.precision == "fp32"  # "auto" on CPU
    trainer.fit()
    assert (tmp_path / "ckpt" / "gpt-params" / "latest").exists()
