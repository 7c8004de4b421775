"""The newcomer's path through the control plane: the main job is a registered run with a loss curve;
`delete run` keeps checkpoints unless asked (a new run under the name says it resumes them); a Slurm
cluster runs this environment's python; a job that fails to start says why; a missing cloud SDK
names its extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.control import wait_for

pytestmark = pytest.mark.subprocess  # every test starts the CLI, a run or a venv

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_main_job_is_a_run_and_delete_keeps_or_deletes_checkpoints(cp, cli, tmp_path):
    """The real tiny GPT (examples/gpt/job.py) on the local cluster, twice under one name, with a
    time budget of a few steps: the second run resumes the kept checkpoints and says so."""
    sys.path.insert(0, str(REPO))
    from examples.gpt.prep import prepare
    from foundry.plugins.manager import open_store

    data = f"file://{tmp_path / 'data'}"
    prepare(data, max_mb=0.2)
    save = f"file://{tmp_path / 'ckpt'}/{{run_name}}"
    spec = {"name": "demo", "command": [sys.executable, str(REPO / "examples" / "gpt" / "job.py")],
            "compute": {"cluster": "local", "gpus": 1},
            "env_variables": {"DATA_URL": data, "SAVE_URL": save, "MINUTES": "0.02", "MAX_DURATION": "400ba"}}
    cp.create_run(spec)
    run = cp.wait("demo", timeout=240)
    assert run.status == "completed", list(cp.logs("demo"))[-20:]
    assert [r for r in cp.metrics("demo") if "loss" in r]
    code, out, _ = cli("describe", "run", "demo")
    assert code == 0 and "loss  " in out  # the loss curve line
    store = open_store(f"file://{tmp_path / 'ckpt' / 'demo'}")
    assert cp.checkpoint_url("demo") == store.url and store.exists("latest")

    code, _, err = cli("delete", "run", "demo")  # not a terminal: keep, and say where they are
    assert code == 0 and "kept its checkpoints at" in err and store.url in err
    assert store.exists("latest")

    cp.create_run(spec)
    assert cp.wait("demo", timeout=240).status == "completed"
    log = "\n".join(cp.logs("demo"))
    assert "already holds checkpoints of a run named 'demo'" in log and "resuming from them" in log

    code, _, err = cli("delete", "run", "demo", "--delete-checkpoints")
    assert code == 0 and "and its checkpoints" in err
    assert list(store.list("")) == []
    assert cli("describe", "run", "demo")[0] == 2


def test_slurm_cluster_defaults_to_this_python_and_checks_a_given_one(cp, tmp_path):
    info = cp.create_cluster("hpc", "slurm", {"partition": "debug"})
    assert info.config["python"] == sys.executable
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    from foundry.plugins.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot import torch") as exc:
        cp.create_cluster("bare", "slurm", {"python": str(bare / "bin" / "python")})
    assert "leave -o python out" in exc.value.hint
    with pytest.raises(ConfigError, match="does not run"):
        cp.create_cluster("nowhere", "slurm", {"python": str(tmp_path / "no-python")})
    assert [c.name for c in cp.list_clusters()] == ["local", "hpc"]
    # over ssh the python lives elsewhere: recorded as given, not checked here
    cp.create_cluster("remote", "slurm", {"ssh_host": "login.example", "python": "/shared/venv/bin/python"})


def test_a_job_that_fails_to_start_says_why(cp, cli, tmp_path):
    cp.create_run({"name": "broken", "command": [sys.executable, "-c", "import boto4"],
                   "compute": {"cluster": "local", "gpus": 1}})
    run = wait_for(lambda: (r := cp.get_run("broken")).status == "failed" and r, timeout=120)
    assert run.latest.exit_reason.endswith("ModuleNotFoundError: No module named 'boto4'")
    code, out, _ = cli("--json", "get", "runs")
    assert json.loads(out)[0]["status"] == "failed"
    code, out, _ = cli("get", "runs")
    assert "boto4" in out.replace("\n", "")


def test_a_missing_cloud_sdk_names_its_extra():
    """A process in which boto3 cannot be found (the [aws] extra not installed)."""
    proc = subprocess.run(
        [sys.executable, "-c",
         "import importlib.util as u\n"
         "real = u.find_spec\n"
         "u.find_spec = lambda name, *a: None if name == 'boto3' else real(name, *a)\n"
         "from foundry.app.cli.main import main\n"
         "main(['ls', 's3://bucket/x'])\n"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "s3:// needs the boto3 package" in proc.stderr and "foundry-anywhere[aws]" in proc.stderr
    assert "Traceback" not in proc.stderr
