"""`scheduling.prefer: first`: a run that failed over goes back to its first placement at the next
resume without --cluster (when that one can take it now); without the policy it stays where it ran."""

from __future__ import annotations

import json

import pytest

from support.control import wait_for


def spec_file(tmp_path, name, prefer):
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, "command": "sleep 600",
                                "compute": [{"cluster": "box", "gpus": 1}, {"cluster": "local", "gpus": 2}],
                                "scheduling": {"prefer": prefer}}))
    return str(path)


def placements(cli, name):
    run = json.loads(cli("--json", "describe", "run", name)[1])
    return [(r["cluster"], r["devices"], r["placed_because"]) for r in run["resumptions"]]


@pytest.mark.subprocess
@pytest.mark.parametrize("prefer, back", [("first", ("box", 1)), ("current", ("local", 2))])
def test_resume_after_a_failover(cli, cp, tmp_path, prefer, back):
    assert cli("create", "cluster", "box", "--provider", "local")[0] == 0
    name = f"pref-{prefer}"
    assert cli("run", "-f", spec_file(tmp_path, name, prefer))[0] == 0
    try:
        for step in (("local", "--gpus", "2"), None):   # on the fallback (as a failover leaves it), then back
            wait_for(lambda: cp.get_run(name).status == "running", 60, what="running")
            assert cli("stop", name, "--wait")[0] == 0
            args = ["--cluster", *step] if step else []
            assert cli("resume", name, *args)[0] == 0
        wait_for(lambda: cp.get_run(name).status == "running", 60, what="running")
        *_, last = placements(cli, name)
        assert last[:2] == back
        assert (last[2] or "").startswith("prefer: first") == (prefer == "first")
    finally:
        cli("stop", name, "--wait")
