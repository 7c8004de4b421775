"""TUI fixtures: the real control plane in the isolated FOUNDRY_HOME, a pausable job that writes
metrics.jsonl, and Pilot helpers that wait for what a person would wait for on screen."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from types import SimpleNamespace

import pytest

# A trainer stand-in: one metrics row per step (rank 0), checkpoints its step on SIGTERM and exits 75.
JOB = textwrap.dedent("""
    import json, os, signal, sys, time
    stop = False
    def on_term(*_):
        global stop
        stop = True
    signal.signal(signal.SIGTERM, on_term)
    state = os.path.join(os.environ["FOUNDRY_RUN_DIR"], "step.txt")
    step = int(open(state).read()) if os.path.exists(state) else 0
    rank, res = int(os.environ.get("RANK", "0")), int(os.environ["RESUMPTION_INDEX"])
    max_steps = int(os.environ.get("MAX_STEPS", "100000"))
    print(f"rank {rank} starting at step {step} (resumption {res})", flush=True)
    while step < max_steps:
        if stop:
            if rank == 0:
                open(state, "w").write(str(step))
            print(f"paused at step {step}", flush=True)
            sys.exit(75)
        time.sleep(0.05)
        step += 1
        if rank == 0:
            with open(os.environ["FOUNDRY_METRICS_FILE"], "a") as fh:
                fh.write(json.dumps({"step": step, "loss": 3.0 / (1 + 0.05 * step), "throughput": 20.0,
                                     "max_steps": max_steps, "resumption": res, "time": time.time()}) + "\\n")
    print("done", flush=True)
""")


@pytest.fixture
def plane():
    from foundry.app.control import ControlPlane

    cp = ControlPlane()
    yield cp
    for run in cp.registry.list_runs():
        if run.latest and run.latest.state in ("pending", "running", "stopping"):
            try:
                cp.delete_run(run.name)
            except Exception:
                pass


@pytest.fixture
def run_yaml(tmp_path):
    """A run spec file for the pausable job (name `tiny`, 1 process on `local`)."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    spec = tmp_path / "run.yaml"
    spec.write_text(f"name: tiny\ncommand: [{sys.executable}, {job}]\ncompute: {{cluster: local, gpus: 1}}\n")
    return spec


def make_app(plane, **kwargs):
    from foundry.app.tui.app import FoundryApp

    kwargs.setdefault("refresh_interval", 0.3)
    return FoundryApp(plane, **kwargs)


async def until(pilot, predicate, timeout: float = 60.0, what: str = "condition"):
    """Pause the pilot until predicate() is truthy (a person waiting for the screen to change)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        await pilot.pause(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def cell(table, key: str, column: str) -> str:
    value = table.get_cell(key, column)
    return str(getattr(value, "plain", value))


def screen_text(app) -> str:
    """Everything on screen as text (the screenshot SVG, entities decoded), for 'shown / never shown'."""
    import html

    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


@pytest.fixture
def tui():
    """Helpers for Pilot tests: make_app, until, cell, text, run (a coroutine, as the test body)."""
    return SimpleNamespace(make_app=make_app, until=until, cell=cell, text=screen_text, run=asyncio.run)
