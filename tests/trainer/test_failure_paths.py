"""Failures on the ordinary path end clearly: an exception in fit() with a torch DataLoader's
workers (which the trainer makes ignore SIGTERM) still lets the process exit with that error; an
autoresume whose `latest` names a checkpoint that is gone stops instead of training from batch 0."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from foundry.plugins.errors import CheckpointError
from foundry.trainer import Trainer

BATCHES = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]


def _trainer(tmp_path, save: str, **kwargs) -> Trainer:
    return Trainer(run_name="gone", model=torch.nn.Linear(3, 1), train_dataloader=BATCHES, device="cpu",
                   loss_fn=torch.nn.functional.mse_loss, run_dir=str(tmp_path / "run"), progress_bar=False,
                   save_folder=save, save_interval="1ba", **kwargs)


def test_autoresume_from_a_latest_whose_checkpoint_is_missing_stops(tmp_path):
    save = str(tmp_path / "ckpt")
    _trainer(tmp_path, save, max_duration="2ba", save_num_checkpoints_to_keep=1).fit()
    shutil.rmtree(tmp_path / "ckpt" / "ep0-ba2")  # lost: `latest` still names it, nothing else is left
    trainer = _trainer(tmp_path, save, max_duration="4ba", autoresume=True)
    with pytest.raises(CheckpointError) as err:
        trainer.fit()
    message = str(err.value)
    assert "names checkpoint ep0-ba2, which is missing" in message
    assert f"foundry rm -r {save}" in message or "foundry rm -r file://" in message  # how to start fresh on purpose
    assert trainer.timestamp.batch == 0


def test_autoresume_with_only_incomplete_checkpoints_stops(tmp_path):
    save = str(tmp_path / "ckpt")
    _trainer(tmp_path, save, max_duration="1ba").fit()
    os.remove(tmp_path / "ckpt" / "ep0-ba1" / "manifest.json")  # an upload cut short
    with pytest.raises(CheckpointError, match="no loadable checkpoint .* start fresh on purpose"):
        _trainer(tmp_path, save, max_duration="4ba", autoresume=True).fit()


_RAISES_IN_FIT = textwrap.dedent("""
    import sys, torch
    from torch.utils.data import DataLoader
    from foundry.trainer import Trainer

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net, self.calls = torch.nn.Linear(3, 1), 0

        def forward(self, batch):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("boom in forward")
            return self.net(batch).sum()

    where, persistent = sys.argv[1], sys.argv[2] == "1"
    loader = DataLoader(torch.randn(64, 3), batch_size=4, num_workers=2, persistent_workers=persistent)
    kwargs = {"train_dataloader": loader}
    if where == "eval":  # the error in evaluate(), with the eval loader's workers running
        kwargs = {"train_dataloader": [torch.randn(4, 3)] * 4, "eval_dataloader": loader, "eval_interval": "1ba"}
    Trainer(run_name="boom", model=Model(), max_duration="10ba", run_dir=sys.argv[3], device="cpu",
            progress_bar=False, **kwargs).fit()
""")


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("where,persistent", [("train", "0"), ("eval", "1")])
def test_an_error_in_fit_with_dataloader_workers_exits_with_the_error(tmp_path, where, persistent):
    script = tmp_path / "job.py"
    script.write_text(_RAISES_IN_FIT)
    env = dict(os.environ, FOUNDRY_DISABLE_PLUGIN_AUTOLOAD="1")
    try:  # hung for minutes before the fix: the workers ignored multiprocessing's SIGTERM at exit
        proc = subprocess.run([sys.executable, str(script), where, persistent, str(tmp_path / "run")],
                              capture_output=True, text=True, env=env, timeout=240, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process did not exit after the error: {exc.stderr!r:.2000}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "RuntimeError: boom in forward" in proc.stderr
