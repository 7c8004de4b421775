"""Issue 34.2: one credential path. `foundry create secret s3` offers what the environment holds
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, S3_ENDPOINT_URL): shown masked and confirmed at a
terminal, taken as they are with --from-env in a script; and a script writes to a private bucket
with a stored secret (`examples/move-run/data.py --secret`, `foundry.app.sdk.use_secret`)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEYS = {"AWS_ACCESS_KEY_ID": "AKIAFROMENVIRONMENT1", "AWS_SECRET_ACCESS_KEY": "sEcReT/from+the/environment0",
        "S3_ENDPOINT_URL": "https://acct.r2.cloudflarestorage.com"}


def test_from_env_takes_the_exported_keys_in_a_script(cli, cp, monkeypatch):
    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    code, out, err = cli("create", "secret", "s3", "r2", "--from-env")
    assert code == 0, err
    assert cp.secrets.injection("r2").env == KEYS
    assert KEYS["AWS_SECRET_ACCESS_KEY"] not in out + err and KEYS["AWS_ACCESS_KEY_ID"] not in out + err
    # an option given on the command line wins over the environment
    code, _, err = cli("create", "secret", "s3", "other", "--from-env", "--endpoint", "http://127.0.0.1:9")
    assert code == 0, err
    assert cp.secrets.injection("other").env["S3_ENDPOINT_URL"] == "http://127.0.0.1:9"


def test_a_script_without_keys_is_told_about_from_env(cli, monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    code, _, err = cli("create", "secret", "s3", "r2")
    assert code == 2
    assert "export AWS_ACCESS_KEY_ID and give --from-env" in err


def _at_a_terminal(args: list[str], answer: bytes, env: dict) -> tuple[int, str]:
    """`foundry ARGS` on a pseudo-terminal, typing `answer` when asked; (exit code, what it showed)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(sys.executable, [sys.executable, "-c", "from foundry.app.cli.main import main; main()", *args], env)
    shown, sent = b"", False
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
        if not sent and b"use these?" in shown:
            os.write(fd, answer)
            sent = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


@pytest.mark.slow
def test_at_a_terminal_the_environment_is_offered_masked_and_confirmed(cp):
    env = dict(os.environ) | KEYS
    code, shown = _at_a_terminal(["create", "secret", "s3", "r2"], b"y\n", env)
    assert code == 0, shown
    assert "AWS_ACCESS_KEY_ID" in shown and "AWS_SECRET_ACCESS_KEY" in shown and "S3_ENDPOINT_URL" in shown
    assert "set, 28 characters, hidden" in shown                        # the secret key, by its length only
    assert KEYS["AWS_SECRET_ACCESS_KEY"] not in shown and KEYS["AWS_ACCESS_KEY_ID"] not in shown
    assert KEYS["S3_ENDPOINT_URL"] in shown                             # not a secret: shown as is
    assert "created s3 secret r2" in shown
    assert cp.secrets.injection("r2").env == KEYS


@pytest.mark.slow
@pytest.mark.integration
def test_the_data_script_writes_to_a_private_bucket_with_a_stored_secret(cli, cp, s3_server, tmp_path):
    bucket = s3_server.create_bucket()
    cp.create_secret("sw", "s3", {"access_key_id": s3_server.access_key, "secret_access_key": s3_server.secret_key,
                                  "endpoint": s3_server.endpoint, "region": s3_server.region})
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "S3_ENDPOINT_URL"}
    env |= {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent", "TMPDIR": str(tmp_path)}
    script = [sys.executable, str(REPO / "examples" / "move-run" / "data.py"), f"s3://{bucket}/data", "--samples", "40"]
    without = subprocess.run(script, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert without.returncode != 0   # no keys in the environment: nothing written
    done = subprocess.run(script + ["--secret", "sw"], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert "data/index.json" in keys
    assert s3_server.secret_key not in done.stdout + done.stderr
