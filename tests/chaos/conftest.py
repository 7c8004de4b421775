"""Fixtures for the chaos probes: the CLI in-process and as a real process, a ControlPlane, and
every test in this folder marked `chaos` by tests/conftest.py (`-m chaos` runs only them)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CLI = "import sys; from foundry.app.cli.main import main; sys.argv[0] = 'foundry'; main()"


@pytest.fixture
def foundry_proc():
    """`foundry ARGS...` as its own process (real argv, stdin, exit code): CompletedProcess."""
    def run(*args: str, input: str | bytes | None = None, timeout: float = 60, cwd=None):
        data = input.encode() if isinstance(input, str) else input
        return subprocess.run([sys.executable, "-c", CLI, *args], input=data, capture_output=True,
                              timeout=timeout, env=dict(os.environ), cwd=cwd)

    return run
