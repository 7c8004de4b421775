"""The launcher's planning: one plan per launch (create_run used to plan twice), one describe() per
plan, and a cluster that cannot describe itself now (a FoundryError) is "unknown", while any other
exception from describe() is a bug that surfaces instead of passing for "has GPUs"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from foundry.app.control.launch import Placement, describe_cluster, wants_gpus
from foundry.backends.compute.local import LocalProvider
from foundry.plugins.errors import ProviderError


def _provider(describe, gpus=True):
    return SimpleNamespace(capabilities=SimpleNamespace(gpus=gpus), describe=describe)


@pytest.mark.subprocess
def test_create_run_plans_and_describes_once(cp, monkeypatch):
    calls = {"dryrun": 0, "describe": 0}
    dryrun, describe = LocalProvider.dryrun, LocalProvider.describe

    def counting(name, real):
        def wrapper(self, *args, **kwargs):
            calls[name] += 1
            return real(self, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(LocalProvider, "dryrun", counting("dryrun", dryrun))
    monkeypatch.setattr(LocalProvider, "describe", counting("describe", describe))
    run = cp.create_run({"name": "planned-once", "command": "true"})
    assert calls == {"dryrun": 1, "describe": 1}
    # the plan made before the run existed carries the run's own id
    assert cp.wait(run.name, timeout=60).status == "completed"
    assert cp.registry.get_run("planned-once").id == run.id


def test_a_cluster_that_cannot_describe_itself_is_unknown():
    def unreachable():
        raise ProviderError("slurm: `sinfo` did not answer in 30 s")

    provider = _provider(unreachable)
    assert describe_cluster(provider) is None
    assert wants_gpus(provider, Placement("c", 1, 1), None) is True  # unknown: the capability decides


def test_a_bug_in_describe_is_not_taken_for_gpus():
    def broken():
        raise TypeError("'NoneType' object is not subscriptable")

    with pytest.raises(TypeError):
        describe_cluster(_provider(broken))


@pytest.mark.parametrize("desc, gpu_type, expected", [
    ({"gpus": 0}, None, False), ({"gpus": 4}, None, True), ({}, None, True),
    ({"gpus": 4}, "cpu", False), ({"gpus": 0}, "a100", True)])
def test_wants_gpus_reads_one_description(desc, gpu_type, expected):
    provider = _provider(lambda: desc)
    assert wants_gpus(provider, Placement("c", 1, 1, gpu_type), desc) is expected
    assert wants_gpus(_provider(lambda: desc, gpus=False), Placement("c", 1, 1, gpu_type), desc) is False
