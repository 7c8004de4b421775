"""The slurm provider's ssh mode (`ssh_host`): every command and file operation goes through
`ssh -o BatchMode=yes HOST -- CMD`. A FAKE `ssh` on PATH runs the remote command locally, so the
quoting and the file round trips are real; no ssh server is involved."""

from __future__ import annotations

import os
import stat

import pytest

from foundry.backends.compute.slurm.commands import SlurmCLI
from foundry.plugins.errors import ProviderError

FAKE_SSH = """#!/bin/bash
# fake ssh: ssh -o BatchMode=yes HOST -- COMMAND  ->  runs COMMAND here
echo "$3" >> "$(dirname "$0")/hosts"
shift 4
exec bash -c "$1"
"""


@pytest.fixture
def ssh_cli(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(FAKE_SSH)
    (bin_dir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return SlurmCLI(ssh_host="login.example"), bin_dir


def test_files_round_trip_over_ssh_with_modes(ssh_cli, tmp_path):
    cli, bin_dir = ssh_cli
    path = str(tmp_path / "job dir" / "secrets" / "it's.json")
    cli.make_dirs(str(tmp_path / "job dir"))
    cli.write_file(path, b"secret\nvalue", mode=0o600)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert cli.read_file(path) == b"secret\nvalue"
    assert cli.read_file(path, offset=7) == b"value"
    assert cli.exists(path) and not cli.exists(path + ".missing")
    assert cli.read_file(path + ".missing") is None
    assert set((bin_dir / "hosts").read_text().split()) == {"login.example"}


def test_remote_arguments_keep_their_quoting(ssh_cli):
    cli, _ = ssh_cli
    assert cli.text(["printf", "%s|", "a b", "$HOME", "it's"]) == "a b|$HOME|it's|"
    with pytest.raises(ProviderError, match="failed"):
        cli.run(["false"])
