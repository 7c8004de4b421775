"""CLI kill probes (issue 15 item 3): `foundry run` SIGKILLed at every moment of a launch, on the
local provider and on a real Slurm. After each kill the next command that touches the run settles it:
the job is adopted (and `foundry stop` ends it) or it provably never runs (and `resume` starts
exactly one copy). No job process outlives the probe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support.control import wait_for as _wait_for

from foundry.plugins.errors import ConfigError

HERE = Path(__file__).parent
POINTS = ["after-create", "before-launch", "in-launch", "after-launch", "after-record", "none"]

# The job: records its pid (per resumption) and runs until stopped.
JOB = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(75))
    mark = os.path.join(os.environ["MARKS"], f"{os.environ['RESUMPTION_INDEX']}-{os.getpid()}")
    open(mark, "w").close()
    time.sleep(300)
""")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def job_pids(marks: Path, resumption: int | None = None) -> list[int]:
    return [int(p.name.split("-")[1]) for p in marks.iterdir()
            if resumption is None or p.name.startswith(f"{resumption}-")]


def live_jobs(marks: Path) -> list[int]:
    return [pid for pid in job_pids(marks) if alive(pid)]


def wait_for(predicate, timeout: float = 60.0, poll: float = 0.2, what: str = "condition"):
    return _wait_for(predicate, timeout, poll, what)


def killed_run(tmp_path: Path, point: str, cluster: str, name: str) -> tuple[Path, subprocess.CompletedProcess]:
    marks = tmp_path / f"marks-{name}"
    marks.mkdir()
    job = tmp_path / "job.py"
    job.write_text(JOB)
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"name: {name}\ncommand: [{sys.executable!r}, {str(job)!r}]\n"
                    f"env_variables: {{MARKS: {str(marks)!r}}}\ncompute: {{cluster: {cluster}, gpus: 1}}\n")
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import kill_points; kill_points.main()"
    proc = subprocess.run([sys.executable, "-c", code, point, "run", "-f", str(spec)], capture_output=True,
                          timeout=120, env=dict(os.environ), cwd=tmp_path)
    return marks, proc


def settle(cp, name: str):
    """What the next command sees: reconcile until the run is no longer an unlaunched 'pending'."""
    def settled():
        run = cp.get_run(name)
        handle = cp.registry.handle(run.id, run.latest.index)
        return run if handle is not None or run.status not in ("pending",) else None
    return wait_for(settled, 60, what=f"run {name} settled")


