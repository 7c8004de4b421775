"""The control-plane helpers the TUI (and the CLI) share: run progress and resumption spans from
metrics rows, the dataset registry and its CLI, conversion/verification, the scoped secret check."""

from __future__ import annotations

import json
import os

import pytest

from foundry.app.control import datasets as ds
from foundry.app.control.models import Resumption, RunInfo
from foundry.app.control.run_views import max_steps_of, steps_by_resumption, summarize
from foundry.app.tui import format as fmt
from foundry.plugins.errors import ConfigError, DataError


def test_summarize_progress_and_eta():
    rows = [{"step": 1, "loss": 2.0, "throughput": 4.0}, {"step": 2, "loss": float("nan")},
            {"step": 10, "loss": 1.5, "throughput": 5.0}]
    p = summarize(rows, max_steps=110)
    assert (p.step, p.loss, p.throughput, p.eta_s) == (10, 1.5, 5.0, 20.0)
    assert summarize([{"step": 3, "max_steps": 9}]).max_steps == 9
    assert summarize([]).step is None
    assert max_steps_of({"parameters": {"max_duration": "500ba"}}) == 500
    assert max_steps_of({"parameters": {"max_duration": "2ep"}}) is None
    assert max_steps_of({}, {"trainer": {"max_duration": "70ba"}}) == 70
    assert max_steps_of({"parameters": {"max_duration": 3}}) is None  # a bare int counts epochs (Composer)


def test_steps_by_resumption_uses_field_or_time():
    res = [Resumption(0, "a", "local", 1, 1, "paused", started_at=100.0),
           Resumption(1, "b", "local", 1, 2, "running", started_at=200.0)]
    run = RunInfo("r", "id", "running", "b", 1, 2, 100.0, 200.0, 0, 0, {}, res)
    rows = [{"step": 1, "time": 101}, {"step": 50, "time": 150}, {"step": 51, "time": 205},
            {"step": 80, "time": 260}, {"step": 90, "resumption": 1}]
    assert steps_by_resumption(run, rows) == {0: (1, 50), 1: (51, 90)}


def test_format_helpers():
    assert fmt.duration(59) == "59s" and fmt.duration(3700) == "1h01m" and fmt.duration(None) == "-"
    assert fmt.age(100.0, 190.0) == "1m30s"
    assert fmt.size(2048) == "2.0 KB" and fmt.size(12) == "12 B"
    assert fmt.step_of(5, 10) == "5/10" and fmt.step_of(None, None) == "-"


def test_dataset_registry(tmp_path):
    reg = ds.DatasetRegistry(tmp_path)
    assert reg.list() == []
    entry = reg.add("s3://bucket/mds/train")
    assert (entry.name, entry.url) == ("mds-train", "s3://bucket/mds/train")
    local = reg.add(str(tmp_path / "data"), name="local-data")
    assert local.url.startswith("file://")
    with pytest.raises(ConfigError):
        reg.add("s3://bucket/mds/train")
    reg.remove("mds-train")
    assert [e.name for e in reg.list()] == ["local-data"]
    with pytest.raises(ConfigError):
        reg.remove("nope")


def test_convert_csv_then_verify_detects_corruption(tmp_path):
    src = tmp_path / "rows.csv"
    src.write_text("text,value\n" + "".join(f"row {i},{i}\n" for i in range(40)))
    seen = []
    summary = ds.convert_to_mds(src, str(tmp_path / "out"), progress=lambda d, t: seen.append((d, t)))
    assert (summary.samples, summary.shards, summary.columns) == (40, 1, {"text": "str", "value": "int"})
    assert seen[-1] == (40, 40)
    assert ds.read_samples(summary.url, 38, 5) == [{"text": "row 38", "value": 38}, {"text": "row 39", "value": 39}]
    assert ds.verify_dataset(summary.url) == []
    shard = next((tmp_path / "out").glob("shard.*.mds"))
    shard.write_bytes(shard.read_bytes()[:-1] + b"X")
    problems = ds.verify_dataset(summary.url)
    assert len(problems) == 1 and problems[0].startswith(shard.name)
    with pytest.raises(DataError):
        ds.inspect_dataset((tmp_path / "out" / "nothing").as_uri())
    with pytest.raises(ConfigError):
        ds.convert_to_mds(tmp_path / "rows.parquet", str(tmp_path / "x"))


def test_secret_check_scopes_the_environment(plane, tmp_path, monkeypatch):
    monkeypatch.delenv("MY_TOKEN", raising=False)
    plane.create_secret("tok", "env", {"key": "MY_TOKEN", "value": "s3cr3t-value"})
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    (bucket / "k1").write_text("x")
    assert plane.check_secret_access("tok", bucket.as_uri()) == ["k1"]
    assert "MY_TOKEN" not in os.environ
    with pytest.raises(Exception) as info:
        plane.check_secret_access("tok", "nope://bucket")
    assert "s3cr3t-value" not in str(info.value)


def test_dataset_cli(capsys, tmp_path):
    from foundry.app.cli.main import main

    main(["dataset", "add", "gs://bucket/data/val", "--name", "val"])
    main(["--json", "dataset", "list"])
    out = capsys.readouterr().out
    assert json.loads(out) == [{"name": "val", "url": "gs://bucket/data/val"}]
    main(["dataset", "remove", "val"])
    main(["--json", "dataset", "list"])
    assert json.loads(capsys.readouterr().out) == []
