"""The SDK: RunConfig.from_file, edit gpus/cluster, create_run, wait, logs, stop, resume, metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from foundry.app import sdk
from foundry.plugins.errors import ConfigError

from support.control import wait_for


def test_run_config_edit_and_validate(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("run_name: demo\ngpu_num: 4\ncluster: hpc\ncommand: echo hi\n")
    config = sdk.RunConfig.from_file(path)
    assert (config.name, config.gpus, config.gpu_num, config.cluster) == ("demo", 4, 4, "hpc")
    config.gpus = 2
    config.cluster = "local"
    config.max_retries = 1
    spec = config.to_spec()
    assert (spec.compute.gpus, spec.compute.cluster, spec.scheduling.max_retries) == (2, "local", 1)
    config.gpus = -1
    with pytest.raises(ConfigError, match="compute.gpus"):
        config.to_spec()
    with pytest.raises(AttributeError):
        config.gpu_count = 2


@pytest.mark.subprocess
def test_create_wait_logs_metrics(tmp_path):
    code = ("import json, os\nprint('hello', os.environ['RANK'])\n"
            "open(os.environ['FOUNDRY_METRICS_FILE'], 'a').write(json.dumps({'step': 1, 'loss': 2.5}) + '\\n')")
    config = sdk.RunConfig(name="sdk-run", command=[sys.executable, "-c", code])
    config.gpus = 1
    run = sdk.create_run(config)
    assert run.name == "sdk-run" and run.latest.index == 0
    run = sdk.wait_for_run(run, timeout=60)
    assert run.status == "completed"
    assert sdk.get_logs(run, rank=0) == ["hello 0"]
    assert sdk.get_metrics(run) == [{"step": 1, "loss": 2.5}]
    assert [r.name for r in sdk.list_runs()] == ["sdk-run"]
    assert sdk.dry_run(config).spec["name"] == "sdk-run"
    sdk.delete_run(run)
    with pytest.raises(ConfigError):
        sdk.get_run("sdk-run")


def test_stop_and_resume(pausable):
    run = sdk.create_run({"name": "sdk-pause", "command": pausable, "compute": {"gpus": 1}})
    wait_for(lambda: any(line.startswith("start") for line in sdk.get_logs(run, rank=0)))
    assert sdk.stop_run(run).status in ("stopping", "paused")
    assert sdk.wait_for_run(run, timeout=60).status == "paused"
    run = sdk.resume_run(run, gpus=2)
    assert run.latest.index == 1 and run.latest.devices == 2
    sdk.stop_run(run, graceful=False)
    assert sdk.wait_for_run(run, timeout=60).status in ("stopped", "paused")
    assert json.dumps(sdk.get_run(run).to_dict())


@pytest.mark.subprocess
def test_on_run_event_reaches_plugins_and_a_broken_one_is_ignored():
    from foundry.plugins.hookspecs import hookimpl
    from foundry.plugins.manager import register_plugin, unregister_plugin

    seen: list[tuple[str, str, dict]] = []

    class Observer:
        @hookimpl
        def on_run_event(self, run_name, event, details):
            seen.append((run_name, event, details))

    class Broken:
        @hookimpl
        def on_run_event(self, run_name, event, details):
            raise RuntimeError("observer bug")

    register_plugin(Observer(), name="observer")
    register_plugin(Broken(), name="broken")
    try:
        run = sdk.create_run({"name": "observed", "command": [sys.executable, "-c", "pass"]})
        assert sdk.wait_for_run(run, timeout=60).status == "completed"
        sdk.delete_run(run)
    finally:
        unregister_plugin("observer")
        unregister_plugin("broken")
    events = [e for name, e, _ in seen if name == "observed"]
    assert events[:2] == ["created", "launched"] and "completed" in events and events[-1] == "deleted"
    launched = next(d for _, e, d in seen if e == "launched")
    assert launched["resumption"] == 0 and launched["cluster"] == "local"


@pytest.mark.subprocess
def test_parameters_only_spec_runs_the_trainer(tmp_path):
    """No `command`: the job is `python -m foundry.trainer` built from FOUNDRY_PARAMETERS."""
    toy = Path(__file__).resolve().parents[1] / "trainer" / "toy_job.py"
    (tmp_path / "toy_job.py").write_text(toy.read_text())
    tests_dir = str(tmp_path)
    config = sdk.RunConfig(name="from-params", parameters={
        "model": "toy_job:ToyModel", "model_args": {"dropout": 0.0},
        "train_dataloader": "toy_job:ToyLoader", "train_dataloader_args": {"rank": 0, "world": 1},
        "max_duration": "3ba", "device": "cpu", "progress_bar": False,
    }, env_variables={"PYTHONPATH": tests_dir})
    run = sdk.wait_for_run(sdk.create_run(config), timeout=120)
    assert run.status == "completed", "\n".join(sdk.get_logs(run))
    assert [m["step"] for m in sdk.get_metrics(run) if "loss" in m] == [1, 2, 3]
