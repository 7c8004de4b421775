"""Where a resumption came from, as a structured fact: `python -m foundry.trainer` paused (SIGTERM
from `foundry stop`) and resumed on the local provider; `describe run` (text and --json) names
the checkpoint each resumption resumed from, read from the trainer's `resumed` record."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from .conftest import wait_for

FACTORIES = textwrap.dedent("""
    import time
    import torch

    def model():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 1)

    def loader():
        g = torch.Generator().manual_seed(1)
        return [(torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)) for _ in range(40)]

    def loss(out, target):
        time.sleep(0.1)  # slow enough to be stopped mid-run
        return torch.nn.functional.mse_loss(out, target)
""")


@pytest.mark.slow
def test_describe_names_the_checkpoint_each_resumption_resumed_from(tmp_path, cp, cli):
    (tmp_path / "resume_factories.py").write_text(FACTORIES)
    save = f"file://{tmp_path}/ckpt/{{run_name}}"
    spec = {"name": "rf", "compute": {"gpus": 1},
            "env_variables": {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
            "parameters": {"model": "resume_factories:model", "train_dataloader": "resume_factories:loader",
                           "loss_fn": "resume_factories:loss", "optimizer": {"name": "SGD", "lr": 0.1},
                           "max_duration": "40ba", "save_folder": save, "save_interval": "1000ba",
                           "autoresume": True, "device": "cpu", "progress_bar": False}}
    cp.create_run(spec)
    wait_for(lambda: any(isinstance(r.get("loss"), float) for r in cp.metrics("rf")), timeout=120)
    cp.stop_run("rf")
    wait_for(lambda: cp.get_run("rf").status == "paused", timeout=120)
    cp.resume_run("rf")
    wait_for(lambda: cp.get_run("rf").status == "completed", timeout=180)

    code, out, err = cli("describe", "run", "rf", "--json")
    assert code == 0, err
    resumptions = json.loads(out)["resumptions"]
    assert resumptions[0]["resumed_from"] is None
    origin = resumptions[1]["resumed_from"]
    assert origin.startswith(f"file://{tmp_path}/ckpt/rf/ep0-ba"), origin
    code, out, _ = cli("describe", "run", "rf")
    assert f"resumption 1 resumed from {origin}" in out
