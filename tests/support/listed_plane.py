"""A control plane over a run list the test changes between refreshes (a new run appearing, a run
finishing), with metrics rows a test writes: the real facade, secrets, clusters and datasets over
a tmp FOUNDRY_HOME; only the runs' list and metrics are fixed (no jobs are launched)."""

from __future__ import annotations

import time


def make_run(name: str, status: str, created: float, max_steps: int = 2000, env: dict | None = None,
             cluster: str = "local"):
    from foundry.app.control.models import Resumption, RunInfo

    res = [Resumption(0, cluster, "local", 1, 2, status, "job-0", started_at=created,
                      ended_at=None if status in ("pending", "running") else created + 130)]
    spec = {"name": name, "command": "python job.py", "compute": {"cluster": "local", "gpus": 2},
            "env_variables": env or {}, "parameters": {"max_duration": f"{max_steps}ba"}}
    return RunInfo(name, f"id-{name}", status, cluster, 1, 2, created, created, 0, 0, spec, res)


def listed_plane(home, runs: list, metrics: dict):
    """A ControlPlane whose runs are `runs` (the list, as it is at each refresh) and `metrics`."""
    from foundry.app.control import ControlPlane
    from foundry.app.control.runs import Runs

    class ListedRuns(Runs):
        def list(self, reconcile=True):
            return list(runs)

        def get(self, name, reconcile=True):
            return next(r for r in runs if r.name == name)

        def metrics(self, name):
            return metrics.get(name, [])

    class ListedPlane(ControlPlane):
        def __init__(self, home):
            super().__init__(home)
            self.runs = ListedRuns(self.paths, self.registry, self.clusters, self.secrets, self.launcher)

    return ListedPlane(home)


def now() -> float:
    return time.time()