def probe(cp, tmp_path: Path, point: str, cluster: str) -> str:
    name = f"kill-{cluster}-{point}".replace("_", "-")
    marks, proc = killed_run(tmp_path, point, cluster, name)
    if point == "none":
        assert proc.returncode == 0, proc.stderr.decode()
    else:
        assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    run = settle(cp, name)
    outcome = run.status
    if run.status == "failed":   # abandoned: it must never start, and resume starts exactly one copy
        assert "launch was interrupted" in (run.latest.exit_reason or ""), run.latest
        if point not in ("after-create", "before-launch"):   # nothing was started before those
            time.sleep(3)        # a launcher Popen'd just before the kill would have started by now
        assert live_jobs(marks) == [], "an abandoned launch is running"
        run = cp.resume_run(name)
        idx = run.latest.index
        wait_for(lambda: job_pids(marks, idx), 90, what="the resumed job started")
    else:                        # adopted (or launched): stop reaches it, resume refuses a second copy
        assert run.status in ("pending", "running"), run.status
        wait_for(lambda: job_pids(marks, run.latest.index), 90, what="the adopted job started")
        with pytest.raises(ConfigError, match="only paused, stopped, failed, lost runs can be resumed"):
            cp.resume_run(name)
    assert len(live_jobs(marks)) == 1, f"expected one live copy, found {live_jobs(marks)}"
    cp.stop_run(name, graceful=False)
    final = cp.wait(name, timeout=90)
    assert final.status in ("stopped", "lost", "failed", "paused"), final.status  # scancel: SIGTERM first
    wait_for(lambda: live_jobs(marks) == [], 30, what="every job process ended")
    return outcome


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_kill_the_cli_during_a_local_launch(cp, tmp_path, point):
    outcome = probe(cp, tmp_path, point, "local")
    expected = {"after-create": "failed", "before-launch": "failed"}.get(point)
    if expected:
        assert outcome == expected


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("point", [p for p in POINTS if p != "none"])   # the local control run suffices
def test_kill_the_cli_during_a_slurm_launch(cp, tmp_path, slurm_cluster, point):
    config = slurm_cluster.provider_config(tmp_path / "slurm-jobs")
    config.pop("name"), config.pop("provider")
    cp.create_cluster("hpc", "slurm", config)
    outcome = probe(cp, tmp_path, point, "hpc")
    if point in ("after-create", "before-launch"):
        assert outcome == "failed"
    if point in ("after-launch", "after-record", "in-launch"):
        assert outcome != "failed"   # sbatch took it: it is adopted, never abandoned


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.7, 1.4, 2.1])
def test_kill_the_cli_at_arbitrary_moments(cp, tmp_path, delay):
    """No patching: a plain `foundry run` SIGKILLed after `delay` seconds, wherever it is then."""
    name = f"sweep-{int(delay * 10)}"
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "job.py").write_text(JOB)
    spec = tmp_path / "run.yaml"
    spec.write_text(f"name: {name}\ncommand: [{sys.executable!r}, {str(tmp_path / 'job.py')!r}]\n"
                    f"env_variables: {{MARKS: {str(marks)!r}}}\n")
    code = "import sys; from foundry.app.cli.main import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "-f", str(spec)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if cp.registry.get_run(name) is None:
        return                   # killed before it recorded anything: nothing to settle, nothing runs
    run = settle(cp, name)
    if run.status == "failed":
        run = cp.resume_run(name)
    wait_for(lambda: job_pids(marks, run.latest.index), 90, what="the job started")
    assert len(live_jobs(marks)) == 1
    cp.stop_run(name, graceful=False)
    cp.wait(name, timeout=90)
    wait_for(lambda: live_jobs(marks) == [], 30, what="every job process ended")


@pytest.mark.integration
def test_a_slurm_job_submitted_after_its_launch_was_abandoned_never_runs(slurm_cluster, tmp_path):
    from foundry.backends.compute.slurm.provider import SlurmProvider
    from foundry.plugins.compute import JobRequest, JobState

    provider = SlurmProvider(slurm_cluster.provider_config(tmp_path / "jobs"))
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "job.py").write_text(JOB)
    plan = provider.dryrun(JobRequest(run_name="late", run_id="r1", resumption=0,
                                      command=[sys.executable, str(tmp_path / "job.py")], env={"MARKS": str(marks)}))
    intent = provider.launch_intent(plan)
    Path(intent["job_dir"]).mkdir(parents=True)
    assert provider.reclaim(intent) is None          # nothing queued, nothing ran: claimed "abandoned"
    handle = provider.launch(plan)                   # the sbatch that was still in flight
    wait_for(lambda: provider.status(handle).state.terminal, 60, what="the late job ended")
    out = "\n".join(provider.logs(handle))
    assert "abandoned by the control plane; not running" in out and job_pids(marks) == []
    assert provider.status(handle).state is JobState.COMPLETED


@pytest.mark.slow
def test_a_launch_that_raises_after_starting_its_job_adopts_it(cp, tmp_path, monkeypatch):
    """provider.launch raising half-way (an sbatch that timed out after submitting): the job is found
    and adopted, not left running behind a 'failed' run."""
    from foundry.backends.compute.local import LocalProvider
    from foundry.plugins.errors import ProviderError

    real_launch = LocalProvider.launch

    def launch_then_fail(self, plan):
        real_launch(self, plan)
        raise ProviderError("the launcher's answer was lost")

    monkeypatch.setattr(LocalProvider, "launch", launch_then_fail)
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "job.py").write_text(JOB)
    run = cp.create_run({"name": "half", "command": [sys.executable, str(tmp_path / "job.py")],
                         "env_variables": {"MARKS": str(marks)}})
    assert run.status in ("pending", "running") and run.latest.job_id
    wait_for(lambda: job_pids(marks), 90, what="the adopted job started")
    cp.stop_run("half", graceful=False)
    cp.wait("half", timeout=90)
    wait_for(lambda: live_jobs(marks) == [], 30, what="every job process ended")
