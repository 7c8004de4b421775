"""The preemption notice window (FOUNDRY_GRACE_S, from `grace:` in the run YAML): the trainer says when
its last checkpoint cannot be published within it - at start from the run's previous saves, else after
its own first one - and a stop's checkpoint records how long it took from the notice."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from foundry.app.runspec.schema import RunSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_job import run  # noqa: E402


def records(run_dir: Path, event: str) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("event") == event]


def test_a_save_slower_than_the_window_is_said_after_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FOUNDRY_GRACE_S", "0.000001")
    run(steps=4, save_folder=str(tmp_path / "ckpt"), run_dir=str(tmp_path / "run"), save_interval="2ba")
    err = capsys.readouterr().err
    assert "the notice window is 1e-06s but checkpoint ep0-ba2 took" in err
    assert err.count("the notice window is") == 1                     # said once, not at every save
    published = records(tmp_path / "run", "checkpoint_published")
    assert [r["checkpoint"] for r in published] == ["ep0-ba2", "ep0-ba4"]
    assert all(isinstance(r["publish_s"], float) for r in published)
    [short] = records(tmp_path / "run", "notice_window_short")
    assert short["grace_s"] == 1e-06


def test_at_start_from_the_runs_last_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FOUNDRY_GRACE_S", "30")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text(json.dumps(
        {"step": 2, "event": "checkpoint_published", "checkpoint": "ep0-ba2", "publish_s": 50.0, "resumption": 0}) + "\n")
    run(steps=1, save_folder=str(tmp_path / "ckpt"), run_dir=str(tmp_path / "run"))
    err = capsys.readouterr().err
    assert "the notice window is 30s but the run's last checkpoint took 50.0s to publish" in err
    assert records(tmp_path / "run", "notice_window_short")[0]["step"] == 0    # said before the first step


def test_without_a_window_nothing_is_said(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FOUNDRY_GRACE_S", raising=False)
    run(steps=2, save_folder=str(tmp_path / "ckpt"), run_dir=str(tmp_path / "run"), save_interval="1ba")
    assert "notice window" not in capsys.readouterr().err


def test_a_stop_publishes_its_checkpoint_and_records_the_time_from_the_notice(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_GRACE_S", "30")
    trainer = run(steps=8, save_folder=str(tmp_path / "ckpt"), run_dir=str(tmp_path / "run"), pause_at=3,
                  exit_on_pause=False)
    assert trainer.paused
    [paused] = records(tmp_path / "run", "paused")
    assert paused["checkpoint"] == "ep0-ba4"          # the step after the notice, agreed by every rank
    assert records(tmp_path / "run", "checkpoint_published")[-1]["checkpoint"] == "ep0-ba4"
    assert isinstance(paused["notice_s"], float)


@pytest.mark.parametrize("given, seconds", [("30s", 30.0), ("2m", 120.0), (45, 45.0), ("1.5h", 5400.0)])
def test_grace_in_the_run_yaml(given, seconds):
    assert RunSpec(name="r", command="true", grace=given).grace == seconds


def test_a_grace_that_is_not_a_duration_says_how_to_write_it():
    with pytest.raises(ValueError, match="write it as 30s, 2m or a number of seconds"):
        RunSpec(name="r", command="true", grace="soon")
