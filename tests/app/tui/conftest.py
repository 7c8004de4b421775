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
def plane(cp):
    """The real control plane (tests/app/conftest.py's `cp`, which cleans up live runs)."""
    return cp


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


async def until(pilot, predicate, timeout: float = 120.0, what: str = "condition"):
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
    notes = [n.message for n in pilot.app._notifications]
    workers = [(w.name, w.state.name, str(w.error)[:200] if w.error else None) for w in pilot.app.workers]
    raise AssertionError(f"timed out waiting for {what}; notifications: {notes}; workers: {workers}")


async def press(pilot, button_id: str) -> None:
    """Press a dialog's button (as a click would, but a notification toast over it cannot eat it)."""
    from textual.widgets import Button

    pilot.app.screen.query_one(f"#{button_id}", Button).press()
    await pilot.pause()


def cell(table, key: str, column: str) -> str:
    value = table.get_cell(key, column)
    return str(getattr(value, "plain", value))


def screen_text(app) -> str:
    """Everything on screen as text (the screenshot SVG, entities decoded), for 'shown / never shown'."""
    import html

    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


@pytest.fixture
def tui():
    """Helpers for Pilot tests: make_app, until, cell, text, press (a button), run (a coroutine, as the test body)."""
    return SimpleNamespace(make_app=make_app, until=until, cell=cell, text=screen_text, run=asyncio.run,
                           press=press)


# --- deterministic data for snapshots -------------------------------------------------------------
SNAP_HOME = "/tmp/foundry-tui-snapshots"
NOW = 1_800_000_000.0


def _fake_plane_class():
    from foundry.app.control import ControlPlane
    from foundry.app.control.models import ClusterInfo, Resumption, RunInfo, SecretInfo
    from foundry.app.control.runs import Runs

    def run(name, status, cluster, res, created, max_steps=1000):
        resumptions = [Resumption(i, c, "local", 1, d, s, f"job-{i}", started_at=created + 60 * i,
                                  ended_at=None if s == "running" else created + 60 * i + 50, cause=cause)
                       for i, (c, d, s, cause) in enumerate(res)]
        spec = {"name": name, "command": "python train.py", "compute": {"cluster": cluster, "gpus": 2},
                "parameters": {"max_duration": f"{max_steps}ba", "save_folder": SNAP_HOME + "/ckpt/{run_name}",
                               "save_interval": "100ba", "autoresume": True}}
        return RunInfo(name, f"id-{name}", status, cluster, 1, resumptions[-1].devices, created, created,
                       2, 0, spec, resumptions)

    RUNS = [
        run("gpt-small", "running", "gpu-box", [("local", 2, "paused", "create"), ("gpu-box", 4, "running", "resume")],
            NOW - 3 * 3600),
        run("bert-base", "paused", "local", [("local", 2, "paused", "create")], NOW - 26 * 3600),
        run("vit-tiny", "completed", "local", [("local", 1, "completed", "create")], NOW - 3 * 86400),
    ]
    METRICS = {
        "gpt-small": [{"step": s, "loss": 4.0 / (1 + 0.02 * s) + 0.05 * ((s * 7) % 5), "throughput": 8 + (s % 9) / 3,
                       "resumption": 0 if s <= 120 else 1} for s in range(0, 241, 4)],
        "bert-base": [{"step": s, "loss": 2.0 / (1 + 0.01 * s), "throughput": 12.0, "resumption": 0}
                      for s in range(0, 400, 10)],
        "vit-tiny": [{"step": s, "loss": 1.0 / (1 + 0.1 * s), "throughput": 30.0, "resumption": 0}
                     for s in range(0, 1001, 50)],
    }

    class FakeRuns(Runs):
        """The real runs service, answering runs/metrics/logs with fixed data."""

        def list(self, reconcile=True):
            return RUNS

        def get(self, name, reconcile=True):
            return next(r for r in RUNS if r.name == name)

        def metrics(self, name):
            return METRICS[name]

        def logs(self, name, resumption=None, rank=None, follow=False):
            return iter([f"[rank 0] step {s} loss {m['loss']:.4f}" for m in METRICS[name][-8:] for s in [m["step"]]])

    class FakePlane(ControlPlane):
        """The real facade over a fixed home, with fixed runs (FakeRuns), clusters and secrets."""

        def __init__(self, home):
            super().__init__(home)
            self.runs = FakeRuns(self.paths, self.registry, self.clusters, self.secrets, self.launcher)

        def list_clusters(self):
            return [ClusterInfo("local", "local", 2, 1, "ready"), ClusterInfo("gpu-box", "slurm", 8, 2, "ready"),
                    ClusterInfo("eks-prod", "kubernetes", None, None, "error: no kubeconfig context 'prod'")]

        def list_secrets(self):
            return [SecretInfo("r2-creds", "s3", NOW - 86400, ["access_key_id", "endpoint", "secret_access_key"],
                               {"endpoint": "https://acct.r2.cloudflarestorage.com"}),
                    SecretInfo("gcp-sa", "gcp", NOW - 2 * 86400, ["credentials", "project"], {"project": "ml-prod"}),
                    SecretInfo("wandb", "env", NOW - 3 * 86400, ["key", "value"], {"key": "WANDB_API_KEY"})]

    return FakePlane


