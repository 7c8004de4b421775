"""Every Trainer argument that takes a time in Composer (max_duration, save_interval,
eval_interval, log_interval, console_log_interval) takes Composer's time strings, or is refused at
construction with a line that names the argument - never a TypeError at the first batch."""

from __future__ import annotations

import json

import pytest
import torch

from foundry.plugins.errors import ConfigError
from foundry.trainer import Trainer

BATCHES = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]  # 3 batches an epoch


def _trainer(tmp_path, **kwargs) -> Trainer:
    torch.manual_seed(0)
    return Trainer(run_name="t", model=torch.nn.Linear(3, 1), train_dataloader=BATCHES, device="cpu",
                   loss_fn=torch.nn.functional.mse_loss, run_dir=str(tmp_path), progress_bar=False,
                   **kwargs)


def _logged_steps(tmp_path) -> list[int]:
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "loss" in r]


@pytest.mark.parametrize("interval,steps", [("2ba", [2, 4, 6, 7]), (2, [2, 4, 6, 7]), ("1ep", [3, 6, 7]),
                                            ("8sp", [2, 4, 6, 7]), ("0.5dur", [4, 7])])
def test_log_interval_takes_composer_times(tmp_path, interval, steps):
    _trainer(tmp_path, max_duration="7ba", log_interval=interval, console_log_interval="1ba").fit()
    assert _logged_steps(tmp_path) == steps  # the last step is always logged


@pytest.mark.parametrize("name", ["save_interval", "eval_interval", "log_interval", "console_log_interval"])
def test_a_bad_interval_is_refused_at_construction_naming_it(tmp_path, name):
    with pytest.raises(ConfigError, match=f"^{name}: invalid time '20 batches'"):
        _trainer(tmp_path, **{name: "20 batches"})  # no max_duration yet: still checked now
    with pytest.raises(ConfigError, match=f"^{name}: a callable"):
        _trainer(tmp_path, max_duration="2ba", **{name: lambda state, event: True})


def test_a_bad_max_duration_names_it(tmp_path):
    with pytest.raises(ConfigError, match="^max_duration: invalid time"):
        _trainer(tmp_path, max_duration="20 batches")
    trainer = _trainer(tmp_path)
    with pytest.raises(ConfigError, match="^max_duration: invalid time"):
        trainer.fit(max_duration="ten")


def test_interval_strings_drive_saves_and_evals(tmp_path):
    evals = []

    class Count:
        def eval_end(self, trainer, metrics):
            evals.append(trainer.timestamp.batch)

    trainer = _trainer(tmp_path, max_duration="2ep", save_interval="2ba", eval_interval="0.5dur",
                       save_folder=str(tmp_path / "ckpt"), eval_dataloader=BATCHES[:1], callbacks=[Count()])
    trainer.fit()
    assert evals == [3, 6]
    saved = {p.name for p in (tmp_path / "ckpt").iterdir()}
    assert {"ep0-ba2", "ep1-ba4", "ep2-ba6"} <= saved and "ep0-ba1" not in saved and "ep0-ba3" not in saved


def test_a_bare_int_is_read_in_composers_unit():
    """Composer reads `max_duration=2`, `save_interval=1` and `eval_interval=1` as epochs: a mosaic
    script whose only change is its imports trains as long and saves as often here."""
    from foundry.trainer.config import TrainerConfig
    from foundry.trainer.time import Time, TimeUnit

    cfg = TrainerConfig(run_name="r", max_duration=2, save_interval=1, eval_interval=1, log_interval=5)
    assert cfg.max_time == Time(2, TimeUnit.EPOCH)
    assert cfg.save_time == Time(1, TimeUnit.EPOCH) and cfg.eval_time == Time(1, TimeUnit.EPOCH)
    assert cfg.log_time == Time(5, TimeUnit.BATCH)
