"""Fixtures for the chaos probes: the CLI in-process and as a real process, a ControlPlane, and
every test in this folder marked `chaos` (CI runs them; `-m chaos` runs only them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.chaos)


@pytest.fixture
def cp():
    from foundry.app.control import ControlPlane

    plane = ControlPlane()
    yield plane
    for run in plane.registry.list_runs():
        if run.latest and run.latest.state in ("pending", "running", "stopping"):
            try:
                plane.delete_run(run.name)
            except Exception:
                pass


@pytest.fixture
def cli(capsys):
    """`foundry ARGS...` in-process: (exit code, stdout, stderr)."""
    from foundry.app.cli.main import main
    from foundry.app.cli.output import sink

    def invoke(*args: str, stdin: str | None = None):
        sink.json_mode = False
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        finally:
            sink.json_mode = False
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


CLI = "import sys; from foundry.app.cli.main import main; sys.argv[0] = 'foundry'; main()"


@pytest.fixture
def foundry_proc():
    """`foundry ARGS...` as its own process (real argv, stdin, exit code): CompletedProcess."""
    def run(*args: str, input: str | bytes | None = None, timeout: float = 60, cwd=None):
        data = input.encode() if isinstance(input, str) else input
        return subprocess.run([sys.executable, "-c", CLI, *args], input=data, capture_output=True,
                              timeout=timeout, env=dict(os.environ), cwd=cwd)

    return run
