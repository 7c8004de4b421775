"""Issue 34.5 in the CLI: `describe cluster|secret` (secret values masked); resuming a completed
run, stopping a stopped one and deleting a running one say what happened and what to do; Ctrl-C
means "stop watching" in both `run --follow` and `logs --follow` (the run goes on)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from support.control import wait_for

CLI = "import sys; from foundry.app.cli.main import main; sys.argv[0] = 'foundry'; main()"


def _spec(tmp_path, name: str, command: list[str]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ncommand: {command!r}\n".replace("'", '"'))
    return str(path)


def test_describe_secret_masks_values(cli, cp):
    cp.create_secret("r2", "s3", {"access_key_id": "AKIADESCRIBEME000", "secret_access_key": "never-shown-secret",
                                  "endpoint": "https://acct.r2.cloudflarestorage.com"})
    code, out, err = cli("describe", "secret", "r2")
    assert code == 0, err
    assert "never-shown-secret" not in out + err and "AKIADESCRIBEME000" not in out + err
    assert "https://acct.r2.cloudflarestorage.com" in out and "*** (hidden)" in out
    assert "AWS_SECRET_ACCESS_KEY" in out and "S3_ENDPOINT_URL" in out
    code, _, err = cli("describe", "secret", "nope")
    assert code == 2 and "no secret named 'nope'" in err


@pytest.mark.slow
def test_describe_cluster_and_state_errors(cli, cp, tmp_path):
    assert cli("create", "cluster", "box", "--provider", "local")[0] == 0
    assert cli("run", "-f", _spec(tmp_path, "done", ["true"]), "--cluster", "box", "--follow")[0] == 0
    code, out, err = cli("describe", "cluster", "box")
    assert code == 0, err
    assert "provider" in out and "local" in out and "done" in out and "completed" in out

    code, _, err = cli("resume", "done")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 2, err
    assert lines[0].startswith("error: run 'done' has completed, nothing is left to resume")
    assert lines[1].startswith("  hint: a new run (`foundry run -f SPEC --name NEW`) starts over")
    code, _, err = cli("stop", "done")
    assert code == 2 and "run 'done' has completed: there is nothing to stop" in err and "hint:" in err

    assert cli("run", "-f", _spec(tmp_path, "nap", ["sleep", "60"]))[0] == 0
    wait_for(lambda: cp.get_run("nap").status == "running", timeout=60)
    code, _, err = cli("resume", "nap")
    assert code == 2 and "run 'nap' is running" in err and "`foundry stop nap --wait` pauses it" in err
    assert cli("stop", "nap", "--force", "--wait")[0] == 0
    code, _, err = cli("stop", "nap")
    assert code == 2 and "there is nothing to stop" in err and "hint:" in err

    assert cli("run", "-f", _spec(tmp_path, "live", ["sleep", "60"]))[0] == 0
    wait_for(lambda: cp.get_run("live").status == "running", timeout=60)
    code, _, err = cli("delete", "run", "live")
    assert code == 0, err
    assert "deleted run live" in err and "it was running: killed without a last checkpoint" in err


# Ctrl-C as at a terminal: SIGINT at its default. A test run started from a script in the background
# (`cmd &` without job control) ignores SIGINT, every process below it inherits that, and Python keeps
# an inherited SIG_IGN: the CLI would never see the Ctrl-C and follow the run to its end.
INTERRUPTIBLE_CLI = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); " + CLI


def _interrupted(args: list[str], wait_for_text: str, stream: str = "stderr",
                 after: float = 0.5) -> tuple[int, str]:
    """`foundry ARGS` in its own process, Ctrl-C (SIGINT) `after` seconds once `wait_for_text` is on
    `stream`; (exit code, stderr)."""
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE_CLI, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ))
    seen = ""
    watched = getattr(proc, stream)
    deadline = time.monotonic() + 120
    while wait_for_text not in seen and time.monotonic() < deadline and proc.poll() is None:
        if select.select([watched], [], [], 0.1)[0]:  # as soon as it is written (after=0: at once)
            seen += os.read(watched.fileno(), 65536).decode()
    assert wait_for_text in seen, seen
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, (seen if stream == "stderr" else "") + err.decode()


@pytest.mark.slow
def test_ctrl_c_stops_watching_in_run_and_logs_follow(cp, tmp_path):
    # at once: a Ctrl-C just after "following logs" appeared used to exit 130 without a word
    code, err = _interrupted(["run", "-f", _spec(tmp_path, "watched", ["sleep", "60"]), "--follow"],
                             "following logs", after=0)
    assert code == 130
    assert "stopped watching run watched; it goes on" in err and "Traceback" not in err
    assert cp.get_run("watched").status in ("pending", "running")
    code, err = _interrupted(["logs", "watched", "--follow"], "starting torchrun", stream="stdout")
    assert code == 130
    assert err.strip().splitlines()[-1].startswith("stopped watching run watched; it goes on")
    assert cp.get_run("watched").status == "running"
