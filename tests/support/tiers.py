"""Test tiers by cost (a pytest plugin; tests/conftest.py loads it).

A test that starts Python or torch processes or runs (`subprocess`), real servers (`integration`),
Slurm (`slurm`), the mosaicml-streaming peer environment (`peer`), namespace nodes (`multinode`) or
breaks things on purpose (`chaos`) carries that mark, and every cost mark implies the generic
`slow`: the fast tier is `-m "not slow"` (scripts/test.sh), everything is `scripts/test.sh --all`
(CI). Most marks come from the fixtures a test uses and its folder (below), so test files carry
only the marks nothing here can see: a test that starts a process itself says so.

Under CI (CI=true) a test whose body runs longer than 5 s with no cost mark fails and names the mark
to add, so the marks stay true and the fast tier fast. The 5 s are for an idle machine: they grow
with the load per core (a busy machine stretches every test alike; the fast tier's slowest tests
take 3-4 s at a load of 1-2 on 2 cores). FOUNDRY_UNMARKED_LIMIT_S=N sets a fixed limit instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# What a fixture costs, as the marks of every test that uses it (directly or through another fixture).
COST_OF_FIXTURE = {
    "s3_server": ("integration",),
    "gcs_server": ("integration",),
    "slurm_cluster": ("integration", "slurm"),
    "mn_clusters": ("integration", "multinode"),
    "mosaic_peer": ("peer",),
    "foundry_proc": ("subprocess",),  # the CLI as its own process (tests/chaos)
    "pausable": ("subprocess",),      # a job script for runs on the local cluster (tests/app)
    "run_yaml": ("subprocess",),      # the same, as a run spec (tests/app/tui)
}
# What a folder below tests/ costs.
COST_OF_FOLDER = {"multinode": ("integration", "multinode"), "chaos": ("chaos",)}
COST_MARKS = frozenset({"slow", "integration", "subprocess", "slurm", "peer", "multinode", "chaos"})
TESTS = Path(__file__).resolve().parents[1]


IDLE_LIMIT_S = 5.0
# (limit in seconds, whether it grows with the load), None when not under CI
CHECK = pytest.StashKey["tuple[float, bool] | None"]()


def pytest_configure(config):
    # read once, when the session starts: a test that sets CI or the limit changes nothing for itself
    under_ci = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
    fixed = os.environ.get("FOUNDRY_UNMARKED_LIMIT_S")
    config.stash[CHECK] = ((float(fixed), False) if fixed else (IDLE_LIMIT_S, True)) if under_ci else None


def _limit_now(limit: float, scaled: bool) -> float:
    return limit * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)) if scaled else limit


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            folder = item.path.relative_to(TESTS).parts[0]
        except ValueError:
            folder = ""
        costs = set(COST_OF_FOLDER.get(folder, ()))
        for name in item.fixturenames:
            costs.update(COST_OF_FIXTURE.get(name, ()))
        present = {m.name for m in item.iter_markers()}
        if (costs | present) & COST_MARKS:
            costs.add("slow")
        for name in sorted(costs - present):
            item.add_marker(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    check = item.config.stash.get(CHECK, None)
    if check is None or report.when != "call" or not report.passed or item.get_closest_marker("slow"):
        return
    limit = _limit_now(*check)
    if report.duration > limit:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} ran {report.duration:.1f} s (over {limit:.3g} s) with no cost mark: add "
            "@pytest.mark.subprocess if it starts processes or runs, else @pytest.mark.slow (markers: "
            "pyproject.toml [tool.pytest.ini_options]), or make it faster")
