"""`foundry checkpoint ls/inspect` on a save folder written by a real (tiny) training run."""

from __future__ import annotations

import json

import pytest
import torch


@pytest.fixture
def save_folder(tmp_path):
    from foundry.trainer import Trainer

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    data = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(4)]
    folder = tmp_path / "ckpt"
    Trainer(run_name="cli-run", model=model, train_dataloader=data, max_duration="4ba",
            loss_fn=torch.nn.functional.mse_loss, save_folder=str(folder), save_interval="2ba",
            run_dir=str(tmp_path / "run"), device="cpu", progress_bar=False).fit()
    return folder


def test_ls_lists_checkpoints_and_latest(cli, save_folder):
    code, out, err = cli("checkpoint", "ls", str(save_folder))
    assert code == 0, err
    assert "ep0-ba2" in out and "ep0-ba4" in out
    code, out, _ = cli("--json", "checkpoint", "ls", f"file://{save_folder}")
    rows = json.loads(out)
    assert [(r["name"], r["complete"], r["latest"]) for r in rows] == [("ep0-ba2", True, False), ("ep0-ba4", True, True)]


def test_inspect_describes_the_checkpoint(cli, save_folder):
    code, out, err = cli("--json", "checkpoint", "inspect", str(save_folder), "--verify")
    assert code == 0, err
    info = json.loads(out)
    assert info["name"] == "ep0-ba4" and info["run_name"] == "cli-run" and info["latest"] and info["verified"]
    assert info["timestamp"]["batch"] == 4 and info["layout"] == "full" and info["world_size"] == 1
    assert info["config"]["trainer"]["max_duration"] == "4ba"
    assert {f["key"] for f in info["files"]} == {"state.pt", "extra.pt"}
    code, out, _ = cli("checkpoint", "inspect", str(save_folder / "ep0-ba2"))
    assert code == 0 and "ep0-ba2" in out and "batch=2" in out


def test_inspect_missing_folder_is_one_line_error(cli, tmp_path):
    code, out, err = cli("checkpoint", "inspect", str(tmp_path / "nothing"))
    assert code == 1 and "no checkpoint" in err
