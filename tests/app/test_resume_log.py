"""Issue 34.4: a run resumed on another process count says so in one plain line of its log; no raw
Python UserWarning (a machine path and a source line) at the moment the headline feature works."""

from __future__ import annotations

import os

import pytest

from support.control import wait_for

from .test_resumed_from import FACTORIES


@pytest.mark.slow
def test_resume_on_another_process_count_logs_one_plain_line(tmp_path, cp, cli):
    (tmp_path / "resume_factories.py").write_text(FACTORIES)
    spec = {"name": "rw", "compute": {"gpus": 2},
            "env_variables": {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
            "parameters": {"model": "resume_factories:model", "train_dataloader": "resume_factories:loader",
                           "loss_fn": "resume_factories:loss", "optimizer": {"name": "SGD", "lr": 0.1},
                           "max_duration": "40ba", "save_folder": f"file://{tmp_path}/ckpt/{{run_name}}",
                           "save_interval": "1000ba", "autoresume": True, "device": "cpu", "progress_bar": False}}
    cp.create_run(spec)
    wait_for(lambda: any(isinstance(r.get("loss"), float) for r in cp.metrics("rw")), timeout=180)
    assert cli("stop", "rw", "--wait")[0] == 0
    assert cp.get_run("rw").status == "paused"
    code, _, err = cli("resume", "rw", "--gpus", "1")
    assert code == 0, err
    wait_for(lambda: cp.get_run("rw").status == "completed", timeout=240)

    code, log, err = cli("logs", "rw")
    assert code == 0, err
    assert "was written by 2 process(es), resuming on 1: data continues from the same global sample" in log
    assert log.count("was written by 2 process(es)") == 1, log
    assert "Warning" not in log and "warnings.warn" not in log and ".py:" not in log, log
