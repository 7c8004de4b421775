"""The local provider with real processes: torchrun ranks, per-rank logs, exit classification,
graceful pause (SIGTERM -> exit 75 -> PAUSED), jobs that outlive their launcher's parent."""

from __future__ import annotations

import signal
import sys
import textwrap

import pytest

from foundry.backends.compute.local import LocalProvider
from foundry.backends.compute.local_job import classify
from foundry.plugins.compute import ComputeProvider, JobRequest, JobState, SecretMount

from support.control import wait_for

GLOO = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()}/{dist.get_world_size()} sum={t.item():.0f} run={os.environ['RUN_NAME']}", flush=True)
    dist.destroy_process_group()
""")


def request(tmp_path, command, procs=1, **kw) -> JobRequest:
    return JobRequest(run_name="t", run_id="id1", resumption=0, command=command, procs_per_node=procs,
                      env={"RUN_NAME": "t", **kw.pop("env", {})}, log_dir=str(tmp_path / "job"), **kw)


def run_to_end(provider, req, timeout=90):
    handle = provider.launch(provider.dryrun(req))
    status = wait_for(lambda: (s := provider.status(handle)).state.terminal and s, timeout)
    return handle, status


def test_protocol_and_plan_have_no_side_effects(tmp_path):
    provider = LocalProvider({"name": "local"})
    assert isinstance(provider, ComputeProvider)
    plan = provider.dryrun(request(tmp_path, ["python", "train.py"], procs=2))
    assert "--nproc_per_node=2" in plan.artifacts["command"] and "python train.py" in plan.artifacts["command"]
    assert not (tmp_path / "job").exists()
    assert provider.describe()["nodes"] == 1


@pytest.mark.subprocess
def test_torchrun_two_ranks_gloo_and_per_rank_logs(tmp_path):
    script = tmp_path / "gloo.py"
    script.write_text(GLOO)
    provider = LocalProvider({})
    handle, status = run_to_end(provider, request(tmp_path, [sys.executable, str(script)], procs=2))
    assert status.state is JobState.COMPLETED and status.exit_code == 0
    assert list(provider.logs(handle, rank=1)) == ["rank 1/2 sum=3 run=t"]
    job_log = "\n".join(provider.logs(handle))
    assert "[rank 0] rank 0/2 sum=3 run=t" in job_log and "[rank 1] rank 1/2 sum=3" in job_log


@pytest.mark.subprocess
def test_own_error_is_failed_with_the_rank_exit_code(tmp_path):
    provider = LocalProvider({})
    code = "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)"
    _, status = run_to_end(provider, request(tmp_path, [sys.executable, "-c", code], procs=2))
    assert status.state is JobState.FAILED and status.exit_code == 3 and "rank 1" in status.reason


def test_graceful_stop_pauses(tmp_path, pausable):
    provider = LocalProvider({})
    req = request(tmp_path, pausable, procs=2, env={"RESUMPTION_INDEX": "0", "FOUNDRY_RUN_DIR": str(tmp_path)})
    handle = provider.launch(provider.dryrun(req))
    wait_for(lambda: len(list(tmp_path.glob("started-0-*"))) == 2)
    provider.stop(handle, graceful=True)
    assert provider.status(handle).state in (JobState.STOPPING, JobState.PAUSED)
    status = wait_for(lambda: (s := provider.status(handle)).state.terminal and s)
    assert status.state is JobState.PAUSED and status.exit_code == 75
    assert any(line.startswith("paused at step") for line in provider.logs(handle, rank=0))


def test_graceful_stop_before_the_ranks_start_pauses_with_nothing_to_restore(tmp_path, pausable):
    provider = LocalProvider({})
    setup = tmp_path / "setup-running"
    req = request(tmp_path, pausable, procs=2, env={"RESUMPTION_INDEX": "0", "FOUNDRY_RUN_DIR": str(tmp_path)},
                  extra={"setup_commands": [f"touch {setup} && sleep 120"]})
    handle = provider.launch(provider.dryrun(req))
    wait_for(setup.exists)
    provider.stop(handle, graceful=True)
    status = wait_for(lambda: (s := provider.status(handle)).state.terminal and s)
    assert status.state is JobState.PAUSED and status.exit_code == 75, status  # resumable, not failed
    assert not list(tmp_path.glob("started-*"))  # no rank ran: a resume starts from the beginning


@pytest.mark.subprocess
def test_secret_files_are_relocated_private(tmp_path):
    provider = LocalProvider({})
    code = "import os; p = os.environ['KUBECONFIG']; print(oct(os.stat(p).st_mode & 0o777), open(p).read())"
    req = request(tmp_path, [sys.executable, "-c", code], env={"KUBECONFIG": "/foundry/secrets/k/kubeconfig"},
                  secret_files=[SecretMount("/foundry/secrets/k/kubeconfig", b"apiVersion: v1")])
    handle, status = run_to_end(provider, req)
    assert status.state is JobState.COMPLETED
    assert list(provider.logs(handle, rank=0)) == ["0o600 apiVersion: v1"]


@pytest.mark.subprocess
def test_follow_streams_until_the_end(tmp_path):
    provider = LocalProvider({})
    code = "import time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.3)"
    handle = provider.launch(provider.dryrun(request(tmp_path, [sys.executable, "-c", code])))
    assert list(provider.logs(handle, follow=True, rank=0)) == ["0", "1", "2"]


@pytest.mark.parametrize("codes, stop, expected", [
    ({0: 0, 1: 0}, False, "completed"),
    ({0: 75, 1: 75}, True, "paused"),
    ({0: 75, 1: -signal.SIGTERM}, True, "paused"),
    ({0: 1, 1: -signal.SIGTERM}, False, "failed"),
    ({0: -signal.SIGKILL, 1: -signal.SIGTERM}, False, "lost"),
    ({0: 0, 1: None}, False, "lost"),
    ({0: -signal.SIGTERM, 1: -signal.SIGTERM}, True, "failed"),
    ({0: -signal.SIGTERM, 1: -signal.SIGTERM}, False, "lost"),
])
def test_classify(codes, stop, expected):
    assert classify(codes, 2, stop)[0] == expected


@pytest.mark.subprocess
def test_job_outlives_the_process_that_launched_it(tmp_path):
    """A launcher started by a short-lived process (the CLI) keeps running after it exits."""
    import subprocess

    code = textwrap.dedent(f"""
        import sys, json
        from foundry.backends.compute.local import LocalProvider
        from foundry.plugins.compute import JobRequest
        p = LocalProvider({{}})
        req = JobRequest(run_name="t", run_id="i", resumption=0, procs_per_node=1, log_dir={str(tmp_path / 'job')!r},
                         command=[sys.executable, "-c", "import time; time.sleep(1.5); print('survived')"])
        h = p.launch(p.dryrun(req))
        print(json.dumps(h.data))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    import json

    from foundry.plugins.compute import JobHandle

    handle = JobHandle("local", "local", "x", json.loads(out))
    provider = LocalProvider({})
    status = wait_for(lambda: (s := provider.status(handle)).state.terminal and s)
    assert status.state is JobState.COMPLETED
    assert list(provider.logs(handle, rank=0)) == ["survived"]
