"""Launching is one compare-and-set: "decide to launch" and "record the new resumption" happen in one
registry transaction, so racing launchers (two people, a script that retries, the watchdog) start a
run once. The same holds for secrets: of concurrent creates with one name, one wins and its value
stays. The racing tests start real CLI processes, released together from a barrier."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from support.control import wait_for

# A `foundry ARGS...` process that imports everything first, says it is ready, then waits for `go`:
# the racers reach the registry within milliseconds of each other, not a second apart.
RACER = textwrap.dedent("""
    import os, sys, time
    from foundry.app.cli.main import main
    import foundry.app.control  # noqa: F401 - imported before the start line, not after
    ready, go = sys.argv[1], sys.argv[2]
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    if sys.argv[3] == "--sdk-move":   # the SDK's move (the TUI's `m`): pause, wait, resume elsewhere
        from foundry.app.control import ControlPlane
        from foundry.plugins.errors import FoundryError
        try:
            ControlPlane().runs.move(sys.argv[4], gpus=int(sys.argv[5]), timeout=90)
        except FoundryError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            sys.exit(exc.exit_code)
        sys.exit(0)
    main(sys.argv[3:])
""")


def race(tmp_path, argvs: list[list[str]], tag: str) -> list[subprocess.CompletedProcess]:
    """Run each argv as a `foundry` process, all released at once; their results, in order."""
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    gate = tmp_path / f"gate-{tag}"
    gate.mkdir()
    go = gate / "go"
    procs = [subprocess.Popen([sys.executable, str(script), str(gate / f"ready-{i}"), str(go), *argv],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ), cwd=tmp_path)
             for i, argv in enumerate(argvs)]
    try:
        wait_for(lambda: len(list(gate.glob("ready-*"))) == len(argvs), 120, what="every racer ready")
        go.touch()
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [subprocess.CompletedProcess(p.args, p.returncode, o.decode(), e.decode()) for p, (o, e) in zip(procs, outs)]


def started_jobs(cp, name: str) -> list[str]:
    """The jobs that really started (each rank of each job touches its own marker), not the registry."""
    return sorted(p.name for p in cp.paths.run_dir(name).glob("started-*"))


def test_second_launch_decided_on_the_same_resumption_is_refused(tmp_path):
    from foundry.app.control.registry import LaunchConflict, Registry

    reg = Registry(tmp_path / "registry.db")
    fields = dict(cluster="local", provider="local", nodes=1, devices=1, cause="resume")
    run_id = reg.create_run("cas", {"name": "cas"}, 0, first={**fields, "cause": "create"})
    reg.transition(run_id, 0, "pending", "paused")
    assert reg.add_resumption(run_id, after=0, states=("paused",), **fields) == 1
    with pytest.raises(LaunchConflict, match="run 'cas' was launched by another command meanwhile: its "
                                             "resumption 1 \\(resume\\) is pending"):
        reg.add_resumption(run_id, after=0, states=("paused",), **fields)
    reg.transition(run_id, 1, "pending", "running")
    with pytest.raises(LaunchConflict):   # the latest, but not in a state that may be launched from
        reg.add_resumption(run_id, after=1, states=("paused",), **fields)
    assert [r.index for r in reg.get_run("cas").resumptions] == [0, 1]


@pytest.mark.slow
def test_racing_resumes_launch_once(cp, pausable, tmp_path):
    """Six `foundry resume` processes at the same instant on a paused run, five rounds: each round
    exactly one launches (exit 0) and starts one job; the others exit 2 with one line that says the
    run is already launched."""
    racers, rounds = 6, 5
    cp.create_run({"name": "raced", "command": pausable})
    for rnd in range(rounds):
        wait_for(lambda: len(started_jobs(cp, "raced")) == rnd + 1, 90, what=f"round {rnd}: the job started")
        cp.stop_run("raced", graceful=True)
        assert cp.wait("raced", timeout=90).status == "paused"
        results = race(tmp_path, [["resume", "raced"]] * racers, tag=str(rnd))
        codes = sorted(r.returncode for r in results)
        assert codes == [0] + [2] * (racers - 1), [(r.returncode, r.stderr) for r in results]
        for r in results:
            assert "Traceback" not in r.stderr
            if r.returncode:
                first = r.stderr.strip().splitlines()[0]
                assert "raced" in first and ("launched by another command" in first or "can be resumed" in first), first
        run = cp.get_run("raced")
        assert len(run.resumptions) == rnd + 2 and run.latest.cause == "resume"
        wait_for(lambda: len(started_jobs(cp, "raced")) == rnd + 2, 90, what=f"round {rnd}: the winner's job")
    time.sleep(2)  # a second launch (there is none) would have started its job by now
    assert started_jobs(cp, "raced") == [f"started-{i}-0" for i in range(rounds + 1)]


@pytest.mark.slow
def test_racing_secret_creates_keep_one_value(cp, tmp_path):
    """Twenty `create secret` processes with one name: exactly one says created, the others are
    refused (exit 2), and the stored value is the winner's, not one silently written over it."""
    racers = 20
    argvs = []
    for i in range(racers):
        value = tmp_path / f"value-{i}"
        value.write_text(f"value-of-racer-{i}")
        argvs.append(["create", "secret", "env", "raced", "--key", "TOKEN", "--from-file", str(value)])
    results = race(tmp_path, argvs, tag="secrets")
    winners = [i for i, r in enumerate(results) if r.returncode == 0]
    assert len(winners) == 1, [(r.returncode, r.stderr) for r in results]
    assert sorted(r.returncode for r in results) == [0] + [2] * (racers - 1)
    assert all("a secret named 'raced' already exists" in r.stderr for r in results if r.returncode)
    assert "created env secret raced" in results[winners[0]].stderr
    assert cp.secrets.injection("raced").env == {"TOKEN": f"value-of-racer-{winners[0]}"}
    assert [p.name for p in cp.paths.secrets_dir.glob("*.json")] == ["raced.json"]