@pytest.fixture
def snapshot_app(tmp_path_factory):
    """make(**kwargs) -> FoundryApp over fixed runs, clusters, secrets and two small datasets, at a fixed clock.

    The data lives at a fixed path because the screens show it; a lock (beside pytest's own temp
    folders) keeps concurrent sessions out of each other's way, and the folder is removed afterwards.
    The clock's timezone is UTC for the test only."""
    import os
    import shutil
    import time

    from filelock import FileLock

    lock = FileLock(str(tmp_path_factory.getbasetemp().parent / "foundry-tui-snapshots.lock"))
    old_tz = os.environ.get("TZ")
    with lock:
        os.environ["TZ"] = "UTC"
        time.tzset()
        try:
            yield from _snapshot_app()
        finally:
            if old_tz is None:
                os.environ.pop("TZ", None)
            else:
                os.environ["TZ"] = old_tz
            time.tzset()
            shutil.rmtree(SNAP_HOME, ignore_errors=True)


def _snapshot_app():
    import shutil

    from foundry.app.control.datasets import DatasetRegistry, convert_to_mds

    shutil.rmtree(SNAP_HOME, ignore_errors=True)
    home = __import__("pathlib").Path(SNAP_HOME)
    (home / "src").mkdir(parents=True)
    src = home / "src" / "reviews.jsonl"
    src.write_text("".join(f'{{"text": "review {i}: {"great" if i % 2 else "meh"} product", "stars": {i % 5 + 1}}}\n'
                           for i in range(120)))
    convert_to_mds(src, str(home / "data" / "reviews"), compression="zstd")
    from PIL import Image

    for label, color in (("cat", (220, 120, 40)), ("dog", (60, 90, 200))):
        (home / "src" / "pets" / label).mkdir(parents=True)
        img = Image.new("RGB", (24, 16), color)
        for x in range(24):
            img.putpixel((x, 8), (255, 255, 255))
        img.save(home / "src" / "pets" / label / "0.png")
    convert_to_mds(home / "src" / "pets", str(home / "data" / "pets"))
    from foundry.trainer.checkpoint.format import LATEST, MANIFEST, pointer_bytes

    for name, size in (("ep0-ba100", 4096), ("ep0-ba200", 4096), ("ep0-ba240", 1000)):
        folder = home / "ckpt" / "gpt-small" / name
        folder.mkdir(parents=True)
        (folder / "model.pt").write_bytes(b"w" * size)
        if name != "ep0-ba240":  # the newest is still uploading: no manifest yet
            (folder / MANIFEST).write_bytes(b"{}")
    (home / "ckpt" / "gpt-small" / LATEST).write_bytes(pointer_bytes("ep0-ba200", b"{}"))
    plane = _fake_plane_class()(home / "foundry")
    registry = DatasetRegistry(plane.paths.home)
    registry.add(str(home / "data" / "reviews"), "reviews")
    registry.add(str(home / "data" / "pets"), "pets")

    def make(**kwargs):
        kwargs.setdefault("refresh_interval", 30.0)
        return make_app(plane, clock=lambda: NOW, **kwargs)

    yield make
