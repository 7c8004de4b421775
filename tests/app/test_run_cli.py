"""The run verbs end to end through the CLI: run (dry run, follow), get/describe, logs, stop -> paused,
resume elsewhere with another device count, delete; clusters; exit codes and one-line errors."""

from __future__ import annotations

import json
import sys

import pytest

from support.control import wait_for


def spec_file(tmp_path, **spec):
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(spec))
    return str(path)


def test_dry_run_prints_normalized_legacy_spec_and_plan(cli, tmp_path):
    path = tmp_path / "legacy.yaml"
    path.write_text("run_name: legacy\ngpu_num: 2\ncluster: local\ncommand: echo hi\n")
    code, out, _ = cli("run", "-f", str(path), "--dry-run", "--name", "renamed")
    assert code == 0
    assert "name: renamed" in out and "gpus: 2" in out and "run_name" not in out
    assert "--nproc_per_node=2" in out
    code, out, _ = cli("--json", "run", "-f", str(path), "--dry-run", "--gpus", "1")
    plan = json.loads(out)
    assert plan["spec"]["compute"]["gpus"] == 1 and plan["provider"] == "local"
    assert plan["env"]["RUN_NAME"] == "legacy" and "RESUMPTION_INDEX" in plan["env"]
    assert cli("get", "runs")[1].strip().startswith("NAME")  # nothing was launched


def test_errors_are_one_line_with_exit_codes(cli, tmp_path):
    code, out, err = cli("run", "-f", spec_file(tmp_path, name="x", command="y", compute={"gpus": -1}))
    assert code == 2 and "run.yaml: compute.gpus: must be greater than or equal to 0" in err
    assert "Traceback" not in err
    code, _, err = cli("run", "-f", spec_file(tmp_path, name="x", command="y", compute={"cluster": "nowhere"}))
    assert code == 2 and "unknown cluster 'nowhere'" in err and "hint:" in err
    code, _, err = cli("describe", "run", "ghost")
    assert code == 2 and "no run named 'ghost'" in err
    code, _, err = cli("run", "-f", spec_file(tmp_path, name="x", command="y", secrets=["missing"]))
    assert code == 2 and "missing" in err


@pytest.mark.subprocess
def test_follow_failed_run_exits_1(cli, tmp_path):
    code, out, err = cli("run", "-f", spec_file(tmp_path, name="boom", command=[sys.executable, "-c", "print('bye'); raise SystemExit(4)"]), "--follow")
    assert code == 1 and "[rank 0] bye" in out and "run boom failed" in err


def test_pause_resume_lifecycle(cli, tmp_path, pausable, cp):
    path = spec_file(tmp_path, name="life", command=pausable, compute={"gpus": 2})
    code, out, _ = cli("run", "-f", path)
    assert code == 0 and out.strip() == "life"
    wait_for(lambda: len(list(cp.paths.run_dir("life").glob("started-0-*"))) == 2)
    rows = json.loads(cli("--json", "get", "runs")[1])
    assert rows[0]["name"] == "life" and rows[0]["status"] == "running"
    code, _, err = cli("stop", "life", "--wait")
    assert code == 0 and "paused" in err
    assert "[rank 1] paused at step" in cli("logs", "life")[1]
    assert cli("logs", "life", "--rank", "0")[1].startswith("start rank=0 resumption=0")
    code, _, err = cli("resume", "life", "--gpus", "1")
    assert code == 0 and "resumption 1" in err
    wait_for(lambda: (cp.paths.run_dir("life") / "started-1-0").exists())
    assert cli("stop", "life", "--wait")[0] == 0
    described = json.loads(cli("--json", "describe", "run", "life")[1])
    assert [(r["index"], r["devices"], r["state"], r["cause"]) for r in described["resumptions"]] == [
        (0, 2, "paused", "create"), (1, 1, "paused", "resume")]
    events = [e["event"] for e in described["events"]]
    assert events[:2] == ["created", "launched"] and "resumed" in events and events.count("paused") == 2
    assert "resumption=1" in cli("logs", "life", "--resumption", "1", "--rank", "0")[1]
    assert "resumption=0" in cli("logs", "life", "--resumption", "0", "--rank", "0")[1]
    table = cli("describe", "run", "life")[1]
    assert "Resumptions" in table and "Events" in table
    assert cli("delete", "run", "life", "--yes")[0] == 0
    assert not cp.paths.run_dir("life").exists()
    assert json.loads(cli("--json", "get", "runs")[1]) == []


def test_clusters(cli):
    code, out, _ = cli("get", "clusters")
    assert code == 0 and "local" in out and "ready" in out
    assert cli("create", "cluster", "box", "--provider", "local", "-o", "workdir=/tmp")[0] == 0
    rows = json.loads(cli("--json", "get", "clusters")[1])
    assert {r["name"]: r["provider"] for r in rows} == {"local": "local", "box": "local"}
    code, _, err = cli("create", "cluster", "bad", "--provider", "nope")
    assert code == 2 and "unknown provider 'nope'" in err
    assert cli("delete", "cluster", "box")[0] == 0


def test_a_plan_beyond_the_cluster_records_no_run(cli, tmp_path, cp):
    # refused before the provider plans it (usage error, exit 2); the provider's own check is below it
    code, _, err = cli("run", "-f", spec_file(tmp_path, name="wide", command="true", compute={"gpus": 4, "nodes": 2}))
    assert code == 2 and "cluster 'local' runs on one node (asked for 2)" in err
    assert cp.list_runs() == []


@pytest.mark.subprocess
def test_describe_run_shows_tokens_and_mfu(cli, tmp_path, cp):
    path = spec_file(tmp_path, name="gpu-run", command=[sys.executable, "-c", "pass"])
    assert cli("run", "-f", path, "--follow")[0] == 0
    rows = [{"step": 1, "loss": 3.2, "throughput": 2.0, "tokens_per_sec": 250000.0, "mfu": 0.41},
            {"step": 2, "loss": 3.1, "throughput": 2.0, "tokens_per_sec": 251000.0, "mfu": 0.412}]
    (cp.paths.run_dir("gpu-run") / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "progress: step 2, loss 3.1, 251,000 tokens/s, MFU 41.2%" in cli("describe", "run", "gpu-run")[1]
    progress = json.loads(cli("--json", "describe", "run", "gpu-run")[1])["progress"]
    assert progress["mfu"] == 0.412 and progress["tokens_per_sec"] == 251000.0
