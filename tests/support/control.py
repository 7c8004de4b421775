"""Fixtures and helpers for tests that drive the control plane: `cp` (a ControlPlane on the test's
FOUNDRY_HOME, its active runs deleted afterwards), `cli` (`foundry ARGS...` in-process, returning
(exit code, stdout, stderr)) and `wait_for` (poll a predicate until it is truthy)."""

from __future__ import annotations

import time

import pytest


def wait_for(predicate, timeout: float = 60.0, poll: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"{what} not reached in {timeout:.0f}s")


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
    """Run `foundry ARGS...` in-process; returns (exit_code, stdout, stderr)."""
    from foundry.app.cli.main import main
    from foundry.app.cli.output import sink

    def invoke(*args: str):
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
