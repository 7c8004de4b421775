"""The run registry: resumptions and events, compare-and-set transitions, two writers at once,
and a writer killed in the middle of a transaction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from foundry.app.control.registry import Registry


def test_runs_resumptions_events(tmp_path):
    reg = Registry(tmp_path / "r.db")
    run_id = reg.create_run("a", {"name": "a", "command": "x"}, max_retries=1)
    idx = reg.add_resumption(run_id, cluster="local", provider="local", nodes=1, devices=2, cause="create")
    reg.update_resumption(run_id, idx, handle={"provider": "local", "cluster": "local", "job_id": "j", "data": {}}, job_id="j")
    assert reg.transition(run_id, idx, "pending", "running", "running")
    assert not reg.transition(run_id, idx, "pending", "running", "running")  # CAS: already moved
    idx1 = reg.add_resumption(run_id, cluster="hpc", provider="slurm", nodes=1, devices=1, cause="resume",
                              resumed_from="ckpt/ep0-ba10")
    run = reg.get_run("a")
    assert [r.index for r in run.resumptions] == [0, 1] and idx1 == 1
    assert run.resumptions[1].resumed_from == "ckpt/ep0-ba10" and run.cluster == "hpc" and run.devices == 1
    assert [e.event for e in run.events] == ["created", "running"]
    assert reg.handle(run_id, 0)["job_id"] == "j"
    assert reg.delete_run("a") and reg.get_run("a") is None


WRITER = textwrap.dedent("""
    import sys
    from foundry.app.control.registry import Registry
    reg = Registry(sys.argv[1])
    for i in range(int(sys.argv[3])):
        run_id = reg.create_run(f"{sys.argv[2]}-{i}", {"name": "x"}, 0)
        idx = reg.add_resumption(run_id, cluster="local", provider="local", nodes=1, devices=1, cause="create")
        reg.transition(run_id, idx, "pending", "running", "running")
        reg.add_event(run_id, "note", idx, {"i": i})
""")


@pytest.mark.subprocess
def test_two_processes_write_at_once(tmp_path):
    db = tmp_path / "r.db"
    Registry(db)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), name, "40"]) for name in ("p", "q")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    reg = Registry(db)
    runs = reg.list_runs()
    assert len(runs) == 80
    assert all(r.status == "running" and len(r.resumptions) == 1 for r in runs)
    assert all(len(reg.get_run(r.name).events) == 3 for r in runs[:5])
    assert reg.integrity_ok()


KILLED = textwrap.dedent("""
    import sys, time
    from foundry.app.control.registry import Registry
    reg = Registry(sys.argv[1])
    with reg.write() as db:
        db.execute("INSERT INTO runs (id, name, spec, status, created_at, updated_at) VALUES ('x', 'half', '{}', 'pending', 0, 0)")
        db.execute("INSERT INTO events (run_id, time, event) VALUES ('x', 0, 'created')")
        print("in transaction", flush=True)
        time.sleep(60)
""")


@pytest.mark.subprocess
def test_writer_killed_mid_transaction_leaves_no_trace(tmp_path):
    db = tmp_path / "r.db"
    reg = Registry(db, timeout=5)
    reg.create_run("before", {"name": "before"}, 0)
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(db)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "in transaction"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert reg.get_run("half") is None
    assert [r.name for r in reg.list_runs()] == ["before"]
    reg.create_run("after", {"name": "after"}, 0)  # the lock died with the writer
    assert reg.integrity_ok()


def test_a_registry_from_before_launch_intents_opens_and_settles_the_old_way(tmp_path):
    """Databases written before the launch_intent column get it; their rows have no intent, so a
    handle-less resumption is settled after the grace period as before."""
    import sqlite3

    from foundry.app.control.registry import SCHEMA

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA.replace("    launch_intent TEXT,\n", ""))
        assert "launch_intent" not in {r[1] for r in db.execute("PRAGMA table_info(resumptions)")}
    reg = Registry(path)
    run_id = reg.create_run("old", {"name": "old", "command": "x"}, 0)
    idx = reg.add_resumption(run_id, cluster="local", provider="local", nodes=1, devices=1, cause="create")
    assert reg.launch_intent(run_id, idx) is None
    reg.update_resumption(run_id, idx, launch_intent={"stage": "planning"})
    assert reg.launch_intent(run_id, idx) == {"stage": "planning"}
    assert reg.adopt_handle(run_id, idx, {"job_id": "j"}, "j") and not reg.adopt_handle(run_id, idx, {}, "k")