@pytest.mark.slow
def test_racing_watchdogs_and_resumes_relaunch_a_lost_run_once(cp, pausable, tmp_path):
    """A run lost with a retry left, three `foundry watch --once` and three `foundry resume` at the
    same instant: one of the six relaunches it (the watchdog's retry or a person's resume), once:
    one new resumption, one new job."""
    cp.create_run({"name": "lost-raced", "command": pausable, "scheduling": {"max_retries": 1}})
    wait_for(lambda: started_jobs(cp, "lost-raced"), 90, what="the job started")
    pid_file = cp.paths.resumption_dir("lost-raced", 0) / "ranks" / "rank-0.pid"
    # the job's marker can come before its wrapper has recorded the pid (seen once in CI)
    wait_for(lambda: pid_file.exists() and pid_file.read_text().split(), 30, what="the rank's recorded pid")
    os.kill(int(pid_file.read_text().split()[0]), 9)
    wait_for(lambda: (cp.paths.resumption_dir("lost-raced", 0) / "exit.json").exists(), 60, what="the job's end")
    results = race(tmp_path, [["watch", "--once"]] * 3 + [["resume", "lost-raced"]] * 3, tag="lost")
    retried = [r for r in results[:3] if "lost-raced: retried as resumption 1" in r.stderr]
    resumed = [r for r in results[3:] if r.returncode == 0]
    # (a resume's own watchdog pass may be the one that retries it: then no racer says so)
    assert len(retried) + len(resumed) <= 1, [(r.returncode, r.stderr) for r in results]
    assert all(r.returncode == 0 for r in results[:3]) and all(r.returncode in (0, 2) for r in results[3:])
    run = cp.get_run("lost-raced")
    assert [r.state for r in run.resumptions][0] == "lost" and len(run.resumptions) == 2
    wait_for(lambda: "started-1-0" in started_jobs(cp, "lost-raced"), 90, what="the relaunched job")
    time.sleep(2)
    assert started_jobs(cp, "lost-raced") == ["started-0-0", "started-1-0"]


@pytest.mark.slow
def test_racing_creates_and_moves_launch_once(cp, pausable, tmp_path):
    """Four `foundry run -f` of one spec at once: one run, one job. Then three SDK moves of it at
    once (pause, wait, resume with 2 processes): it pauses once and one move resumes it; the other
    moves are refused, and no second copy starts."""
    spec = tmp_path / "run.yaml"
    spec.write_text(f"name: made-once\ncommand: {pausable!r}\n")
    results = race(tmp_path, [["run", "-f", str(spec)]] * 4, tag="create")
    assert sorted(r.returncode for r in results) == [0, 2, 2, 2], [(r.returncode, r.stderr) for r in results]
    assert all("a run named 'made-once' already exists" in r.stderr for r in results if r.returncode)
    wait_for(lambda: started_jobs(cp, "made-once") == ["started-0-0"], 90, what="the one job")
    wait_for(lambda: cp.get_run("made-once").status == "running", 60, what="running")
    results = race(tmp_path, [["--sdk-move", "made-once", "2"]] * 3, tag="move")
    assert sorted(r.returncode for r in results) == [0, 2, 2], [(r.returncode, r.stderr) for r in results]
    run = cp.get_run("made-once")
    assert [(r.index, r.devices) for r in run.resumptions] == [(0, 1), (1, 2)]
    wait_for(lambda: len(started_jobs(cp, "made-once")) == 3, 90, what="the moved job's two ranks")
    time.sleep(2)
    assert started_jobs(cp, "made-once") == ["started-0-0", "started-1-0", "started-1-1"]
