"""The tiny GPT example with dropout > 0, paused by SIGTERM in a subprocess (exit 75) and resumed by
autoresume in a fresh one, ends bitwise equal to the uninterrupted run on CPU: same parameters,
same logged losses (evaluation included, whose loader also draws from the RNG)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from foundry.plugins.compute import PAUSED_EXIT_CODE

ROOT = Path(__file__).resolve().parents[2]
STEPS, SIGNAL_AFTER = 7, 2  # the pause lands after batch 3: mid-epoch, after an evaluation

DRIVER = """
import os, signal, sys, torch
sys.path.insert(0, {root!r})
from examples.gpt.model import GPTConfig
from examples.gpt.train import build_trainer

class SignalAt:
    def batch_end(self, trainer):
        if trainer.timestamp.batch == {signal_after}:
            os.killpg(os.getpgrp(), signal.SIGTERM)

torch.set_num_threads(1)
pause = sys.argv[1] == "pause"
cfg = GPTConfig(block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.1)
t = build_trainer({data!r}, {save!r}, run_name="gpt-drop", max_duration="{steps}ba", global_batch=8,
                  save_interval="1000ba", eval_interval="2ba", autoresume=True, model_cfg=cfg,
                  run_dir={run_dir!r}, device="cpu", progress_bar=False, callbacks=[SignalAt()] if pause else [])
t.fit()
torch.save(t.raw_model.state_dict(), {out!r})
"""


def _losses(run_dir: Path) -> dict:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {(r["step"], "eval" if "eval/loss" in r else "train"): r.get("loss", r.get("eval/loss"))
            for r in rows if "loss" in r or "eval/loss" in r}


@pytest.mark.slow
def test_dropout_gpt_paused_by_sigterm_resumes_bitwise(tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        from examples.gpt.prep import prepare
    finally:
        sys.path.remove(str(ROOT))
    data = f"file://{tmp_path}/data"
    prepare(data, max_mb=0.05, block_size=16)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}

    def run(kind: str, name: str, *args: str) -> subprocess.CompletedProcess:
        script = tmp_path / f"{name}.py"
        script.write_text(DRIVER.format(root=str(ROOT), data=data, save=f"file://{tmp_path}/{name}-ckpt/{{run_name}}",
                                        steps=STEPS, signal_after=SIGNAL_AFTER, run_dir=str(tmp_path / name),
                                        out=str(tmp_path / f"{name}.pt")))
        return subprocess.run([sys.executable, str(script), kind], capture_output=True, text=True, env=env,
                              timeout=300, start_new_session=True)

    straight = run("straight", "straight")
    assert straight.returncode == 0, straight.stderr[-3000:]
    paused = run("pause", "resumed")
    assert paused.returncode == PAUSED_EXIT_CODE, paused.stderr[-3000:]
    assert not (tmp_path / "resumed.pt").exists()
    resumed = run("resume", "resumed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    ref, got = torch.load(tmp_path / "straight.pt"), torch.load(tmp_path / "resumed.pt")
    for key, value in ref.items():
        assert torch.equal(got[key], value), f"{key} differs after pause/resume"
    assert _losses(tmp_path / "resumed") == _losses(tmp_path / "straight")
