"""describe run shows the recovery ledger and goodput, in text and --json, from the job's metrics rows."""

from __future__ import annotations

import json
import sys

import pytest

# The job logs three steps as the trainer does (step, time, resumption), a tenth of a second apart.
JOB = """
import json, os, time
with open(os.environ["FOUNDRY_METRICS_FILE"], "a") as fh:
    for step in (1, 2, 3):
        time.sleep(0.1)
        fh.write(json.dumps({"step": step, "loss": 1.0, "throughput": 10.0, "time": time.time(),
                             "resumption": int(os.environ["RESUMPTION_INDEX"])}) + "\\n")
"""


@pytest.mark.subprocess
def test_describe_run_shows_goodput(cli, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps({"name": "counted", "command": [sys.executable, "-c", JOB]}))
    assert cli("run", "-f", str(path), "--follow")[0] == 0
    described = json.loads(cli("--json", "describe", "run", "counted")[1])
    recovery = described["recovery"]
    [entry] = recovery["entries"]
    assert entry["ended"] == "completed" and entry["steps"] == [1, 3] and entry["steps_redone"] is None
    assert 0 < recovery["useful_s"] <= recovery["wall_s"] and 0 < recovery["goodput"] <= 1
    assert "on steps that counted of" in cli("describe", "run", "counted")[1]
